// Pooling: ceil_mode edges, Indices (storage orders), int8 MaxPool, LpPool, Global* pools, and the errors a bad
// window gives (zero strides, negative pads, kernels larger than the padded input).
#include <gtest/gtest.h>

#include <cmath>

#include "nn_test_util.h"

namespace qd {
namespace {

using test::run_op;
using test::tensor_f32;
using test::tensor_of;
using test::values;

AttrMap window(std::vector<int64_t> kernel, std::vector<int64_t> strides = {}, std::vector<int64_t> pads = {},
               int64_t ceil_mode = 0) {
  AttrMap a;
  a.set("kernel_shape", kernel);
  if (!strides.empty()) a.set("strides", strides);
  if (!pads.empty()) a.set("pads", pads);
  if (ceil_mode) a.set("ceil_mode", ceil_mode);
  return a;
}

Tensor iota(const Shape& s, float start = 1) {
  Tensor t(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

TEST(MaxPool, CeilModeAddsPartialWindow) {
  // 4x4, kernel 3, stride 2: floor mode gives 1x1, ceil mode 2x2 (windows at rows/cols {0..2} and {2..3}).
  auto f = run_op(OpType::MaxPool, window({3, 3}, {2, 2}), {iota({1, 1, 4, 4})});
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ((*f)[0].shape(), (Shape{1, 1, 1, 1}));
  auto c = run_op(OpType::MaxPool, window({3, 3}, {2, 2}, {}, 1), {iota({1, 1, 4, 4})});
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ((*c)[0].shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values((*c)[0]), (std::vector<double>{11, 12, 15, 16}));
}

TEST(MaxPool, CeilModeDropsWindowStartingInRightPadding) {
  // in 4, kernel 1, stride 3, pads [0, 2]: ceil((4 + 2 - 1) / 3) + 1 = 3 windows, but the third would start at 6,
  // past the input and its left padding, so it is dropped (as PyTorch and ONNX Runtime do).
  auto c = run_op(OpType::MaxPool, window({1}, {3}, {0, 2}, 1), {iota({1, 1, 4})});
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ((*c)[0].shape(), (Shape{1, 1, 2}));
  EXPECT_EQ(values((*c)[0]), (std::vector<double>{1, 4}));
}

TEST(AveragePool, CeilModePartialWindowDivisor) {
  // [1..5], kernel 2, stride 2, ceil: windows {0,1}, {2,3}, {4}; the last averages only what lies in the input even
  // with count_include_pad=1, since it extends past the (zero) padding.
  for (int64_t cip : {0, 1}) {
    AttrMap a = window({2}, {2}, {}, 1);
    a.set("count_include_pad", cip);
    auto y = run_op(OpType::AveragePool, a, {iota({1, 1, 5})});
    ASSERT_TRUE(y) << y.status().to_string();
    EXPECT_EQ(values((*y)[0]), (std::vector<double>{1.5, 3.5, 5}));
  }
  // With explicit padding, count_include_pad counts the pads.
  AttrMap a = window({3}, {1}, {1, 1});
  a.set("count_include_pad", int64_t{1});
  auto y = run_op(OpType::AveragePool, a, {iota({1, 1, 3})});
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{1, 2, static_cast<float>(5.0 / 3)}));
  a.set("count_include_pad", int64_t{0});
  y = run_op(OpType::AveragePool, a, {iota({1, 1, 3})});
  ASSERT_TRUE(y);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{1.5, 2, 2.5}));
}

TEST(MaxPool, IndicesIncludePlaneOffsetInBothStorageOrders) {
  // Two channels of 2x2, one 2x2 window each. c0 max 4 at (0,1); c1 max 8 at (1,0).
  const Tensor x = tensor_f32({1, 2, 2, 2}, {1, 4, 3, 2, 5, 6, 8, 7});
  auto r = run_op(OpType::MaxPool, window({2, 2}), {x}, 2);
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{4, 8}));
  EXPECT_EQ((*r)[1].dtype(), DType::kInt64);
  EXPECT_EQ(values((*r)[1]), (std::vector<double>{1, 4 + 2}));
  AttrMap a = window({2, 2});
  a.set("storage_order", int64_t{1});
  auto c = run_op(OpType::MaxPool, a, {x}, 2);
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(values((*c)[1]), (std::vector<double>{2, 4 + 1}));
}

TEST(MaxPool, Int8AndUint8) {
  const Tensor x = tensor_of(DType::kInt8, {1, 1, 4}, std::vector<int>{-128, -5, 127, -1});
  auto y = run_op(OpType::MaxPool, window({2}, {2}), {x});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kInt8);
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-5, 127}));
  // Padding never wins, even against the type's lowest value.
  auto p = run_op(OpType::MaxPool, window({2}, {2}, {1, 1}), {x});
  ASSERT_TRUE(p);
  EXPECT_EQ(values((*p)[0]), (std::vector<double>{-128, 127, -1}));
  const Tensor u = tensor_of(DType::kUInt8, {1, 1, 2, 2}, std::vector<int>{0, 255, 3, 4});
  auto yu = run_op(OpType::GlobalMaxPool, {}, {u});
  ASSERT_TRUE(yu);
  EXPECT_EQ(values((*yu)[0]), (std::vector<double>{255}));
}

TEST(MaxPool, HugeKernelAndPadsStayCheap) {
  // The kernel walks only the taps inside the input, so a 2^20-wide padded window over one element is instant.
  auto y = run_op(OpType::MaxPool, window({1 << 20}, {1}, {1 << 19, (1 << 19) - 1}), {tensor_f32({1, 1, 1}, {42})});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{42}));
}

TEST(LpPool, L1AndL2) {
  AttrMap a = window({2, 2});
  auto l2 = run_op(OpType::LpPool, a, {tensor_f32({1, 1, 2, 2}, {3, -4, 0, 0})});
  ASSERT_TRUE(l2) << l2.status().to_string();
  EXPECT_NEAR((*l2)[0].get_f64(0), 5.0, 1e-6);
  a.set("p", int64_t{1});
  auto l1 = run_op(OpType::LpPool, a, {tensor_f32({1, 1, 2, 2}, {3, -4, 1, 0})});
  ASSERT_TRUE(l1);
  EXPECT_NEAR((*l1)[0].get_f64(0), 8.0, 1e-6);
  AttrMap g;
  g.set("p", int64_t{3});
  auto gl = run_op(OpType::GlobalLpPool, g, {tensor_f32({1, 1, 2}, {1, 2})});
  ASSERT_TRUE(gl);
  EXPECT_NEAR((*gl)[0].get_f64(0), std::cbrt(9.0), 1e-6);
  g.set("p", int64_t{0});
  EXPECT_FALSE(run_op(OpType::GlobalLpPool, g, {tensor_f32({1, 1, 2}, {1, 2})}).has_value());
}

TEST(GlobalPool, AverageAndMax) {
  const Tensor x = iota({2, 3, 2, 2});
  auto a = run_op(OpType::GlobalAveragePool, {}, {x});
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)[0].shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(values((*a)[0]), (std::vector<double>{2.5, 6.5, 10.5, 14.5, 18.5, 22.5}));
  auto m = run_op(OpType::GlobalMaxPool, {}, {x});
  ASSERT_TRUE(m);
  EXPECT_EQ(values((*m)[0]), (std::vector<double>{4, 8, 12, 16, 20, 24}));
}

void expect_invalid(const Expected<std::vector<Tensor>>& r, const std::string& fragment) {
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().to_string().find(fragment), std::string::npos) << r.status().to_string();
}

TEST(PoolErrors, BadWindows) {
  const Tensor x = iota({1, 1, 4, 4});
  expect_invalid(run_op(OpType::MaxPool, window({2, 2}, {0, 1}), {x}), "strides must be positive");
  expect_invalid(run_op(OpType::AveragePool, window({2, 2}, {1, 1}, {-1, 0, 0, 0}), {x}), "pads must be non-negative");
  expect_invalid(run_op(OpType::MaxPool, window({5, 2}), {x}), "larger than the padded input");
  expect_invalid(run_op(OpType::MaxPool, window({2}), {x}), "kernel_shape has 1 entries");
  expect_invalid(run_op(OpType::MaxPool, window({0, 2}), {x}), "kernel size must be positive");
  expect_invalid(run_op(OpType::MaxPool, {}, {x}), "kernel_shape attribute is required");
  expect_invalid(run_op(OpType::MaxPool, window({2}), {iota({4, 4})}), "rank >= 3");
  AttrMap a = window({2, 2});
  a.set("storage_order", int64_t{2});
  expect_invalid(run_op(OpType::MaxPool, a, {x}, 2), "storage_order");
  a = window({2, 2});
  a.set("auto_pad", std::string("SAME"));
  expect_invalid(run_op(OpType::AveragePool, a, {x}), "auto_pad");
  a = window({2, 2});
  a.set("ceil_mode", int64_t{7});
  expect_invalid(run_op(OpType::MaxPool, a, {x}), "ceil_mode");
  EXPECT_EQ(run_op(OpType::AveragePool, window({2}), {tensor_of(DType::kInt32, {1, 1, 2}, std::vector<int>{1, 2})}).status().code(),
            StatusCode::kUnsupported);
}

// Node tests the conformance runner cannot read: opset 1/6 models (identical semantics in opset 7).
TEST(PoolConformance, OldOpsetNodeTests) {
  QD_EXPECT_NODE_TEST("node/test_globalaveragepool");
  QD_EXPECT_NODE_TEST("node/test_globalaveragepool_precomputed");
  QD_EXPECT_NODE_TEST("node/test_globalmaxpool");
  QD_EXPECT_NODE_TEST("node/test_globalmaxpool_precomputed");
  for (const char* t : {"test_AvgPool1d", "test_AvgPool1d_stride", "test_AvgPool2d", "test_AvgPool2d_stride",
                        "test_AvgPool3d", "test_AvgPool3d_stride", "test_AvgPool3d_stride1_pad0_gpu_input",
                        "test_MaxPool1d", "test_MaxPool1d_stride", "test_MaxPool2d", "test_MaxPool3d",
                        "test_MaxPool3d_stride", "test_MaxPool3d_stride_padding"}) {
    QD_EXPECT_NODE_TEST(std::string("pytorch-converted/") + t);
  }
}

}  // namespace
}  // namespace qd
