// QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear: the INT8 contract's rounding (half to even), saturation,
// per-axis scales, and the errors a bad Q/DQ node gives.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nn_test_util.h"
#include "test_util.h"
#include "ops/quantize.h"

namespace qd {
namespace {

using test::run_op;
using test::tensor_f32;
using test::tensor_of;
using test::values;

AttrMap axis_attr(int64_t axis) {
  AttrMap a;
  a.set("axis", axis);
  return a;
}

Tensor i8(const Shape& s, const std::vector<int>& v) { return tensor_of(DType::kInt8, s, v); }
Tensor u8(const Shape& s, const std::vector<int>& v) { return tensor_of(DType::kUInt8, s, v); }

TEST(RoundHalfEven, TiesGoToEven) {
  EXPECT_EQ(ops::round_half_even(0.5), 0);
  EXPECT_EQ(ops::round_half_even(1.5), 2);
  EXPECT_EQ(ops::round_half_even(2.5), 2);
  EXPECT_EQ(ops::round_half_even(3.5), 4);
  EXPECT_EQ(ops::round_half_even(-0.5), 0);
  EXPECT_EQ(ops::round_half_even(-1.5), -2);
  EXPECT_EQ(ops::round_half_even(-2.5), -2);
  EXPECT_EQ(ops::round_half_even(2.4999999), 2);
  EXPECT_EQ(ops::round_half_even(2.5000001), 3);
  EXPECT_EQ(ops::round_half_even(-127.5), -128);
  EXPECT_EQ(ops::round_half_even(1e300), 1e300);
  EXPECT_TRUE(std::isnan(ops::round_half_even(NAN)));
}

TEST(QuantizeLinear, RoundsExactTiesHalfToEven) {
  // x / scale lands exactly on .5 for every element.
  const Tensor x = tensor_f32({8}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.5f, -3.5f});
  auto y = run_op(OpType::QuantizeLinear, {}, {x, Tensor::scalar_f32(1.0f), i8({}, {0})});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kInt8);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-2, -2, 0, 0, 2, 2, 4, -4}));

  // Same ties through a scale of 0.5 (x / 0.5 is exact in float32) and a zero point.
  const Tensor x2 = tensor_f32({4}, {0.25f, 0.75f, -0.25f, -0.75f});
  auto y2 = run_op(OpType::QuantizeLinear, {}, {x2, Tensor::scalar_f32(0.5f), u8({}, {10})});
  ASSERT_TRUE(y2) << y2.status().to_string();
  EXPECT_EQ(values((*y2)[0]), (std::vector<double>{10, 12, 10, 8}));
}

TEST(QuantizeLinear, SaturatesInt8AtMinus128And127) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = tensor_f32({10}, {-129.f, -128.5f, -128.f, -127.5f, 127.f, 127.5f, 128.f, 1e30f, -inf, inf});
  auto y = run_op(OpType::QuantizeLinear, {}, {x, Tensor::scalar_f32(1.0f), i8({}, {0})});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-128, -128, -128, -128, 127, 127, 127, 127, -128, 127}));

  // The zero point is added before saturation.
  auto y2 = run_op(OpType::QuantizeLinear, {}, {tensor_f32({3}, {-130.f, 0.f, 120.f}), Tensor::scalar_f32(1.0f), i8({}, {10})});
  ASSERT_TRUE(y2);
  EXPECT_EQ(values((*y2)[0]), (std::vector<double>{-120, 10, 127}));
}

TEST(QuantizeLinear, Uint8DefaultWithoutZeroPoint) {
  auto y = run_op(OpType::QuantizeLinear, {}, {tensor_f32({4}, {-3.f, 0.f, 10.f, 1000.f}), Tensor::scalar_f32(2.0f)});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kUInt8);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{0, 0, 5, 255}));
}

TEST(QuantizeLinear, NanQuantizesToZeroPoint) {
  auto y = run_op(OpType::QuantizeLinear, {}, {tensor_f32({1}, {NAN}), Tensor::scalar_f32(1.0f), u8({}, {128})});
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{128}));
}

TEST(QuantizeLinear, PerAxis0) {
  // x [2, 3]; row 0 uses scale 1 / zp 0, row 1 scale 2 / zp 10.
  const Tensor x = tensor_f32({2, 3}, {1.f, 2.5f, -3.f, 1.f, 5.f, -300.f});
  auto y = run_op(OpType::QuantizeLinear, axis_attr(0), {x, tensor_f32({2}, {1.f, 2.f}), i8({2}, {0, 10})});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{1, 2, -3, 10, 12, -128}));
}

TEST(QuantizeLinear, PerAxis1AndNegativeAxis) {
  // x [2, 3, 2]; channel c (dim 1) uses scale {1, 2, 4}[c], zp {0, 1, -1}[c].
  const Tensor x = tensor_f32({2, 3, 2}, {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6});
  const Tensor s = tensor_f32({3}, {1.f, 2.f, 4.f});
  const Tensor z = i8({3}, {0, 1, -1});
  // c1: 3/2 = 1.5 -> 2, +1 = 3; c2: 6/4 = 1.5 -> 2, -1 = 1; -3/2 = -1.5 -> -2, +1 = -1; -6/4 = -1.5 -> -2, -1 = -3.
  const std::vector<double> want = {1, 2, 3, 3, 0, 1, -1, -2, -1, -1, -2, -3};
  auto y = run_op(OpType::QuantizeLinear, axis_attr(1), {x, s, z});
  ASSERT_TRUE(y) << y.status().to_string();
  const std::vector<double> got = values((*y)[0]);
  EXPECT_EQ(got, want);
  auto y2 = run_op(OpType::QuantizeLinear, axis_attr(-2), {x, s, z});
  ASSERT_TRUE(y2);
  EXPECT_EQ(values((*y2)[0]), got);
}

TEST(DequantizeLinear, PerTensorAndPerAxis) {
  auto y = run_op(OpType::DequantizeLinear, {}, {i8({3}, {-128, 0, 127}), Tensor::scalar_f32(0.5f), i8({}, {-1})});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kFloat32);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-63.5, 0.5, 64}));

  // axis 0
  auto y0 = run_op(OpType::DequantizeLinear, axis_attr(0),
                   {u8({2, 2}, {10, 20, 10, 20}), tensor_f32({2}, {1.f, 0.25f}), u8({2}, {10, 0})});
  ASSERT_TRUE(y0) << y0.status().to_string();
  EXPECT_EQ(values((*y0)[0]), (std::vector<double>{0, 10, 2.5, 5}));
  // axis 1 (the default)
  auto y1 = run_op(OpType::DequantizeLinear, {}, {u8({2, 2}, {10, 20, 10, 20}), tensor_f32({2}, {1.f, 0.25f}), u8({2}, {10, 0})});
  ASSERT_TRUE(y1) << y1.status().to_string();
  EXPECT_EQ(values((*y1)[0]), (std::vector<double>{0, 5, 0, 5}));
}

TEST(QuantizeDequantize, RoundTripWithinHalfAStep) {
  const Tensor x = test::random_f32({1000}, 7, -1.0f, 1.0f);
  const float scale = 1.0f / 127;
  auto q = run_op(OpType::QuantizeLinear, {}, {x, Tensor::scalar_f32(scale), i8({}, {0})});
  ASSERT_TRUE(q);
  auto d = run_op(OpType::DequantizeLinear, {}, {(*q)[0], Tensor::scalar_f32(scale), i8({}, {0})});
  ASSERT_TRUE(d);
  EXPECT_LE(test::max_abs_diff(x, (*d)[0]), scale / 2 * 1.0001);
}

// ---- errors: a bad Q/DQ node is a clear error, never a crash ----

void expect_error(const Expected<std::vector<Tensor>>& r, StatusCode code, const std::string& fragment) {
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().to_string().find(fragment), std::string::npos) << r.status().to_string();
}

TEST(QuantizeLinearErrors, ScaleLengthMismatch) {
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  // 3 scales along axis 0, which has 2 entries.
  expect_error(run_op(OpType::QuantizeLinear, axis_attr(0), {x, tensor_f32({3}, {1, 1, 1}), i8({3}, {0, 0, 0})}),
               StatusCode::kInvalidArgument, "one scale per slice");
  expect_error(run_op(OpType::DequantizeLinear, axis_attr(1), {i8({2, 3}, {1, 2, 3, 4, 5, 6}), tensor_f32({2}, {1, 1})}),
               StatusCode::kInvalidArgument, "one scale per slice");
  // Zero point with another length than the scale.
  expect_error(run_op(OpType::QuantizeLinear, axis_attr(1), {x, tensor_f32({3}, {1, 1, 1}), i8({2}, {0, 0})}),
               StatusCode::kInvalidArgument, "must match");
  // 2-D scale.
  expect_error(run_op(OpType::QuantizeLinear, {}, {x, tensor_f32({2, 3}, {1, 1, 1, 1, 1, 1})}),
               StatusCode::kInvalidArgument, "scalar (per-tensor) or 1-D");
}

TEST(QuantizeLinearErrors, BadAxis) {
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_error(run_op(OpType::QuantizeLinear, axis_attr(2), {x, tensor_f32({3}, {1, 1, 1})}), StatusCode::kInvalidArgument,
               "out of range");
  expect_error(run_op(OpType::DequantizeLinear, axis_attr(-3), {i8({2, 3}, {1, 2, 3, 4, 5, 6}), tensor_f32({3}, {1, 1, 1})}),
               StatusCode::kInvalidArgument, "out of range");
}

TEST(QuantizeLinearErrors, PerAxisNeedsOpset13) {
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_error(run_op(OpType::QuantizeLinear, {}, {x, tensor_f32({3}, {1, 1, 1})}, 1, /*opset=*/10),
               StatusCode::kInvalidArgument, "opset 13");
}

TEST(QuantizeLinearErrors, ZeroNegativeOrNanScale) {
  const Tensor x = tensor_f32({2}, {1, 2});
  expect_error(run_op(OpType::QuantizeLinear, {}, {x, Tensor::scalar_f32(0.0f)}), StatusCode::kInvalidArgument,
               "positive and finite");
  expect_error(run_op(OpType::QuantizeLinear, {}, {x, Tensor::scalar_f32(-0.1f)}), StatusCode::kInvalidArgument,
               "positive and finite");
  expect_error(run_op(OpType::QuantizeLinear, {}, {x, Tensor::scalar_f32(NAN)}), StatusCode::kInvalidArgument,
               "positive and finite");
  expect_error(run_op(OpType::QuantizeLinear, axis_attr(0), {x, tensor_f32({2}, {1.f, 0.f})}), StatusCode::kInvalidArgument,
               "y_scale [1]");
  // DequantizeLinear only multiplies: zero or negative scales are accepted (documented), non-finite ones are not.
  auto d = run_op(OpType::DequantizeLinear, {}, {i8({2}, {3, -4}), Tensor::scalar_f32(0.0f)});
  ASSERT_TRUE(d) << d.status().to_string();
  EXPECT_EQ(values((*d)[0]), (std::vector<double>{0, 0}));
  auto dn = run_op(OpType::DequantizeLinear, {}, {i8({2}, {3, -4}), Tensor::scalar_f32(-2.0f)});
  ASSERT_TRUE(dn);
  EXPECT_EQ(values((*dn)[0]), (std::vector<double>{-6, 8}));
  expect_error(run_op(OpType::DequantizeLinear, {}, {i8({2}, {3, -4}), Tensor::scalar_f32(INFINITY)}),
               StatusCode::kInvalidArgument, "finite");
}

TEST(QuantizeLinearErrors, Types) {
  const Tensor x = tensor_f32({2}, {1, 2});
  expect_error(run_op(OpType::QuantizeLinear, {}, {x, Tensor::scalar_f32(1.f), tensor_of(DType::kInt32, {}, std::vector<int>{0})}),
               StatusCode::kUnsupported, "int8, uint8, int16 and uint16 only");
  // Opsets 19-25: blocked quantization and output types qdeploy does not hold are refused by name.
  AttrMap blocked;
  blocked.set("block_size", AttrValue(int64_t{2}));
  expect_error(run_op(OpType::QuantizeLinear, blocked, {x, Tensor::scalar_f32(1.f)}), StatusCode::kUnsupported,
               "blocked quantization");
  AttrMap int4;
  int4.set("output_dtype", AttrValue(int64_t{22}));
  expect_error(run_op(OpType::QuantizeLinear, int4, {x, Tensor::scalar_f32(1.f)}), StatusCode::kUnsupported, "int4");
  AttrMap mismatch;
  mismatch.set("output_dtype", AttrValue(int64_t{3}));  // int8, but the zero point is uint8
  expect_error(run_op(OpType::QuantizeLinear, mismatch, {x, Tensor::scalar_f32(1.f), u8({}, {0})}),
               StatusCode::kInvalidArgument, "must match");
  expect_error(run_op(OpType::DequantizeLinear, {}, {i8({2}, {1, 2}), Tensor::scalar_f32(1.f), u8({}, {0})}),
               StatusCode::kInvalidArgument, "must match");
  expect_error(run_op(OpType::DequantizeLinear, {}, {x, Tensor::scalar_f32(1.f)}), StatusCode::kUnsupported, "DequantizeLinear of float32");
}

TEST(DynamicQuantizeLinear, AllZeroInputGivesZeroScale) {
  auto y = run_op(OpType::DynamicQuantizeLinear, {}, {tensor_f32({3}, {0, 0, 0})}, 3);
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ((*y)[1].get_f64(0), 0.0);
  EXPECT_EQ((*y)[2].get_f64(0), 0.0);
  auto bad = run_op(OpType::DynamicQuantizeLinear, {}, {tensor_f32({2}, {0, INFINITY})}, 3);
  EXPECT_FALSE(bad.has_value());
}

TEST(QuantizeConformance, NodeTests) {
  QD_EXPECT_NODE_TEST("node/test_quantizelinear");
  QD_EXPECT_NODE_TEST("node/test_quantizelinear_axis");
  QD_EXPECT_NODE_TEST("node/test_dequantizelinear");
  QD_EXPECT_NODE_TEST("node/test_dequantizelinear_axis");
  QD_EXPECT_NODE_TEST("node/test_dynamicquantizelinear");
  QD_EXPECT_NODE_TEST("node/test_dynamicquantizelinear_max_adjusted");
  QD_EXPECT_NODE_TEST("node/test_dynamicquantizelinear_min_adjusted");
}

}  // namespace
}  // namespace qd
