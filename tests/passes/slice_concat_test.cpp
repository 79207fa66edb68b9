// fuse_slice_concat and the SliceConcat op: a detector head's decode (slices of one tensor's last axis, each through
// elementwise steps, concatenated) fused into one node that the reference runs to the same bits; what the pass leaves
// alone; the CUDA rules' limits; the shipped detector's three decodes.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_target.h"
#include "onnx/importer.h"
#include "ops/fused.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "test_util.h"

namespace qd {
namespace {

const SliceConcatRule kAny = [](const Graph&, const Node&) { return true; };

struct Builder : test::GraphBuilder {
  int c(const std::string& name, float v) { return constant(name, Tensor::scalar_f32(v)); }
  // x[..., start:end] along `axis` with `step`.
  int slice(const std::string& name, int x, int64_t start, int64_t end, int64_t axis = -1, int64_t step = 1) {
    return node(OpType::Slice, name,
                {x, constant(name + "_s", Tensor::from_i64({start})), constant(name + "_e", Tensor::from_i64({end})),
                 constant(name + "_a", Tensor::from_i64({axis})), constant(name + "_p", Tensor::from_i64({step}))});
  }
  int concat(const std::string& name, std::vector<int> in, int64_t axis = -1) {
    AttrMap a;
    a.set("axis", axis);
    return node(OpType::Concat, name, std::move(in), a);
  }
  // YOLO's decode of s [N, 3, H, W, 2 + 2 + k]: xy = ((s * 2) - 0.5 + grid) * stride, wh = (s * 2)^2 * anchors,
  // then the rest; written with a reversed Sub and Div and a Clip so that both operand orders and bounds are covered.
  int decode(const std::string& p, int s, const Shape& shape) {
    const Shape g5 = {1, shape[1], shape[2], shape[3], 2}, a5 = {1, shape[1], 1, 1, 2};
    int xy = node(OpType::Mul, p + "m2", {slice(p + "s0", s, 0, 2), c(p + "two", 2.f)});
    xy = node(OpType::Sub, p + "sub", {xy, c(p + "half", 0.5f)});
    xy = node(OpType::Add, p + "grid", {constant(p + "g", test::random_f32(g5, 3, 0, 8)), xy});
    xy = node(OpType::Mul, p + "stride", {xy, c(p + "st", 8.f)});
    int wh = node(OpType::Mul, p + "wm2", {slice(p + "s1", s, 2, 4), c(p + "two_b", 2.f)});
    wh = node(OpType::Pow, p + "pow", {wh, c(p + "sq", 2.f)});
    wh = node(OpType::Mul, p + "anch", {wh, constant(p + "a", test::random_f32(a5, 4, 10, 40))});
    int conf = node(OpType::Sub, p + "rsub", {c(p + "one", 1.f), slice(p + "s2", s, 4, shape[4])});
    conf = node(OpType::Div, p + "rdiv", {c(p + "k", 3.f), node(OpType::Add, p + "eps", {conf, c(p + "e", 1.5f)})});
    conf = node(OpType::Clip, p + "clip", {conf, c(p + "lo", 0.f), c(p + "hi", 1.75f)});
    return concat(p + "cat", {xy, wh, conf});
  }
};

using test::count_op;
using test::find_node;

// Both graphs on the reference give the same bits.
void expect_identical(const Graph& a, const Graph& b, const std::map<std::string, Tensor>& in) {
  test::expect_same_outputs(a, b, in, 0);
}

TEST(FuseSliceConcat, YoloDecodeBecomesOneNode) {
  Builder b;
  const Shape s1 = {2, 3, 4, 5, 9}, s2 = {2, 3, 2, 3, 9};
  const int x1 = b.input("x1", s1), x2 = b.input("x2", s2);
  const int d1 = b.decode("p3/", b.node(OpType::Sigmoid, "sig1", {x1}), s1);
  const int d2 = b.decode("p4/", b.node(OpType::Sigmoid, "sig2", {x2}), s2);
  const int r1 = b.node(OpType::Reshape, "r1", {d1, b.constant("rs1", Tensor::from_i64({2, -1, 9}))});
  const int r2 = b.node(OpType::Reshape, "r2", {d2, b.constant("rs2", Tensor::from_i64({2, -1, 9}))});
  b.g.outputs = {b.concat("levels", {r1, r2}, 1)};
  const Graph ref = b.prepared();
  Graph g = ref;
  EXPECT_EQ(*fuse_slice_concat(g, kAny), 2);
  EXPECT_EQ(count_op(g, OpType::SliceConcat), 2);
  EXPECT_EQ(count_op(g, OpType::Slice), 0);
  EXPECT_EQ(count_op(g, OpType::Mul), 0);
  EXPECT_EQ(count_op(g, OpType::Concat), 1);  // the levels' Concat stays
  EXPECT_TRUE(g.verify().is_ok());
  const Node* f = find_node(g, "p3/cat");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->op, OpType::SliceConcat);
  const auto attrs = ops::slice_concat_attrs(*f);
  ASSERT_TRUE(attrs) << attrs.status().to_string();
  ASSERT_EQ(attrs->segments.size(), 3u);
  EXPECT_EQ(attrs->segments[0].start, 0);
  EXPECT_EQ(attrs->segments[1].start, 2);
  EXPECT_EQ(attrs->segments[2].start, 4);
  EXPECT_EQ(attrs->segments[2].len, 5);
  ASSERT_EQ(attrs->segments[0].steps.size(), 4u);
  EXPECT_EQ(attrs->segments[0].steps[2].op, OpType::Add);
  EXPECT_FALSE(attrs->segments[0].steps[2].x_first);  // grid + x
  ASSERT_EQ(attrs->segments[2].steps.size(), 4u);
  EXPECT_EQ(attrs->segments[2].steps[3].op, OpType::Clip);
  EXPECT_EQ(attrs->segments[2].steps[3].b, 1.75f);
  EXPECT_EQ(f->inputs.size(), 1u + 10u);  // the source, then each binary step's constant (Clip: bounds in a, b)
  const std::vector<std::string> fused = {"p3/s0", "p3/m2", "p3/sub", "p3/grid", "p3/stride", "p3/s1", "p3/wm2",
                                          "p3/pow", "p3/anch", "p3/s2", "p3/rsub", "p3/eps", "p3/rdiv", "p3/clip"};
  EXPECT_EQ(attrs->fused, fused);
  expect_identical(ref, g, {{"x1", test::random_f32(s1, 5, -6, 6)}, {"x2", test::random_f32(s2, 6, -6, 6)}});
  Graph again = g;
  EXPECT_EQ(*fuse_slice_concat(again, kAny), 0);
}

// The target's rule decides; a null rule fuses nothing.
TEST(FuseSliceConcat, TheTargetsRuleDecides) {
  Builder b;
  const Shape s = {1, 3, 2, 2, 7};
  b.g.outputs = {b.decode("h/", b.input("x", s), s)};
  const Graph ref = b.prepared();
  Graph none = ref;
  EXPECT_EQ(*fuse_slice_concat(none, nullptr), 0);
  Graph two = ref;
  const SliceConcatRule two_segments = [](const Graph&, const Node& f) {
    return ops::slice_concat_attrs(f)->segments.size() <= 2;
  };
  EXPECT_EQ(*fuse_slice_concat(two, two_segments), 0);
  EXPECT_EQ(count_op(two, OpType::Slice), 3);
  Graph cuda = ref;
  EXPECT_EQ(*fuse_slice_concat(cuda, cuda::cuda_fusion_rules(Precision::kFp16).slice_concat), 1);
  expect_identical(ref, cuda, {{"x", test::random_f32(s, 7, -3, 3)}});
}

// Concats that are not such a decode stay as they are.
TEST(FuseSliceConcat, LeavesOtherConcats) {
  Builder b;
  const int x = b.input("x", {2, 4, 6}), y = b.input("y", {2, 4, 6});
  std::vector<int> outs;
  // Along another axis.
  outs.push_back(b.concat("axis1", {b.slice("a0", x, 0, 2, 1), b.slice("a1", x, 2, 4, 1)}, 1));
  // A strided slice.
  outs.push_back(b.concat("strided", {b.slice("b0", x, 0, 6, -1, 2), b.slice("b1", x, 1, 6, -1, 2)}));
  // Slices of two tensors.
  outs.push_back(b.concat("two", {b.slice("c0", x, 0, 3), b.slice("c1", y, 3, 6)}));
  // A step's result read elsewhere too.
  const int shared = b.node(OpType::Relu, "relu", {b.slice("d0", x, 0, 3)});
  outs.push_back(b.concat("shared", {shared, b.slice("d1", x, 3, 6)}));
  outs.push_back(shared);
  // A step whose other input is computed at run time.
  const int live = b.node(OpType::Mul, "live", {b.slice("e0", x, 0, 3), b.slice("e2", y, 0, 3)});
  outs.push_back(b.concat("runtime", {live, b.slice("e1", x, 3, 6)}));
  // A Concat input that is no slice at all.
  outs.push_back(b.concat("plain", {b.slice("f0", x, 0, 3), b.node(OpType::Relu, "r", {y})}));
  b.g.outputs = outs;
  Graph g = b.prepared();
  EXPECT_EQ(*fuse_slice_concat(g, kAny), 0);
  EXPECT_EQ(count_op(g, OpType::SliceConcat), 0);
}

TEST(SliceConcat, InferenceChecksSegmentsAndOperands) {
  const auto infer = [](int64_t start, int64_t len, const Shape& operand) {
    Builder b;
    const int x = b.input("x", {2, 8});
    Node f;
    ops::SliceConcatAttrs a;
    a.segments.push_back({start, len, {{OpType::Mul, 1, true, 0.f, 0.f}}});
    const int y = b.g.add_value("y");
    b.g.nodes.push_back({"f", OpType::SliceConcat, 13, {}, {x, b.constant("k", test::random_f32(operand, 1))}, {y}});
    ops::set_slice_concat_attrs(b.g.nodes.back(), a);
    b.g.outputs = {y};
    b.g.relink();
    return prepare_graph(b.g, {});
  };
  EXPECT_TRUE(infer(2, 6, {1, 6}).is_ok());
  Status s = infer(4, 6, {6});
  EXPECT_NE(s.message().find("lies outside"), std::string::npos) << s.message();
  s = infer(2, 4, {3, 4});
  EXPECT_NE(s.message().find("does not broadcast"), std::string::npos) << s.message();
}

// The CUDA decode kernel's limits: four segments, constants whose broadcast takes at most two index terms.
TEST(FuseSliceConcat, CudaRuleStatesTheKernelsLimits) {
  const SliceConcatRule rule = cuda::cuda_fusion_rules(Precision::kFp32).slice_concat;
  ASSERT_TRUE(rule);
  Builder b;
  const int x = b.input("x", {2, 3, 4, 5, 10});
  std::vector<int> five;
  for (int k = 0; k < 5; ++k) five.push_back(b.slice("s" + std::to_string(k), x, 2 * k, 2 * k + 2));
  // A [2, 1, 4, 1, 2] operand over [2, 3, 4, 5, 2]: three runs of dims it does not broadcast over, three terms.
  const int odd =
      b.node(OpType::Add, "odd", {b.slice("t0", x, 0, 2), b.constant("k", test::random_f32({2, 1, 4, 1, 2}, 2))});
  b.g.outputs = {b.concat("five", five), b.concat("terms", {odd, b.slice("t1", x, 2, 10)})};
  Graph g = b.prepared();
  EXPECT_EQ(*fuse_slice_concat(g, rule), 0);
  EXPECT_EQ(*fuse_slice_concat(g, kAny), 2);
}

// The shipped detector: its three levels' decodes become SliceConcats under the CUDA rules, same detections.
TEST(FuseSliceConcat, ShippedDetectorHeads) {
  auto m = import_onnx_file(test::source_dir() + "/models/yolov5n_fmnist_det.onnx");
  ASSERT_TRUE(m) << m.status().to_string();
  Graph ref = std::move(*m);
  ASSERT_TRUE(prepare_graph(ref, {}).is_ok());
  const FusionRules rules = cuda::cuda_fusion_rules(Precision::kFp16);
  Graph base = ref;  // the other fusions, which change rounding, on both sides
  ASSERT_EQ(fuse_graph(base, {}, {rules.pool_chain, nullptr})->slice_concats, 0);
  Graph g = ref;
  const FusionCounts c = *fuse_graph(g, {}, rules);
  EXPECT_EQ(c.slice_concats, 3);
  EXPECT_EQ(count_op(g, OpType::SliceConcat), 3);
  EXPECT_EQ(count_op(g, OpType::Slice), 0);
  expect_identical(base, g, {{"images", test::random_f32({1, 3, 640, 640}, 13, 0, 1)}});
}

}  // namespace
}  // namespace qd
