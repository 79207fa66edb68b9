// fuse_parallel_linear: the fused graph against the unfused one on the reference (MatMul + bias Add, Gemm with and
// without transB, 1x1 convs), what it leaves alone, and the DCNv4 case (value and offsets from one GEMM).
#include <gtest/gtest.h>

#include "ops/interpret.h"
#include "ops/plugin_registry.h"
#include "passes/passes.h"
#include "qdeploy/plugin.h"
#include "test_util.h"

namespace qd {
namespace {

struct Builder : test::GraphBuilder {
  Status prepare() {
    g.relink();
    PrepareOptions opt;
    return prepare_graph(g, opt);
  }
};

using test::count_op;

// The fused graph's outputs within 1e-5 of the unfused one's (relative to their range).
void expect_same(const Graph& a, const Graph& b, const std::map<std::string, Tensor>& in) {
  test::expect_same_outputs(a, b, in, 1e-5);
}

TEST(FuseParallelLinear, MatMulWithAndWithoutBias) {
  Builder b;
  const int x = b.input("x", {2, 6, 8});
  const int y1 = b.node(OpType::MatMul, "value_proj", {x, b.constant("w1", test::random_f32({8, 4}, 1))});
  const int z1 = b.node(OpType::Add, "value_bias", {y1, b.constant("b1", test::random_f32({4}, 2))});
  const int y2 = b.node(OpType::MatMul, "offset_proj", {x, b.constant("w2", test::random_f32({8, 12}, 3))});
  b.g.outputs = {b.node(OpType::Relu, "r1", {z1}), b.node(OpType::Relu, "r2", {y2})};
  ASSERT_TRUE(b.prepare().is_ok());
  Graph fused = b.g;
  // By default only pairs read by plugins are fused: Relu is none.
  EXPECT_EQ(*fuse_parallel_linear(fused), 0);
  auto n = fuse_parallel_linear(fused, {true, false});
  ASSERT_TRUE(n) << n.status().to_string();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(count_op(fused, OpType::MatMul), 1);
  EXPECT_EQ(count_op(fused, OpType::Add), 1);
  EXPECT_EQ(count_op(fused, OpType::Slice), 2);
  EXPECT_TRUE(fused.verify().is_ok());
  EXPECT_EQ(fused.values[fused.find_value("value_bias_out")].shape, (Shape{2, 6, 4}));
  expect_same(b.g, fused, {{"x", test::random_f32({2, 6, 8}, 4)}});
}

TEST(FuseParallelLinear, GemmBothLayoutsAndConvs) {
  for (int64_t tb : {0, 1}) {
    Builder b;
    const int x = b.input("x", {3, 8});
    AttrMap a;
    a.set("transB", tb);
    const Shape w1 = tb ? Shape{5, 8} : Shape{8, 5}, w2 = tb ? Shape{7, 8} : Shape{8, 7};
    const int y1 = b.node(OpType::Gemm, "g1", {x, b.constant("w1", test::random_f32(w1, 1)),
                                              b.constant("c1", test::random_f32({5}, 2))}, a);
    const int y2 = b.node(OpType::Gemm, "g2", {x, b.constant("w2", test::random_f32(w2, 3))}, a);
    b.g.outputs = {y1, y2};
    ASSERT_TRUE(b.prepare().is_ok());
    Graph fused = b.g;
    ASSERT_EQ(*fuse_parallel_linear(fused, {true, false}), 1) << tb;
    EXPECT_EQ(count_op(fused, OpType::Gemm), 1);
    expect_same(b.g, fused, {{"x", test::random_f32({3, 8}, 5)}});
  }
  Builder b;
  const int x = b.input("x", {1, 6, 5, 4});
  const int y1 = b.node(OpType::Conv, "c1", {x, b.constant("w1", test::random_f32({3, 6, 1, 1}, 1))});
  const int y2 = b.node(OpType::Conv, "c2", {x, b.constant("w2", test::random_f32({5, 6, 1, 1}, 2)),
                                            b.constant("b2", test::random_f32({5}, 3))});
  b.g.outputs = {y1, y2};
  ASSERT_TRUE(b.prepare().is_ok());
  Graph fused = b.g;
  EXPECT_EQ(*fuse_parallel_linear(fused, {true, false}), 0);  // convs only when asked
  ASSERT_EQ(*fuse_parallel_linear(fused, {true, true}), 1);
  EXPECT_EQ(count_op(fused, OpType::Conv), 1);
  expect_same(b.g, fused, {{"x", test::random_f32({1, 6, 5, 4}, 4)}});
}

TEST(FuseParallelLinear, LeavesOtherPatternsAlone) {
  Builder b;
  const int x = b.input("x", {2, 8});
  const int x2 = b.input("x2", {8, 4});
  const int y1 = b.node(OpType::MatMul, "m1", {x, x2});  // weights not constant
  const int y2 = b.node(OpType::MatMul, "m2", {x, b.constant("w2", test::random_f32({8, 4}, 1))});
  AttrMap a;
  a.set("alpha", 2.f);
  const int y3 = b.node(OpType::Gemm, "g", {x, b.constant("w3", test::random_f32({8, 4}, 2))}, a);  // MatMul vs Gemm
  b.g.outputs = {y1, y2, y3};
  ASSERT_TRUE(b.prepare().is_ok());
  EXPECT_EQ(*fuse_parallel_linear(b.g, {true, true}), 0);
}

TEST(FuseParallelLinear, Dcnv4ValueAndOffsetsFromOneGemm) {
  qdeploy::register_builtin_plugins();
  const PluginOp* dcn = find_plugin_op("ai.qdeploy::DCNv4@1");
  ASSERT_NE(dcn, nullptr);
  // x [N, L, C] -> value_proj (MatMul + Add) -> Reshape [N, H, W, C]; offset_mask (MatMul + Add) -> Reshape
  // [N, H, W, 112]; DCNv4 (4 groups of 16): the FlashInternImage block's pattern.
  Builder b;
  const int x = b.input("x", {2, 20, 64});
  auto linear = [&](const std::string& name, int64_t k, uint32_t seed) {
    const int m = b.node(OpType::MatMul, name, {x, b.constant(name + ".w", test::random_f32({64, k}, seed, -.2f, .2f))});
    const int a = b.node(OpType::Add, name + ".bias", {m, b.constant(name + ".b", test::random_f32({k}, seed + 1))});
    return b.node(OpType::Reshape, name + ".reshape", {a, b.constant(name + ".shape", Tensor::from_i64({2, 4, 5, k}))});
  };
  const int value = linear("value_proj", 64, 1), om = linear("offset_mask", 112, 3);
  Node n;
  n.name = "dcn";
  n.op = dcn->id;
  n.attrs.set("group", int64_t{4});
  n.attrs.set("group_channels", int64_t{16});
  n.inputs = {value, om};
  n.outputs = {b.g.add_value("y")};
  b.g.nodes.push_back(n);
  b.g.outputs = {n.outputs[0]};
  ASSERT_TRUE(b.prepare().is_ok());
  Graph fused = b.g;
  auto k = fuse_parallel_linear(fused);  // plugin readers: fused by default
  ASSERT_TRUE(k) << k.status().to_string();
  EXPECT_EQ(*k, 1);
  EXPECT_EQ(count_op(fused, OpType::MatMul), 1);
  EXPECT_EQ(count_op(fused, OpType::Slice), 2);
  expect_same(b.g, fused, {{"x", test::random_f32({2, 20, 64}, 9)}});
}

}  // namespace
}  // namespace qd
