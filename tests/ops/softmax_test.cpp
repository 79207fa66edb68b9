// Softmax / LogSoftmax / Hardmax: no overflow on large inputs, the opset-13 axis change, ties, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nn_test_util.h"

namespace qd {
namespace {

using test::run_op;
using test::tensor_f32;
using test::values;

AttrMap axis_attr(int64_t axis) {
  AttrMap a;
  a.set("axis", axis);
  return a;
}

TEST(Softmax, LargeValuesDoNotOverflow) {
  const float big = std::numeric_limits<float>::max();
  const Tensor x = tensor_f32({3, 3}, {1000, 1001, 1002, -1e30f, 0, 1e30f, big, big, -big});
  auto y = run_op(OpType::Softmax, {}, {x});
  ASSERT_TRUE(y) << y.status().to_string();
  const std::vector<double> v = values((*y)[0]);
  for (double e : v) EXPECT_TRUE(std::isfinite(e));
  EXPECT_NEAR(v[0], 0.09003057, 1e-6);
  EXPECT_NEAR(v[1], 0.24472847, 1e-6);
  EXPECT_NEAR(v[2], 0.66524096, 1e-6);
  EXPECT_EQ(v[3], 0);
  EXPECT_EQ(v[5], 1);
  EXPECT_NEAR(v[6], 0.5, 1e-7);
  EXPECT_NEAR(v[7], 0.5, 1e-7);
  EXPECT_EQ(v[8], 0);

  auto l = run_op(OpType::LogSoftmax, {}, {tensor_f32({2}, {10000, 10001})});
  ASSERT_TRUE(l);
  EXPECT_NEAR((*l)[0].get_f64(0), -1.3132617, 1e-5);
  EXPECT_NEAR((*l)[0].get_f64(1), -0.3132617, 1e-5);
}

TEST(Softmax, Opset13WorksAlongAxisOlderOpsetsFlatten) {
  const Tensor x = test::random_f32({2, 2, 3}, 3, -5, 5);
  // opset 13, axis 1: each (b, :, k) column sums to 1.
  auto y13 = run_op(OpType::Softmax, axis_attr(1), {x}, 1, 13);
  ASSERT_TRUE(y13);
  const float* p = (*y13)[0].data<float>();
  for (int b = 0; b < 2; ++b) {
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(p[b * 6 + k] + p[b * 6 + 3 + k], 1.0, 1e-6);
  }
  // opset 11, axis 1: the input is viewed as [2, 6]; each row of 6 sums to 1.
  auto y11 = run_op(OpType::Softmax, axis_attr(1), {x}, 1, 11);
  ASSERT_TRUE(y11);
  const float* q = (*y11)[0].data<float>();
  for (int b = 0; b < 2; ++b) {
    double s = 0;
    for (int i = 0; i < 6; ++i) s += q[b * 6 + i];
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
  // Default axes: -1 from opset 13, 1 before (here the same as flattening [2, 6]).
  auto d13 = run_op(OpType::Softmax, {}, {x}, 1, 13);
  auto d11 = run_op(OpType::Softmax, {}, {x}, 1, 11);
  ASSERT_TRUE(d13 && d11);
  EXPECT_NEAR(values((*d13)[0])[0] + values((*d13)[0])[1] + values((*d13)[0])[2], 1.0, 1e-6);
  EXPECT_EQ(values((*d11)[0]), values((*y11)[0]));
}

TEST(Hardmax, FirstMaximumWins) {
  auto y = run_op(OpType::Hardmax, {}, {tensor_f32({2, 3}, {1, 3, 3, -1, -1, -1})});
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{0, 1, 0, 1, 0, 0}));
}

TEST(SoftmaxErrors, AxisTypeAndRank) {
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = run_op(OpType::Softmax, axis_attr(2), {x});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = run_op(OpType::LogSoftmax, axis_attr(-3), {x});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = run_op(OpType::Softmax, {}, {Tensor::scalar_f32(1)});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = run_op(OpType::Softmax, {}, {Tensor::scalar_i64(1).reshaped({1})});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

TEST(SoftmaxConformance, OldOpsetNodeTests) {
  for (const char* t : {"test_Softmax", "test_LogSoftmax", "test_log_softmax_dim3", "test_log_softmax_lastdim",
                        "test_softmax_functional_dim3", "test_softmax_lastdim"}) {
    QD_EXPECT_NODE_TEST(std::string("pytorch-converted/") + t);
  }
}

}  // namespace
}  // namespace qd
