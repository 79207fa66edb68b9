// plan_layouts: where a build puts each node (the target's fast layers or the ONNX form) and the reformats that
// follows, from the target's answers alone.
#include "plan/layout.h"

#include <gtest/gtest.h>

#include "backends/cuda/cuda_target.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "runtime/cpu_target.h"
#include "test_util.h"

namespace qd {
namespace {

const auto kFp16 = [](int) { return TensorPrecision::kFp16; };

int conv(test::GraphBuilder& b, const std::string& name, int x, int64_t c, int64_t m) {
  AttrMap a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  return b.node(OpType::Conv, name, {x, b.constant(name + "_w", test::random_f32({m, c, 3, 3}, 1))}, a);
}
int pool(test::GraphBuilder& b, const std::string& name, int x) {
  AttrMap a;
  a.set("kernel_shape", std::vector<int64_t>{2, 2});
  a.set("strides", std::vector<int64_t>{2, 2});
  return b.node(OpType::MaxPool, name, {x}, a);
}
int node_index(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// conv1 -> pool (8 channels: an NHWC layer) -> conv2 -> pool2 (6 channels: generic) -> conv3: the first pool stays
// on the fast layers, the second does not, so conv2 writes the ONNX form itself and conv3 reads a reformat.
TEST(PlanLayouts, FastWhereTheTargetSaysSoReformatsBetween) {
  test::GraphBuilder b;
  const int x = b.input("x", {1, 3, 16, 16});
  const int p1 = pool(b, "pool1", conv(b, "conv1", x, 3, 8));
  const int p2 = pool(b, "pool2", conv(b, "conv2", p1, 8, 6));
  const int y = conv(b, "conv3", p2, 6, 8);
  b.g.outputs = {y, p1};
  const Graph g = b.prepared();
  const LayoutPlan p = plan_layouts(g, cuda::CudaTarget(), kFp16);
  for (const char* n : {"conv1", "pool1", "conv2", "conv3"}) EXPECT_TRUE(p.fast(node_index(g, n))) << n;
  EXPECT_FALSE(p.fast(node_index(g, "pool2")));
  EXPECT_EQ(p.values[g.nodes[node_index(g, "conv1")].outputs[0]], Layout::kFast);
  EXPECT_EQ(p.values[g.nodes[node_index(g, "conv2")].outputs[0]], Layout::kOnnx);  // its epilogue writes NCHW fp32
  ASSERT_EQ(p.reformats.size(), 3u);
  EXPECT_EQ(g.values[p.reformats[0].value].name, "x");
  EXPECT_EQ(p.reformats[0].to, Layout::kFast);
  EXPECT_EQ(p.reformats[0].readers, std::vector<int>{node_index(g, "conv1")});
  EXPECT_EQ(p.reformats[1].value, p2);
  EXPECT_EQ(p.reformats[1].readers, std::vector<int>{node_index(g, "conv3")});
  EXPECT_EQ(p.reformats[2].value, p1);  // an output written by an NHWC layer is bound in the ONNX form
  EXPECT_EQ(p.reformats[2].to, Layout::kOnnx);
  EXPECT_TRUE(p.reformats[2].readers.empty());
  // fp32 builds and the CPU reference run everything in the ONNX form.
  const LayoutPlan fp32 = plan_layouts(g, cuda::CudaTarget(), [](int) { return TensorPrecision::kFp32; });
  EXPECT_EQ(fp32.count(Layout::kFast), 0);
  EXPECT_TRUE(fp32.reformats.empty());
  const LayoutPlan cpu = plan_layouts(g, CpuTarget(), kFp16);
  EXPECT_EQ(cpu.count(Layout::kOnnx), static_cast<int>(g.nodes.size()));
  EXPECT_TRUE(cpu.reformats.empty());
}

// The shipped detector in fp16 under the CUDA rules: every conv, pool chain, upsample and channel Concat on the fast
// layers, the head decodes in the ONNX form that the head convs write themselves, one reformat (the image).
TEST(PlanLayouts, ShippedDetector) {
  auto m = import_onnx_file(test::source_dir() + "/models/yolov5n_fmnist_det.onnx");
  ASSERT_TRUE(m) << m.status().to_string();
  Graph g = std::move(*m);
  ASSERT_TRUE(prepare_graph(g, {}).is_ok());
  ASSERT_TRUE(fuse_graph(g, {}, cuda::cuda_fusion_rules(Precision::kFp16)));
  const LayoutPlan p = plan_layouts(g, cuda::CudaTarget(), kFp16);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const OpType op = g.nodes[i].op;
    const bool four_d = g.values[g.nodes[i].outputs[0]].shape.size() == 4;  // the levels' Concat is 3-d
    const bool fast_op = op == OpType::FusedConv || op == OpType::Conv || op == OpType::MaxPoolChain ||
                         op == OpType::Resize || (op == OpType::Concat && four_d);
    EXPECT_EQ(p.fast(static_cast<int>(i)), fast_op) << g.nodes[i].name;
  }
  ASSERT_EQ(p.reformats.size(), 1u);
  EXPECT_EQ(g.values[p.reformats[0].value].name, "images");
}

}  // namespace
}  // namespace qd
