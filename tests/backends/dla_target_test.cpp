// The DLA rules target (backends/dla/): single rules on small graphs, and the seeds' results on the shipped models
// (ModelGN split by its GroupNorms, ModelBN's trunk in one DLA subgraph, the YOLOv5 detector on DLA up to its head).
#include <gtest/gtest.h>

#include "backends/dla/dla_placement.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "quant/calib_cache.h"
#include "test_util.h"

namespace qd {
namespace {

DlaTarget target(const std::string& v = "10") { return DlaTarget(*dla_profile(v)); }

// x [1,C,H,W] -> node(x, constants...) -> y; shapes inferred.
struct OneNode {
  Graph g;
  Node& node() { return g.nodes[0]; }
};

OneNode one_node(OpType op, AttrMap attrs, Shape in, std::vector<Tensor> constants = {}) {
  OneNode o;
  Graph& g = o.g;
  g.opset = 13;
  const int x = g.add_value("x"), y = g.add_value("y");
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = in;
  g.values[x].has_shape = true;
  g.inputs = {x};
  std::vector<int> ins = {x};
  for (size_t i = 0; i < constants.size(); ++i) {
    const int c = g.add_value("c" + std::to_string(i));
    g.constants[c] = constants[i];
    ins.push_back(c);
  }
  g.nodes.push_back(Node{"n", op, 13, attrs, ins, {y}});
  g.outputs = {y};
  g.relink();
  EXPECT_TRUE(prepare_graph(g, {}).is_ok());
  return o;
}

Support fp16(const DlaTarget& t, OneNode& o) {
  return t.supports(o.g, o.g.nodes[0], NodeFormats{{TensorPrecision::kFp16}, {TensorPrecision::kFp16}});
}

TEST(DlaRules, ConvolutionLimits) {
  const DlaTarget t = target();
  auto conv = [&](int k, int stride, int dil) {
    AttrMap a;
    a.set("strides", std::vector<int64_t>{stride, stride});
    a.set("dilations", std::vector<int64_t>{dil, dil});
    auto o = one_node(OpType::Conv, a, {1, 4, 64, 64}, {Tensor(DType::kFloat32, {8, 4, k, k})});
    return fp16(t, o);
  };
  EXPECT_TRUE(conv(3, 1, 1).yes);
  EXPECT_TRUE(conv(32, 8, 1).yes);
  const Support big = conv(33, 1, 1);
  EXPECT_FALSE(big.yes);
  EXPECT_NE(big.reason.find("kernel [33,33] outside [1, 32]"), std::string::npos) << big.reason;
  EXPECT_NE(big.source.find("Convolution and Fully Connected"), std::string::npos) << big.source;
  EXPECT_FALSE(conv(3, 9, 1).yes);
  EXPECT_FALSE(conv(2, 1, 33).yes);
  // DLA has no FP32.
  auto o = one_node(OpType::Relu, {}, {1, 4, 8, 8});
  const Support f32 = t.supports(o.g, o.g.nodes[0], NodeFormats{{TensorPrecision::kFp32}, {TensorPrecision::kFp32}});
  EXPECT_FALSE(f32.yes);
  EXPECT_NE(f32.reason.find("FP16 and INT8 only"), std::string::npos);
}

TEST(DlaRules, PoolingConcatResizeShuffle) {
  const DlaTarget t = target("8.6");
  auto pool = [&](int k) {
    AttrMap a;
    a.set("kernel_shape", std::vector<int64_t>{k, k});
    auto o = one_node(OpType::MaxPool, a, {1, 4, 32, 32});
    return fp16(t, o);
  };
  EXPECT_TRUE(pool(8).yes);
  EXPECT_FALSE(pool(9).yes);
  AttrMap up;
  up.set("mode", std::string("nearest"));
  auto r2 = one_node(OpType::Resize, up, {1, 4, 8, 8},
                     {Tensor(DType::kFloat32, {0}), Tensor::from_f32({4}, {1, 1, 3, 3})});
  EXPECT_TRUE(fp16(t, r2).yes) << fp16(t, r2).reason;
  up.set("mode", std::string("linear"));
  auto lin = one_node(OpType::Resize, up, {1, 4, 8, 8},
                      {Tensor(DType::kFloat32, {0}), Tensor::from_f32({4}, {1, 1, 2, 2})});
  EXPECT_FALSE(fp16(t, lin).yes);
  AttrMap flat;
  auto fl = one_node(OpType::Flatten, flat, {1, 4, 8, 8});
  const Support s = fp16(t, fl);
  EXPECT_FALSE(s.yes);
  EXPECT_NE(s.reason.find("4-D to 2-D"), std::string::npos) << s.reason;
  EXPECT_NE(s.source.find("TensorRT 8.6"), std::string::npos) << s.source;
}

TEST(DlaRules, UnknownProfileListsTheCoveredOnes) {
  auto p = dla_profile("9.1");
  ASSERT_FALSE(p);
  EXPECT_NE(p.status().to_string().find("dla:8.6"), std::string::npos);
  EXPECT_EQ(dla_profile("")->version, "10");
}

DlaPlacement place(const std::string& model, bool int8, const std::string& cache = "") {
  auto g = import_onnx_file(test::source_dir() + "/models/" + model);
  EXPECT_TRUE(g) << g.status().to_string();
  EXPECT_TRUE(prepare_graph(*g, {}).is_ok());
  DlaPlacementOptions opt;
  opt.int8 = int8;
  if (!cache.empty()) {
    auto c = read_calib_cache(test::source_dir() + "/models/" + cache);
    EXPECT_TRUE(c);
    for (const auto& [name, s] : c->scales) opt.act_scales[name] = s;
  }
  return place_on_dla(*g, target(), opt);
}

// Seed 004: every GroupNorm (Reshape -> InstanceNormalization -> Reshape) leaves the DLA and comes back.
TEST(DlaPlacement, ModelGnIsSplitAtEveryGroupNorm) {
  const DlaPlacement p = place("model_gn.onnx", false);
  EXPECT_EQ(p.dla_subgraphs, 6);
  EXPECT_EQ(p.segments.size(), 11u);
  EXPECT_EQ(p.gpu_to_dla, 5);
  int norms = 0;
  for (const auto& n : p.nodes) {
    if (n.op == "InstanceNormalization") {
      ++norms;
      EXPECT_EQ(n.device, Device::kGpu);
      EXPECT_NE(n.reason.find("normalization layer"), std::string::npos) << n.reason;
    }
  }
  EXPECT_EQ(norms, 4);
}

// Seed 004's ModelBN log: the Conv/Relu trunk in one DLA subgraph, the pooling and Flatten on the GPU, the Gemm in a
// DLA subgraph of its own with its reshapes on the GPU.
TEST(DlaPlacement, ModelBnTrunkIsOneDlaSubgraph) {
  const DlaPlacement p = place("model_bn.onnx", false);
  ASSERT_EQ(p.segments.size(), 3u);
  EXPECT_EQ(p.segments[0].device, Device::kDla);
  EXPECT_EQ(p.segments[0].nodes.size(), 8u);
  EXPECT_EQ(p.nodes[p.segments[0].nodes.front()].node, "/cnn/cnn.0/Conv");
  EXPECT_EQ(p.nodes[p.segments[0].nodes.back()].node, "/cnn/cnn.11/Relu");
  EXPECT_EQ(p.segments[1].device, Device::kGpu);
  EXPECT_EQ(p.nodes[p.segments[1].nodes.front()].node, "/pool/GlobalAveragePool");
  EXPECT_EQ(p.segments[2].device, Device::kDla);
  EXPECT_EQ(p.nodes[p.segments[2].nodes.front()].node, "/linear/Gemm");
  EXPECT_EQ(p.dla_subgraphs, 2);
  ASSERT_EQ(p.inputs.size(), 1u);
  EXPECT_EQ(p.inputs[0].format, "fp16:chw16");
}

// Seed 000/001: the detector runs on DLA from its input to the three head convs, INT8 with the shipped cache; the
// decoding after them (5-D reshapes) runs on the GPU; the input qualifies for int8:dla_hwc4.
TEST(DlaPlacement, DetectorOnDlaUpToTheHeadConvs) {
  const DlaPlacement p = place("yolov5n_fmnist_det.onnx", true, "yolov5n_fmnist_det.cache");
  EXPECT_EQ(p.dla_subgraphs, 1);
  ASSERT_EQ(p.segments.size(), 2u);
  ASSERT_EQ(p.segments[0].device, Device::kDla);
  int convs = 0;
  for (const auto& n : p.nodes) {
    if (n.op == "Conv") {
      ++convs;
      EXPECT_EQ(n.device, Device::kDla) << n.node;
    }
    if (n.device == Device::kDla) {
      EXPECT_EQ(n.precision, "int8") << n.node << ": " << n.reason;
    }
    if (n.device == Device::kGpu) {
      EXPECT_EQ(n.node.rfind("/model.24/", 0), 0u) << n.node;
    }
  }
  EXPECT_EQ(convs, 60);
  // The entropy cache gives each Concat/MaxPool tensor its own scale: noted, since DLA wants one per such node.
  int differ = 0;
  for (const auto& n : p.nodes) differ += n.reason.find("INT8 scales differ") != std::string::npos;
  EXPECT_EQ(differ, 15);
  std::set<std::string> dla_head;
  for (int i : p.segments[0].nodes) {
    if (p.nodes[i].node.rfind("/model.24/m.", 0) == 0) dla_head.insert(p.nodes[i].node);
  }
  EXPECT_EQ(dla_head, (std::set<std::string>{"/model.24/m.0/Conv", "/model.24/m.1/Conv", "/model.24/m.2/Conv"}));
  EXPECT_EQ(p.dla_to_gpu, 3);
  EXPECT_EQ(p.trtexec_io_flags(), "--inputIOFormats=int8:dla_hwc4 --outputIOFormats=fp32:chw");
  const std::string svg = dla_placement_svg(p, "det");
  EXPECT_NE(svg.find("<rect class=\"segment\""), std::string::npos);
  EXPECT_NE(dla_placement_json(p).find("\"dla_subgraphs\": 1"), std::string::npos);
}

}  // namespace
}  // namespace qd
