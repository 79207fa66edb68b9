// The Q/DQ export (quant/qdq_export.h) against the build from scales, and the DLA rounding mode of the INT8 rewrite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "onnx/exporter.h"
#include "onnx/importer.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "quant/calib_cache.h"
#include "quant/fp16_regions.h"
#include "quant/int8.h"
#include "quant/qdq.h"
#include "quant/qdq_export.h"
#include "test_util.h"

namespace qd {
namespace {

Tensor run_int8(Graph g, const Int8Options& opt, const std::string& input, const Tensor& x) {
  PrepareOptions p;
  p.input_shapes[input] = x.shape();
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  auto r = lower_int8(g, opt);
  EXPECT_TRUE(r) << r.status().to_string();
  auto out = run_reference(g, {{input, x}});
  EXPECT_TRUE(out) << out.status().to_string();
  return out ? (*out)[0] : Tensor();
}

// ModelBN with a scale on every Conv/Gemm input (max |x| / 127 of one batch), one layer kept in float.
TEST(QdqExport, BuildOfTheQdqModelEqualsTheBuildFromScales) {
  const std::string model = test::source_dir() + "/models/model_bn.onnx";
  auto g = import_onnx_file(model);
  ASSERT_TRUE(g) << g.status().to_string();
  const Tensor x = test::random_f32({1, 3, 32, 32}, 5, 0.f, 1.f);
  Int8Options opt;
  {
    Graph p = *g;
    PrepareOptions po;
    po.input_shapes["input"] = x.shape();
    ASSERT_TRUE(prepare_graph(p, po).is_ok());
    for (const Node& n : p.nodes) {
      if (n.op == OpType::Conv || n.op == OpType::Gemm) p.outputs.push_back(n.inputs[0]);
    }
    auto outs = run_reference(p, {{"input", x}});
    ASSERT_TRUE(outs) << outs.status().to_string();
    for (size_t i = 1; i < p.outputs.size(); ++i) {
      float amax = 0;
      for (int64_t k = 0; k < (*outs)[i].numel(); ++k) amax = std::max(amax, std::fabs((*outs)[i].data<float>()[k]));
      opt.act_scales[p.values[p.outputs[i]].name] = amax / 127.f;
    }
  }
  ASSERT_EQ(opt.act_scales.size(), 5u);
  opt.float_nodes = {"/cnn/cnn.6/Conv"};
  opt = resolve_float_nodes(*g, opt);
  QdqExportReport rep;
  auto qdq = insert_qdq(*g, opt, &rep);
  ASSERT_TRUE(qdq) << qdq.status().to_string();
  EXPECT_EQ(rep.int8_nodes.size(), 4u);
  EXPECT_EQ(rep.weight_quantizers, 4);
  EXPECT_EQ(rep.activation_quantizers, 4);
  // Through ONNX bytes and back, as a user's file would go.
  auto bytes = export_onnx_bytes(*qdq);
  ASSERT_TRUE(bytes) << bytes.status().to_string();
  auto back = import_onnx_bytes(*bytes, "", "model_qdq.onnx");
  ASSERT_TRUE(back) << back.status().to_string();
  ASSERT_TRUE(has_qdq(*back));
  auto scales = strip_qdq(*back);
  ASSERT_TRUE(scales) << scales.status().to_string();
  EXPECT_EQ(scales->act_scales.size(), 4u);
  EXPECT_EQ(scales->weight_scales.size(), 4u);
  Int8Options from_qdq;
  from_qdq.act_scales = scales->act_scales;
  from_qdq.weight_scales = scales->weight_scales;
  const Tensor a = run_int8(*g, opt, "input", x);
  const Tensor b = run_int8(*back, from_qdq, "input", x);
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()), 0) << test::max_abs_diff(a, b);

  // The strongly typed form (float layers cast to FP16) builds the same: strip_qdq widens the casts back.
  std::set<std::string> int8_layers(rep.int8_nodes.begin(), rep.int8_nodes.end());
  Fp16RegionReport fp16;
  auto typed = cast_float_regions_to_fp16(*qdq, int8_layers, &fp16);
  ASSERT_TRUE(typed) << typed.status().to_string();
  EXPECT_GT(fp16.fp16_nodes, 0);
  EXPECT_GT(fp16.casts_to_fp16, 0);
  EXPECT_GT(fp16.casts_to_fp32, 0);
  // The float conv kept out of INT8 computes in FP16 (reads FP16 copies of its input and weights); the INT8 ones
  // read their DequantizeLinear outputs directly.
  for (const Node& n : typed->nodes) {
    if (n.op != OpType::Conv) continue;
    const bool reads_fp16 = typed->values[n.inputs[0]].dtype == DType::kFloat16 ||
                            typed->values[n.inputs[0]].name.find("_fp16") != std::string::npos;
    EXPECT_EQ(reads_fp16, n.name == "/cnn/cnn.6/Conv") << n.name;
  }
  auto typed_bytes = export_onnx_bytes(*typed);
  ASSERT_TRUE(typed_bytes) << typed_bytes.status().to_string();
  auto typed_back = import_onnx_bytes(*typed_bytes, "", "model_qdq.onnx");
  ASSERT_TRUE(typed_back) << typed_back.status().to_string();
  EXPECT_EQ(typed_back->outputs.size(), g->outputs.size());
  EXPECT_EQ(typed_back->values[typed_back->outputs[0]].name, g->values[g->outputs[0]].name);
  auto typed_scales = strip_qdq(*typed_back);
  ASSERT_TRUE(typed_scales) << typed_scales.status().to_string();
  EXPECT_EQ(typed_scales->act_scales, scales->act_scales);
  EXPECT_EQ(typed_scales->weight_scales, scales->weight_scales);
  for (const Node& n : typed_back->nodes) EXPECT_NE(n.op, OpType::Cast) << n.name;
  const Tensor c = run_int8(*typed_back, from_qdq, "input", x);
  ASSERT_EQ(a.numel(), c.numel());
  EXPECT_EQ(std::memcmp(a.data<float>(), c.data<float>(), a.nbytes()), 0) << test::max_abs_diff(a, c);
}

// The shipped ConvNeXt classifier with its cache: its Linear layers (MatMul by [C, K] weights, channels-last inputs)
// get per-column weight Q/DQ pairs, and the Q/DQ model builds what the scales build.
TEST(QdqExport, LinearLayersWrittenAsMatMul) {
  const std::string model = test::source_dir() + "/models/convnext_fmnist.onnx";
  auto g = import_onnx_file(model);
  ASSERT_TRUE(g) << g.status().to_string();
  auto cache = read_calib_cache(test::source_dir() + "/models/convnext_fmnist.cache");
  ASSERT_TRUE(cache) << cache.status().to_string();
  Int8Options opt;
  for (const auto& [name, s] : cache->scales) opt.act_scales[name] = s;
  QdqExportReport rep;
  auto qdq = insert_qdq(*g, opt, &rep);
  ASSERT_TRUE(qdq) << qdq.status().to_string();
  int matmuls = 0, int8_matmuls = 0;
  for (const Node& n : g->nodes) matmuls += n.op == OpType::MatMul;
  for (const std::string& name : rep.int8_nodes) {
    for (const Node& n : g->nodes) int8_matmuls += n.name == name && n.op == OpType::MatMul;
  }
  EXPECT_GT(matmuls, 0);
  EXPECT_EQ(int8_matmuls, matmuls);
  for (const Node& n : qdq->nodes) {
    if (n.op != OpType::MatMul) continue;
    const Node* dq = qdq->values[n.inputs[1]].producer >= 0 ? &qdq->nodes[qdq->values[n.inputs[1]].producer] : nullptr;
    ASSERT_TRUE(dq && dq->op == OpType::DequantizeLinear) << n.name;
    EXPECT_EQ(*dq->attrs.get_int("axis", 1), 1) << n.name;
  }
  auto bytes = export_onnx_bytes(*qdq);
  ASSERT_TRUE(bytes) << bytes.status().to_string();
  auto back = import_onnx_bytes(*bytes, "", "convnext_qdq.onnx");
  ASSERT_TRUE(back) << back.status().to_string();
  auto scales = strip_qdq(*back);
  ASSERT_TRUE(scales) << scales.status().to_string();
  Int8Options from_qdq;
  from_qdq.act_scales = scales->act_scales;
  from_qdq.weight_scales = scales->weight_scales;
  const Tensor x = test::random_f32({2, 3, 32, 32}, 9, 0.f, 1.f);
  const Tensor a = run_int8(*g, opt, "input", x);
  const Tensor b = run_int8(*back, from_qdq, "input", x);
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()), 0) << test::max_abs_diff(a, b);
}

// x -> DQ(Q(x)) -> Conv (INT8) -> Sigmoid -> Mul(conv, sigmoid) -> output, and Mul -> Q -> DQ -> Conv (INT8) ->
// second output: the SiLU computes in FP16 between a cast of the conv's float32 output and a cast back that writes
// the original tensor name (read by the quantizer and the graph output).
TEST(Fp16Regions, CastsAtTheBoundariesOfTheFloatRegion) {
  Graph g;
  g.opset = 13;
  auto f32 = [&](const std::string& name) { return g.add_value(name); };
  const int x = f32("x"), c1 = f32("c1"), s = f32("s"), m = f32("m"), c2 = f32("c2");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {1, 1, 2, 2};
  g.values[x].has_shape = true;
  const int w1 = g.add_constant("w1", Tensor::from_f32({1, 1, 1, 1}, {0.5f}));
  const int w2 = g.add_constant("w2", Tensor::from_f32({1, 1, 1, 1}, {2.f}));
  g.nodes.push_back(Node{"conv1", OpType::Conv, 13, {}, {x, w1}, {c1}});
  g.nodes.push_back(Node{"sig", OpType::Sigmoid, 13, {}, {c1}, {s}});
  g.nodes.push_back(Node{"mul", OpType::Mul, 13, {}, {c1, s}, {m}});
  g.nodes.push_back(Node{"conv2", OpType::Conv, 13, {}, {m, w2}, {c2}});
  g.outputs = {m, c2};
  g.relink();
  Int8Options opt;
  opt.act_scales["x"] = 1.f / 127;
  opt.act_scales["m"] = 1.f / 127;
  QdqExportReport rep;
  auto qdq = insert_qdq(g, opt, &rep);
  ASSERT_TRUE(qdq) << qdq.status().to_string();
  ASSERT_EQ(rep.int8_nodes.size(), 2u);
  Fp16RegionReport fp16;
  auto typed = cast_float_regions_to_fp16(*qdq, {"conv1", "conv2"}, &fp16);
  ASSERT_TRUE(typed) << typed.status().to_string();
  EXPECT_EQ(fp16.fp16_nodes, 2);     // Sigmoid, Mul
  EXPECT_EQ(fp16.casts_to_fp16, 1);  // conv1's output
  EXPECT_EQ(fp16.casts_to_fp32, 1);  // m, read by its quantizer and the graph output
  const Graph& t = *typed;
  auto producer = [&](const std::string& name) -> const Node& {
    const int v = t.find_value(name);
    EXPECT_GE(v, 0) << name;
    return t.nodes[t.values[v].producer];
  };
  const Node& back = producer("m");
  EXPECT_EQ(back.op, OpType::Cast);
  EXPECT_EQ(*back.attrs.get_int("to"), 1);
  EXPECT_EQ(t.values[back.inputs[0]].name, "m_fp16");
  EXPECT_EQ(producer("m_fp16").name, "mul");
  const Node& to_half = producer("c1_fp16");
  EXPECT_EQ(*to_half.attrs.get_int("to"), 10);
  EXPECT_EQ(t.values[to_half.inputs[0]].name, "c1");
  EXPECT_EQ(producer("c1").name, "conv1");
  for (const char* n : {"sig", "mul"}) {
    for (const Node& node : t.nodes) {
      if (node.name != n) continue;
      for (int in : node.inputs) EXPECT_NE(t.values[in].name, "c1") << n << " reads the float32 tensor";
    }
  }
  EXPECT_EQ(t.values[t.outputs[0]].name, "m");
  // Widening gives back the Q/DQ graph's tensors, names and nodes.
  Graph w = t;
  EXPECT_EQ(widen_fp16_casts(w), 2);
  EXPECT_EQ(w.nodes.size(), qdq->nodes.size());
  for (const Node& n : w.nodes) EXPECT_NE(n.op, OpType::Cast);
  EXPECT_EQ(w.nodes[w.values[w.find_value("m")].producer].name, "mul");
}

TEST(QdqExport, RefusesOldOpsets) {
  Graph g;
  g.opset = 11;
  EXPECT_FALSE(insert_qdq(g, Int8Options{}));
}

// x (two values on a tie, x / s = +-2.5, and two off it) -> Conv 1x1 with weight 1 (q_w = 127, s_w = 1/127): the
// output is the quantized input, q_x.
TEST(Int8DlaRounding, TiesRoundAwayFromZeroOnlyInDlaMode) {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), w = g.add_value("w"), y = g.add_value("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {1, 1, 1, 4};
  g.values[x].has_shape = true;
  g.constants[w] = Tensor::from_f32({1, 1, 1, 1}, {1.f});
  g.nodes.push_back(Node{"conv", OpType::Conv, 13, {}, {x, w}, {y}});
  g.outputs = {y};
  g.relink();
  const Tensor in = Tensor::from_f32({1, 1, 1, 4}, {2.5f, -2.5f, 3.5f, 1.25f});
  Int8Options opt;
  opt.act_scales["x"] = 1.f;
  const Tensor even = run_int8(g, opt, "x", in);
  opt.mode = Int8Mode::kExactDla;
  const Tensor away = run_int8(g, opt, "x", in);
  const std::vector<float> want_even = {2, -2, 4, 1}, want_away = {3, -3, 4, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(even.data<float>()[i], want_even[i]) << i;
    EXPECT_FLOAT_EQ(away.data<float>()[i], want_away[i]) << i;
  }
}

}  // namespace
}  // namespace qd
