// Cast, ConstantOfShape, Range, EyeLike, OneHot, ArgMax/ArgMin, TopK, CumSum, Trilu, NonZero, Compress: values of
// edge cases and errors for sizes a model could make absurd.
#include <cmath>
#include <limits>

#include "core/half.h"
#include "ops/movement_test_util.h"
#include "test_util.h"

namespace qd {
namespace {

using mvtest::attrs;
using mvtest::f32;
using mvtest::i64;
using mvtest::i64v;
using mvtest::iota_f32;
using mvtest::op_error;
using test::run_op;
using test::values;

TEST(CastTest, EdgeValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = f32({6}, {-1.7f, 2.9f, nan, 300.f, -0.f, 65504.f});
  auto to_i32 = run_op(OpType::Cast, attrs({{"to", int64_t{6}}}), {x});
  ASSERT_TRUE(to_i32) << to_i32.status().to_string();
  EXPECT_EQ(values((*to_i32)[0]), (std::vector<double>{-1, 2, 0, 300, 0, 65504}));
  auto to_bool = run_op(OpType::Cast, attrs({{"to", int64_t{9}}}), {x});
  ASSERT_TRUE(to_bool);
  EXPECT_EQ(values((*to_bool)[0]), (std::vector<double>{1, 1, 1, 1, 0, 1}));
  auto to_half = run_op(OpType::Cast, attrs({{"to", int64_t{10}}}), {x});
  ASSERT_TRUE(to_half);
  EXPECT_EQ((*to_half)[0].data<uint16_t>()[5], float_to_half(65504.f));
  auto back = run_op(OpType::Cast, attrs({{"to", int64_t{1}}}), {(*to_half)[0]});
  ASSERT_TRUE(back);
  EXPECT_EQ((*back)[0].data<float>()[1], half_to_float(float_to_half(2.9f)));
  // Integer narrowing wraps (as numpy and C++ do).
  auto narrow = run_op(OpType::Cast, attrs({{"to", int64_t{3}}}), {i64v({127, 128, -129, int64_t{1} << 40})});
  ASSERT_TRUE(narrow);
  EXPECT_EQ(values((*narrow)[0]), (std::vector<double>{127, -128, 127, 0}));
  // Exactness of int64 through a same-type cast and to uint64.
  auto same = run_op(OpType::Cast, attrs({{"to", int64_t{7}}}), {i64v({std::numeric_limits<int64_t>::max()})});
  ASSERT_TRUE(same);
  EXPECT_EQ((*same)[0].data<int64_t>()[0], std::numeric_limits<int64_t>::max());
  const Status s = op_error(OpType::Cast, attrs({{"to", int64_t{8}}}), {x});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("string"), std::string::npos);
  EXPECT_EQ(op_error(OpType::Cast, attrs({{"to", int64_t{-5}}}), {x}).code(), StatusCode::kUnsupported);
  auto like = run_op(OpType::CastLike, {}, {x, i64v({0})});
  ASSERT_TRUE(like);
  EXPECT_EQ((*like)[0].dtype(), DType::kInt64);
}

TEST(GenerateTest, ConstantOfShapeRangeEyeLike) {
  Tensor v(DType::kInt32, {1});
  v.data<int32_t>()[0] = 7;
  auto c = run_op(OpType::ConstantOfShape, attrs({{"value", v}}), {i64v({2, 3})});
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ((*c)[0].dtype(), DType::kInt32);
  EXPECT_EQ(values((*c)[0]), std::vector<double>(6, 7.0));
  auto scalar = run_op(OpType::ConstantOfShape, {}, {Tensor(DType::kInt64, {0})});
  ASSERT_TRUE(scalar);
  EXPECT_EQ((*scalar)[0].shape(), Shape{});
  QD_EXPECT_INVALID(op_error(OpType::ConstantOfShape, {}, {i64v({2, -3})}), "negative");
  QD_EXPECT_INVALID(op_error(OpType::ConstantOfShape, {}, {i64v({1 << 30, 1 << 30})}), "2^40");

  auto r = run_op(OpType::Range, {}, {mvtest::i64s(10), mvtest::i64s(1), mvtest::i64s(-4)});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{10, 6, 2}));
  auto rf = run_op(OpType::Range, {}, {f32({}, {0.f}), f32({}, {1.f}), f32({}, {0.25f})});
  ASSERT_TRUE(rf);
  EXPECT_EQ(values((*rf)[0]), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  QD_EXPECT_INVALID(op_error(OpType::Range, {}, {mvtest::i64s(0), mvtest::i64s(5), mvtest::i64s(0)}), "delta is 0");
  QD_EXPECT_INVALID(op_error(OpType::Range, {}, {mvtest::i64s(std::numeric_limits<int64_t>::min()),
                                                 mvtest::i64s(std::numeric_limits<int64_t>::max()), mvtest::i64s(1)}),
                    "2^40");
  const float inf = std::numeric_limits<float>::infinity();
  QD_EXPECT_INVALID(op_error(OpType::Range, {}, {f32({}, {0.f}), f32({}, {inf}), f32({}, {1.f})}), "2^40");
  QD_EXPECT_INVALID(op_error(OpType::Range, {}, {f32({}, {0.f}), mvtest::i64s(1), f32({}, {1.f})}), "one type");

  auto e = run_op(OpType::EyeLike, attrs({{"k", int64_t{-1}}, {"dtype", int64_t{9}}}), {iota_f32({3, 2})});
  ASSERT_TRUE(e) << e.status().to_string();
  EXPECT_EQ((*e)[0].dtype(), DType::kBool);
  EXPECT_EQ(values((*e)[0]), (std::vector<double>{0, 0, 1, 0, 0, 1}));
  auto far = run_op(OpType::EyeLike, attrs({{"k", std::numeric_limits<int64_t>::min()}}), {iota_f32({2, 2})});
  ASSERT_TRUE(far);
  EXPECT_EQ(values((*far)[0]), std::vector<double>(4, 0.0));
  QD_EXPECT_INVALID(op_error(OpType::EyeLike, {}, {iota_f32({2})}), "2-D");
}

TEST(GenerateTest, OneHot) {
  auto r = run_op(OpType::OneHot, attrs({{"axis", int64_t{0}}}), {i64v({0, -1, 3, 7}), mvtest::i64s(3), f32({2}, {-1, 5})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{3, 4}));
  // Out-of-range indices (3, 7) give an all-off column.
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{5, -1, -1, -1, -1, -1, -1, -1, -1, 5, -1, -1}));
  QD_EXPECT_INVALID(op_error(OpType::OneHot, {}, {i64v({0}), mvtest::i64s(-3), f32({2}, {0, 1})}), "depth");
  QD_EXPECT_INVALID(op_error(OpType::OneHot, {}, {i64v({0}), mvtest::i64s(3), f32({3}, {0, 1, 2})}), "off_value");
  QD_EXPECT_INVALID(op_error(OpType::OneHot, attrs({{"axis", int64_t{3}}}), {i64v({0}), mvtest::i64s(3), f32({2}, {0, 1})}),
                    "out of range");
}

TEST(ArgTopKTest, TiesNaNAndErrors) {
  const Tensor x = f32({2, 3}, {1, 3, 3, 2, 2, 0});
  auto first = run_op(OpType::ArgMax, attrs({{"axis", int64_t{1}}}), {x});
  ASSERT_TRUE(first);
  EXPECT_EQ(values((*first)[0]), (std::vector<double>{1, 0}));
  auto last = run_op(OpType::ArgMax, attrs({{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}, {"keepdims", int64_t{0}}}), {x});
  ASSERT_TRUE(last);
  EXPECT_EQ((*last)[0].shape(), Shape{2});
  EXPECT_EQ(values((*last)[0]), (std::vector<double>{2, 1}));
  auto mn = run_op(OpType::ArgMin, {}, {x});
  ASSERT_TRUE(mn);
  EXPECT_EQ(values((*mn)[0]), (std::vector<double>{0, 1, 1}));
  QD_EXPECT_INVALID(op_error(OpType::ArgMax, attrs({{"axis", int64_t{2}}}), {x}), "out of range");

  auto t = run_op(OpType::TopK, {}, {x, i64v({2})}, 2);
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_EQ(values((*t)[0]), (std::vector<double>{3, 3, 2, 2}));
  EXPECT_EQ(values((*t)[1]), (std::vector<double>{1, 2, 0, 1}));  // equal values: lower index first
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto tn = run_op(OpType::TopK, attrs({{"largest", int64_t{0}}}), {f32({4}, {nan, 1, nan, 0}), i64v({4})}, 2);
  ASSERT_TRUE(tn) << tn.status().to_string();
  EXPECT_EQ(values((*tn)[1]), (std::vector<double>{3, 1, 0, 2}));
  QD_EXPECT_INVALID(op_error(OpType::TopK, {}, {x, i64v({4})}, 2), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::TopK, {}, {x, i64v({-1})}, 2), "out of range");
}

TEST(CumSumTriluTest, ValuesAndErrors) {
  const Tensor x = iota_f32({2, 3});
  auto c = run_op(OpType::CumSum, attrs({{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}), {x, mvtest::i64s(-1)});
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(values((*c)[0]), (std::vector<double>{3, 2, 0, 9, 5, 0}));
  QD_EXPECT_INVALID(op_error(OpType::CumSum, {}, {x, mvtest::i64s(2)}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::CumSum, {}, {x, i64v({0, 1})}), "one element");

  auto u = run_op(OpType::Trilu, {}, {iota_f32({3, 3}), mvtest::i64s(1)});
  ASSERT_TRUE(u);
  EXPECT_EQ(values((*u)[0]), (std::vector<double>{0, 1, 2, 0, 0, 5, 0, 0, 0}));
  auto l = run_op(OpType::Trilu, attrs({{"upper", int64_t{0}}}), {iota_f32({3, 3}), mvtest::i64s(std::numeric_limits<int64_t>::min())});
  ASSERT_TRUE(l);
  EXPECT_EQ(values((*l)[0]), std::vector<double>(9, 0.0));
  QD_EXPECT_INVALID(op_error(OpType::Trilu, {}, {iota_f32({3})}), "rank >= 2");
}

TEST(SelectTest, NonZeroAndCompressNeedKnownData) {
  auto nz = run_op(OpType::NonZero, {}, {f32({2, 2}, {0, 1, -0.f, 2})});
  ASSERT_TRUE(nz) << nz.status().to_string();
  EXPECT_EQ((*nz)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values((*nz)[0]), (std::vector<double>{0, 1, 1, 1}));
  Tensor cond(DType::kBool, {3});
  cond.data<uint8_t>()[0] = 1;
  cond.data<uint8_t>()[2] = 1;
  auto cp = run_op(OpType::Compress, attrs({{"axis", int64_t{1}}}), {iota_f32({2, 3}), cond});
  ASSERT_TRUE(cp) << cp.status().to_string();
  EXPECT_EQ(values((*cp)[0]), (std::vector<double>{0, 2, 3, 5}));
  QD_EXPECT_INVALID(op_error(OpType::Compress, attrs({{"axis", int64_t{1}}}), {iota_f32({2, 2}), cond}), "3 entries");

  // Without known data the output size is unknown: unsupported, with a reason.
  Node n;
  n.name = "nz";
  n.op = OpType::NonZero;
  n.opset = 13;
  n.inputs = {0};
  n.outputs = {1};
  InferCtx ctx(n, {DType::kFloat32}, {{4}}, {nullptr});
  const Status s = infer_node(ctx);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("depends on the values"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace qd
