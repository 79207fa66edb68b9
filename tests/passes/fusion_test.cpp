// The fusion passes (fold_batch_norm, fuse_conv_activation, fuse_conv_residual, fuse_pool_chains, fuse_gelu): each
// fused graph against the graph it came from on the reference, what each leaves alone, and the shipped detector fused
// whole.
#include <gtest/gtest.h>

#include "onnx/importer.h"
#include "ops/fused.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "test_util.h"

namespace qd {
namespace {

struct Builder : test::GraphBuilder {
  // A 3x3 conv with pad 1 from c to m channels (bias optional).
  int conv(const std::string& name, int x, int64_t c, int64_t m, uint32_t seed, bool bias = true) {
    AttrMap a;
    a.set("kernel_shape", std::vector<int64_t>{3, 3});
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    std::vector<int> in = {x, constant(name + "_w", test::random_f32({m, c, 3, 3}, seed, -0.5f, 0.5f))};
    if (bias) in.push_back(constant(name + "_b", test::random_f32({m}, seed + 1)));
    return node(OpType::Conv, name, in, a);
  }
  int batch_norm(const std::string& name, int x, int64_t m, uint32_t seed) {
    AttrMap a;
    a.set("epsilon", 1e-3f);
    return node(OpType::BatchNormalization, name,
                {x, constant(name + "_g", test::random_f32({m}, seed, 0.5f, 1.5f)),
                 constant(name + "_b", test::random_f32({m}, seed + 1)),
                 constant(name + "_m", test::random_f32({m}, seed + 2)),
                 constant(name + "_v", test::random_f32({m}, seed + 3, 0.2f, 2.f))},
                a);
  }
};

using test::count_op;
using test::find_node;

void expect_same(const Graph& a, const Graph& b, const std::map<std::string, Tensor>& in, double tol = 1e-6) {
  test::expect_same_outputs(a, b, in, tol);
}

TEST(FoldBatchNorm, ConvWithAndWithoutBias) {
  for (bool bias : {true, false}) {
    Builder b;
    const int x = b.input("x", {2, 4, 9, 7});
    b.g.outputs = {b.batch_norm("bn", b.conv("conv", x, 4, 6, 1, bias), 6, 10)};
    const Graph ref = b.prepared();
    Graph g = ref;
    EXPECT_EQ(*fold_batch_norm(g), 1);
    EXPECT_EQ(count_op(g, OpType::BatchNormalization), 0);
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0].name, "conv");
    EXPECT_TRUE(g.verify().is_ok());
    expect_same(ref, g, {{"x", test::random_f32({2, 4, 9, 7}, 5)}}, 1e-5);
  }
}

TEST(FoldBatchNorm, LeavesKeptConvsSharedResultsAndNonConstantStatistics) {
  Builder b;
  const int x = b.input("x", {1, 3, 8, 8});
  const int c1 = b.conv("kept", x, 3, 4, 1);
  const int c2 = b.conv("shared", x, 3, 4, 2);
  const int c3 = b.conv("live_stats", x, 3, 4, 3);
  AttrMap eps;
  b.g.outputs = {b.batch_norm("bn1", c1, 4, 10), b.batch_norm("bn2", c2, 4, 20), c2,
                 b.node(OpType::BatchNormalization, "bn3",
                        {c3, b.input("gamma", {4}), b.constant("b3", test::random_f32({4}, 7)),
                         b.constant("m3", test::random_f32({4}, 8)), b.constant("v3", test::random_f32({4}, 9, 1, 2))})};
  Graph g = b.prepared();
  EXPECT_EQ(*fold_batch_norm(g, {"kept"}), 0);
  EXPECT_EQ(count_op(g, OpType::BatchNormalization), 3);
}

// Two convs sharing one weight: folding one must not change the other's.
TEST(FoldBatchNorm, SharedWeightsStayIntact) {
  Builder b;
  const int x = b.input("x", {1, 3, 6, 6});
  AttrMap a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  const int w = b.constant("w", test::random_f32({5, 3, 3, 3}, 3));
  const int y1 = b.node(OpType::Conv, "c1", {x, w}, a), y2 = b.node(OpType::Conv, "c2", {x, w}, a);
  b.g.outputs = {b.batch_norm("bn", y1, 5, 30), y2};
  const Graph ref = b.prepared();
  Graph g = ref;
  EXPECT_EQ(*fold_batch_norm(g), 1);
  expect_same(ref, g, {{"x", test::random_f32({1, 3, 6, 6}, 4)}}, 1e-5);
}

struct ActCase {
  const char* name;
  OpType op;
  ops::Activation act;
};

TEST(FuseConvActivation, EachActivation) {
  const ActCase cases[] = {{"relu", OpType::Relu, ops::Activation::kRelu},
                           {"sigmoid", OpType::Sigmoid, ops::Activation::kSigmoid},
                           {"leaky", OpType::LeakyRelu, ops::Activation::kLeakyRelu},
                           {"hswish", OpType::HardSwish, ops::Activation::kHardSwish},
                           {"hsigmoid", OpType::HardSigmoid, ops::Activation::kHardSigmoid},
                           {"clip", OpType::Clip, ops::Activation::kClip}};
  for (const ActCase& c : cases) {
    SCOPED_TRACE(c.name);
    Builder b;
    const int x = b.input("x", {2, 3, 8, 8});
    const int y = b.conv("conv", x, 3, 8, 1);
    AttrMap a;
    std::vector<int> in = {y};
    if (c.op == OpType::LeakyRelu) a.set("alpha", 0.1f);
    if (c.op == OpType::HardSigmoid) a.set("alpha", 0.3f);
    if (c.op == OpType::Clip) {
      in.push_back(b.constant("lo", Tensor::scalar_f32(-0.25f)));
      in.push_back(b.constant("hi", Tensor::scalar_f32(0.5f)));
    }
    b.g.outputs = {b.node(c.op, c.name, in, a)};
    const Graph ref = b.prepared();
    Graph g = ref;
    EXPECT_EQ(*fuse_conv_activation(g), 1);
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0].op, OpType::FusedConv);
    const auto f = ops::fused_conv_attrs(g.nodes[0]);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->act, c.act);
    EXPECT_EQ(f->fused, std::vector<std::string>{c.name});
    expect_same(ref, g, {{"x", test::random_f32({2, 3, 8, 8}, 6, -3, 3)}});
  }
}

TEST(FuseConvActivation, SiluAsSigmoidTimesInput) {
  for (bool swapped : {false, true}) {
    Builder b;
    const int x = b.input("x", {1, 3, 8, 8});
    const int y = b.conv("conv", x, 3, 8, 1);
    const int s = b.node(OpType::Sigmoid, "sig", {y});
    b.g.outputs = {b.node(OpType::Mul, "mul", swapped ? std::vector<int>{s, y} : std::vector<int>{y, s})};
    const Graph ref = b.prepared();
    Graph g = ref;
    EXPECT_EQ(*fuse_conv_activation(g), 1);
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(ops::fused_conv_attrs(g.nodes[0])->act, ops::Activation::kSilu);
    expect_same(ref, g, {{"x", test::random_f32({1, 3, 8, 8}, 6, -3, 3)}});
  }
}

// Not fused: a conv result read by two nodes or that is a graph output, a Clip with bounds computed at run time,
// a Sigmoid read by another node than the Mul.
TEST(FuseConvActivation, LeavesSharedResultsAndRuntimeBounds) {
  Builder b;
  const int x = b.input("x", {1, 3, 8, 8});
  const int y1 = b.conv("c1", x, 3, 4, 1);
  const int y2 = b.conv("c2", x, 3, 4, 2);
  const int y3 = b.conv("c3", x, 3, 4, 3);
  const int s3 = b.node(OpType::Sigmoid, "s3", {y3});
  b.g.outputs = {b.node(OpType::Relu, "r1", {y1}), b.node(OpType::Sigmoid, "s1", {y1}), y2,
                 b.node(OpType::Relu, "r2", {y2}), b.node(OpType::Clip, "clip", {y3, b.input("lo", {})}),
                 b.node(OpType::Mul, "m3", {y3, s3}), s3};
  Graph g = b.prepared();
  EXPECT_EQ(*fuse_conv_activation(g), 0);
  EXPECT_EQ(count_op(g, OpType::FusedConv), 0);
}

// A bottleneck: x -> conv/SiLU -> conv/SiLU -> Add(x): the second conv takes the shortcut; an Add of two results of
// which the conv's comes first is not fused (the other is not computed yet when the conv runs).
TEST(FuseConvResidual, BottleneckShortcut) {
  Builder b;
  const int x = b.input("x", {2, 8, 6, 6});
  const int a1 = b.node(OpType::Relu, "r1", {b.conv("cv1", x, 8, 8, 1)});
  const int y2 = b.conv("cv2", a1, 8, 8, 2);
  const int s2 = b.node(OpType::Sigmoid, "s2", {y2});
  const int a2 = b.node(OpType::Mul, "m2", {y2, s2});
  const int sum = b.node(OpType::Add, "add", {x, a2});
  const int y3 = b.conv("cv3", sum, 8, 8, 3);
  const int y4 = b.conv("cv4", sum, 8, 8, 4);
  b.g.outputs = {b.node(OpType::Add, "late", {y3, y4})};
  const Graph ref = b.prepared();
  Graph g = ref;
  const FusionCounts c = *fuse_graph(g);
  EXPECT_EQ(c.activations, 2);
  EXPECT_EQ(c.residuals, 2);  // cv2 (x) and cv4 (cv3's result, computed before it)
  const Node* cv2 = find_node(g, "cv2");
  ASSERT_TRUE(cv2);
  const auto f2 = ops::fused_conv_attrs(*cv2);
  EXPECT_EQ(f2->act, ops::Activation::kSilu);
  EXPECT_TRUE(f2->residual);
  EXPECT_EQ(cv2->inputs[3], g.find_value("x"));
  EXPECT_EQ(f2->fused, (std::vector<std::string>{"s2", "m2", "add"}));
  EXPECT_EQ(find_node(g, "cv3")->op, OpType::Conv);
  EXPECT_TRUE(ops::fused_conv_attrs(*find_node(g, "cv4"))->residual);
  EXPECT_EQ(g.nodes.size(), 4u);
  EXPECT_TRUE(g.verify().is_ok());
  expect_same(ref, g, {{"x", test::random_f32({2, 8, 6, 6}, 9)}});
}

TEST(FuseConvResidual, LeavesBroadcastAndConstantOperands) {
  Builder b;
  const int x = b.input("x", {1, 4, 6, 6});
  const int y1 = b.conv("c1", x, 4, 4, 1);
  const int y2 = b.conv("c2", x, 4, 4, 2);
  b.g.outputs = {b.node(OpType::Add, "bias_like", {y1, b.input("row", {1, 4, 1, 1})}),
                 b.node(OpType::Add, "const", {y2, b.constant("k", test::random_f32({1, 4, 6, 6}, 3))})};
  Graph g = b.prepared();
  EXPECT_EQ(*fuse_conv_residual(g), 0);
}

// The fused op's own checks: a residual of another shape, an unknown activation.
TEST(FusedConv, InferenceChecksResidualAndActivation) {
  Builder b;
  const int x = b.input("x", {1, 2, 4, 4});
  AttrMap a;
  a.set("kernel_shape", std::vector<int64_t>{1, 1});
  a.set("activation", std::string("Gelu"));
  const int w = b.constant("w", test::random_f32({3, 2, 1, 1}, 1));
  b.g.outputs = {b.node(OpType::FusedConv, "bad_act", {x, w}, a)};
  Graph g1 = b.g;
  g1.relink();
  const Status s1 = prepare_graph(g1, {});
  EXPECT_FALSE(s1.is_ok());
  EXPECT_NE(s1.message().find("unknown activation 'Gelu'"), std::string::npos) << s1.message();
  b.g.nodes[0].attrs.set("activation", std::string("Relu"));
  b.g.nodes[0].inputs = {x, w, -1, b.input("r", {1, 2, 4, 4})};
  b.g.relink();
  const Status s2 = prepare_graph(b.g, {});
  EXPECT_FALSE(s2.is_ok());
  EXPECT_NE(s2.message().find("residual must have the output's type and shape"), std::string::npos) << s2.message();
}

// A model cannot name a fused op: the importer does not know it.
TEST(FusedConv, NotImportable) {
  EXPECT_FALSE(op_from_name("FusedConv").has_value());
  EXPECT_FALSE(op_from_name("MaxPoolChain").has_value());
}

AttrMap pool_window(int64_t k, int64_t stride = 1) {
  AttrMap a;
  a.set("kernel_shape", std::vector<int64_t>{k, k});
  a.set("pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
  a.set("strides", std::vector<int64_t>{stride, stride});
  return a;
}

const PoolChainRule kAnyChain = [](const Shape&, int) { return true; };

// SPPF: x, mp(x), mp(mp(x)), mp(mp(mp(x))) concatenated: one MaxPoolChain with three outputs, same values.
TEST(FusePoolChains, Sppf) {
  Builder b;
  const int x = b.input("x", {2, 8, 9, 7});
  const int p1 = b.node(OpType::MaxPool, "p1", {x}, pool_window(5));
  const int p2 = b.node(OpType::MaxPool, "p2", {p1}, pool_window(5));
  const int p3 = b.node(OpType::MaxPool, "p3", {p2}, pool_window(5));
  AttrMap axis;
  axis.set("axis", int64_t{1});
  b.g.outputs = {b.node(OpType::Concat, "cat", {x, p1, p2, p3}, axis)};
  const Graph ref = b.prepared();
  Graph g = ref;
  EXPECT_EQ(*fuse_pool_chains(g, kAnyChain), 1);
  ASSERT_EQ(count_op(g, OpType::MaxPoolChain), 1);
  const Node* chain = find_node(g, "p1");
  ASSERT_NE(chain, nullptr);
  EXPECT_EQ(chain->outputs.size(), 3u);
  EXPECT_EQ(count_op(g, OpType::MaxPool), 0);
  EXPECT_TRUE(g.verify().is_ok());
  expect_same(ref, g, {{"x", test::random_f32({2, 8, 9, 7}, 3)}}, 0);
  // The target's rule caps the chain, and a null rule fuses nothing.
  Graph capped = ref;
  EXPECT_EQ(*fuse_pool_chains(capped, [](const Shape& s, int pools) { return s[1] == 8 && pools <= 2; }), 1);
  EXPECT_EQ(find_node(capped, "p1")->outputs.size(), 2u);
  EXPECT_EQ(count_op(capped, OpType::MaxPool), 1);
  expect_same(ref, capped, {{"x", test::random_f32({2, 8, 9, 7}, 4)}}, 0);
  Graph none = ref;
  EXPECT_EQ(*fuse_pool_chains(none, nullptr), 0);
  EXPECT_EQ(count_op(none, OpType::MaxPool), 3);
}

// Pools that change the size, differ in window, or pool something else stay apart.
TEST(FusePoolChains, LeavesOtherPools) {
  Builder b;
  const int x = b.input("x", {1, 4, 8, 8});
  const int s1 = b.node(OpType::MaxPool, "s1", {x}, pool_window(3, 2));  // stride 2
  const int s2 = b.node(OpType::MaxPool, "s2", {s1}, pool_window(3, 2));
  const int a1 = b.node(OpType::MaxPool, "a1", {x}, pool_window(3));
  const int a2 = b.node(OpType::MaxPool, "a2", {a1}, pool_window(5));  // another window
  const int r = b.node(OpType::Relu, "r", {a1});
  const int a3 = b.node(OpType::MaxPool, "a3", {r}, pool_window(3));  // pools the Relu
  b.g.outputs = {s2, a2, a3};
  const Graph ref = b.prepared();
  Graph g = ref;
  EXPECT_EQ(*fuse_pool_chains(g, kAnyChain), 0);
  EXPECT_EQ(count_op(g, OpType::MaxPool), 5);
}

TEST(MaxPoolChain, InferenceNeedsASizeKeepingWindow) {
  Builder b;
  const int x = b.input("x", {1, 4, 8, 8});
  AttrMap a = pool_window(3, 2);
  b.g.outputs = {b.node(OpType::MaxPoolChain, "c", {x}, a)};
  b.g.nodes[0].outputs.push_back(b.g.add_value("c2"));
  b.g.relink();
  const Status s = prepare_graph(b.g, {});
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("size-keeping window"), std::string::npos) << s.message();
}

// The shipped detector (YOLOv5n, Conv + SiLU throughout, bottleneck shortcuts): every conv's SiLU fused, the
// shortcuts taken, same detections.
TEST(Fusion, ShippedDetectorFusedWhole) {
  auto m = import_onnx_file(test::source_dir() + "/models/yolov5n_fmnist_det.onnx");
  ASSERT_TRUE(m) << m.status().to_string();
  Graph ref = std::move(*m);
  ASSERT_TRUE(prepare_graph(ref, {}).is_ok());
  Graph g = ref;
  const FusionCounts c = *fuse_graph(g);
  EXPECT_EQ(c.batch_norms, 0);  // exported with BatchNorm folded
  EXPECT_EQ(c.activations, 57);
  EXPECT_EQ(c.residuals, 7);
  EXPECT_EQ(c.pool_chains, 0);  // no rule: no chains
  EXPECT_EQ(count_op(g, OpType::FusedConv), 57);
  EXPECT_TRUE(g.verify().is_ok());
  expect_same(ref, g, {{"images", test::random_f32({1, 3, 640, 640}, 11, 0, 1)}}, 1e-5);
  // SPPF's three pools as one chain.
  Graph chained = ref;
  const FusionCounts cc = *fuse_graph(chained, {}, FusionRules{kAnyChain, nullptr});
  EXPECT_EQ(cc.pool_chains, 1);
  EXPECT_EQ(count_op(chained, OpType::MaxPoolChain), 1);
  EXPECT_EQ(count_op(chained, OpType::MaxPool), 0);
  expect_same(ref, chained, {{"images", test::random_f32({1, 3, 640, 640}, 12, 0, 1)}}, 1e-5);
}

// GELU as exporters write it before opset 20, in each order of the products (PyTorch's, HuggingFace's and one more),
// becomes one Gelu node with the same values; a constant that is not 1/sqrt(2), 1 or 0.5, or an intermediate value
// read elsewhere, leaves the nodes alone.
TEST(FuseGelu, ErfFormsBecomeOneNode) {
  Builder b;
  const int x = b.input("x", {2, 5, 16});
  const auto c = [&](const std::string& n, float v) { return b.constant(n, Tensor::scalar_f32(v)); };
  // (x * (1 + erf(x / sqrt2))) * 0.5
  int e = b.node(OpType::Erf, "e1", {b.node(OpType::Div, "d1", {x, c("s1", 1.4142135f)})});
  int a = b.node(OpType::Add, "a1", {e, c("o1", 1.f)});
  const int y1 = b.node(OpType::Mul, "h1", {b.node(OpType::Mul, "m1", {x, a}), c("f1", 0.5f)});
  // x * ((1 + erf(x * (1 / sqrt2))) * 0.5), the Add's constant first
  e = b.node(OpType::Erf, "e2", {b.node(OpType::Mul, "d2", {c("s2", 0.70710677f), y1})});
  a = b.node(OpType::Add, "a2", {c("o2", 1.f), e});
  const int y2 = b.node(OpType::Mul, "h2", {y1, b.node(OpType::Mul, "m2", {a, c("f2", 0.5f)})});
  // (x * 0.5) * (1 + erf(x / sqrt2))
  const int half = b.node(OpType::Mul, "p3", {y2, c("f3", 0.5f)});
  e = b.node(OpType::Erf, "e3", {b.node(OpType::Div, "d3", {y2, c("s3", 1.4142135f)})});
  const int y3 = b.node(OpType::Mul, "h3", {half, b.node(OpType::Add, "a3", {e, c("o3", 1.f)})});
  // Not GELU: x / 2 inside the Erf.
  e = b.node(OpType::Erf, "e4", {b.node(OpType::Div, "d4", {y3, c("s4", 2.f)})});
  a = b.node(OpType::Add, "a4", {e, c("o4", 1.f)});
  const int y4 = b.node(OpType::Mul, "h4", {b.node(OpType::Mul, "m4", {y3, a}), c("f4", 0.5f)});
  // GELU, but the Erf's result is an output too.
  e = b.node(OpType::Erf, "e5", {b.node(OpType::Div, "d5", {y4, c("s5", 1.4142135f)})});
  a = b.node(OpType::Add, "a5", {e, c("o5", 1.f)});
  const int y5 = b.node(OpType::Mul, "h5", {b.node(OpType::Mul, "m5", {y4, a}), c("f5", 0.5f)});
  b.g.outputs = {y5, e};
  const Graph ref = b.prepared();
  Graph g = ref;
  EXPECT_EQ(*fuse_gelu(g), 3);
  EXPECT_EQ(count_op(g, OpType::Gelu), 3);
  EXPECT_EQ(count_op(g, OpType::Erf), 2);
  for (const char* name : {"h1", "h2", "h3"}) {
    const Node* n = find_node(g, name);
    ASSERT_NE(n, nullptr) << name;
    EXPECT_EQ(n->op, OpType::Gelu) << name;
    EXPECT_EQ(n->inputs.size(), 1u);
  }
  EXPECT_TRUE(g.verify().is_ok());
  expect_same(ref, g, {{"x", test::random_f32({2, 5, 16}, 7, -4.f, 4.f)}});
  Graph again = g;
  EXPECT_EQ(*fuse_gelu(again), 0);
}

}  // namespace
}  // namespace qd
