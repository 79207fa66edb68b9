// Reduce* ops: axes (attribute or ReduceSum's input), keepdims, noop_with_empty_axes, integer types, empty
// reductions, numerically stable LogSumExp, and errors for bad axes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nn_test_util.h"

namespace qd {
namespace {

using test::run_op;
using test::tensor_f32;
using test::tensor_of;
using test::values;

AttrMap reduce_attrs(std::vector<int64_t> axes, int64_t keepdims = 1) {
  AttrMap a;
  a.set("axes", axes);
  a.set("keepdims", keepdims);
  return a;
}

TEST(Reduce, AxesAndKeepdims) {
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = run_op(OpType::ReduceMean, reduce_attrs({1}), {x});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{2, 5}));
  y = run_op(OpType::ReduceMax, reduce_attrs({-2}, 0), {x});
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].shape(), (Shape{3}));
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{4, 5, 6}));
  y = run_op(OpType::ReduceProd, AttrMap{}, {x});  // no axes: every axis, keepdims 1
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{720}));
  y = run_op(OpType::ReduceL2, reduce_attrs({0, 1}, 0), {tensor_f32({2}, {3, 4}).reshaped({1, 2})});
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].shape(), (Shape{}));
  EXPECT_NEAR((*y)[0].get_f64(0), 5, 1e-6);
}

TEST(Reduce, SumAxesInputAndNoop) {
  const Tensor x = tensor_f32({2, 2}, {1, 2, 3, 4});
  const Tensor no_axes(DType::kInt64, {0});
  auto y = run_op(OpType::ReduceSum, {}, {x, no_axes}, 1, 13);
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{10}));
  AttrMap noop;
  noop.set("noop_with_empty_axes", int64_t{1});
  y = run_op(OpType::ReduceSum, noop, {x, no_axes}, 1, 13);
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{1, 2, 3, 4}));
  y = run_op(OpType::ReduceSum, noop, {x}, 1, 13);  // axes input omitted
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].shape(), (Shape{2, 2}));
  y = run_op(OpType::ReduceSum, {}, {x, Tensor::from_i64({-1})}, 1, 13);
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{3, 7}));
  // Before opset 13 the axes are an attribute.
  y = run_op(OpType::ReduceSum, reduce_attrs({0}), {x}, 1, 11);
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{4, 6}));
}

TEST(Reduce, IntegerTypes) {
  const Tensor x = tensor_of(DType::kInt32, {2, 2}, std::vector<int>{-7, 2, 3, 4});
  auto y = run_op(OpType::ReduceSum, {}, {x, Tensor::from_i64({1})}, 1, 13);
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].dtype(), DType::kInt32);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-5, 7}));
  y = run_op(OpType::ReduceMean, reduce_attrs({1}), {x});
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-2, 3}));  // truncated toward zero
  y = run_op(OpType::ReduceL1, reduce_attrs({1}), {x});
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{9, 7}));
  const Tensor b = tensor_of(DType::kInt8, {3}, std::vector<int>{-128, 5, 127});
  y = run_op(OpType::ReduceMin, reduce_attrs({0}), {b});
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-128}));
  // Overflow wraps (two's complement) instead of being undefined behaviour.
  const Tensor big = tensor_of(DType::kInt64, {2}, std::vector<double>{4e18, 4e18});
  y = run_op(OpType::ReduceProd, reduce_attrs({0}), {big});
  EXPECT_TRUE(y.has_value());
}

TEST(Reduce, EmptyReductionIdentities) {
  const Tensor x(DType::kFloat32, {2, 0});
  auto y = run_op(OpType::ReduceSum, reduce_attrs({1}), {x}, 1, 11);
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{0, 0}));
  y = run_op(OpType::ReduceMax, reduce_attrs({1}), {x});
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].get_f64(0), -std::numeric_limits<double>::infinity());
  y = run_op(OpType::ReduceProd, reduce_attrs({1}), {x});
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].get_f64(0), 1);
}

TEST(Reduce, LogSumExpIsStable) {
  auto y = run_op(OpType::ReduceLogSumExp, reduce_attrs({0}), {tensor_f32({3}, {1000, 1000, -INFINITY})});
  ASSERT_TRUE(y);
  EXPECT_NEAR((*y)[0].get_f64(0), 1000 + std::log(2.0), 1e-3);
  y = run_op(OpType::ReduceLogSumExp, reduce_attrs({0}), {tensor_f32({2}, {-1000, -1001})});
  ASSERT_TRUE(y);
  EXPECT_NEAR((*y)[0].get_f64(0), -1000 + std::log1p(std::exp(-1.0)), 1e-3);
}

void expect_invalid(const Expected<std::vector<Tensor>>& r, const std::string& fragment) {
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().to_string().find(fragment), std::string::npos) << r.status().to_string();
}

TEST(ReduceErrors, BadAxes) {
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_invalid(run_op(OpType::ReduceMean, reduce_attrs({2}), {x}), "out of range");
  expect_invalid(run_op(OpType::ReduceMean, reduce_attrs({-3}), {x}), "out of range");
  expect_invalid(run_op(OpType::ReduceMax, reduce_attrs({1, -1}), {x}), "appears twice");
  expect_invalid(run_op(OpType::ReduceSum, {}, {x, Tensor::from_i64({5})}, 1, 13), "out of range");
  expect_invalid(run_op(OpType::ReduceSum, reduce_attrs({0}), {x}, 1, 13), "second input");
  expect_invalid(run_op(OpType::ReduceMin, reduce_attrs({0}, 3), {x}), "keepdims");
  expect_invalid(run_op(OpType::ReduceSum, {}, {x, Tensor::from_f32({1}, {0.f})}, 1, 13), "integer");
}

// ReduceSum's node tests feed the axes as runtime data, which the conformance runner cannot fold into static
// shapes; here they are given as constants, as a real model has them.
TEST(ReduceConformance, ReduceSumWithConstantAxes) {
  for (const char* t : {"default_axes_keepdims_example", "default_axes_keepdims_random", "do_not_keepdims_example",
                        "do_not_keepdims_random", "empty_axes_input_noop_example", "empty_axes_input_noop_random",
                        "keepdims_example", "keepdims_random", "negative_axes_keepdims_example",
                        "negative_axes_keepdims_random"}) {
    QD_EXPECT_NODE_TEST(std::string("node/test_reduce_sum_") + t, std::vector<int>{1});
  }
}

TEST(ReduceConformance, OldOpsetNodeTests) {
  QD_EXPECT_NODE_TEST("node/test_reduce_log_sum");
  for (const char* t : {"test_operator_reduced_mean", "test_operator_reduced_mean_keepdim", "test_operator_reduced_sum",
                        "test_operator_reduced_sum_keepdim"}) {
    QD_EXPECT_NODE_TEST(std::string("pytorch-operator/") + t);
  }
}

}  // namespace
}  // namespace qd
