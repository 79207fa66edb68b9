#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/file_io.h"
#include "onnx/importer.h"
#include "quant/precision_config.h"
#include "quant/qat2ptq.h"
#include "quant/qdq.h"
#include "runtime/engine.h"
#include "tasks/detector.h"
#include "test_util.h"

namespace qd {

namespace {

// Small hand-built QAT graphs: values [1, 2, 4, 4], 1x1 Convs, Q/DQ pairs with chosen scales.
class Qat {
 public:
  Qat() {
    g_.opset = 13;
    zero_ = constant("zp", Tensor(DType::kInt8, {}));
  }
  int input(const std::string& name) {
    const int v = g_.add_value(name);
    g_.values[v].dtype = DType::kFloat32;
    g_.values[v].shape = {1, 2, 4, 4};
    g_.values[v].has_shape = true;
    g_.inputs.push_back(v);
    return v;
  }
  int constant(const std::string& name, Tensor t) {
    const int v = g_.add_value(name);
    g_.constants[v] = std::move(t);
    return v;
  }
  // Q/DQ on `x` named q_<x>/dq_<x>, returning the DQ output (uint8 with that zero point if `zp_type` says so).
  int qdq(int x, float s, int zp_value = 0, float dq_scale = 0, DType zp_type = DType::kInt8) {
    const std::string n = g_.values[x].name;
    const int sq = constant(n + "_s", Tensor::scalar_f32(s));
    const int sdq = dq_scale > 0 ? constant(n + "_s_dq", Tensor::scalar_f32(dq_scale)) : sq;
    int zp = zero_;
    if (zp_value || zp_type != DType::kInt8) {
      Tensor z(zp_type, {});
      z.set_f64(0, zp_value);
      zp = constant(n + "_zp", z);
    }
    const int q = op(OpType::QuantizeLinear, "q_" + n, {x, sq, zp});
    return op(OpType::DequantizeLinear, "dq_" + n, {q, sdq, zp});
  }
  // Conv 2->2 (1x1) on x with Q/DQ'd per-channel weights.
  int conv(const std::string& name, int x) {
    const int w = constant(name + ".w", Tensor::from_f32({2, 2, 1, 1}, {0.5f, -0.26f, 0.1f, 0.2f}));
    const int s = constant(name + ".ws", Tensor::from_f32({2}, {0.1f, 0.01f}));
    AttrMap axis0;
    axis0.set("axis", int64_t{0});
    const int wq = op(OpType::QuantizeLinear, name + ".wq", {w, s, zero_}, axis0);
    const int wdq = op(OpType::DequantizeLinear, name + ".wdq", {wq, s, zero_}, axis0);
    return op(OpType::Conv, name, {x, wdq});
  }
  // A node with one output, named after the node ("<name>_out").
  int op(OpType type, const std::string& name, std::vector<int> ins, AttrMap attrs = {}) {
    const int y = g_.add_value(name + "_out");
    g_.nodes.push_back(Node{name, type, 13, std::move(attrs), std::move(ins), {y}});
    return y;
  }
  Graph done(std::vector<int> outputs) {
    g_.outputs = std::move(outputs);
    g_.relink();
    EXPECT_TRUE(g_.topo_sort().is_ok());
    return g_;
  }

 private:
  Graph g_;
  int zero_ = -1;
};

Qat2Ptq convert(Graph g, bool unit_add = false) {
  Qat2PtqOptions opt;
  opt.unit_scale_for_add = unit_add;
  auto r = qat_to_ptq(std::move(g), opt);
  EXPECT_TRUE(r) << r.status().to_string();
  return r ? std::move(*r) : Qat2Ptq{};
}

float scale_of(const Qat2Ptq& r, const std::string& t) {
  const TensorScale* s = r.find(t);
  return s ? s->scale : 0.f;
}
std::string rule_of(const Qat2Ptq& r, const std::string& t) {
  const TensorScale* s = r.find(t);
  return s ? s->rule : "(none)";
}

}  // namespace

TEST(Qat2Ptq, RangeKeepingOpsCarryScalesForward) {
  Qat b;
  const int x = b.input("x");
  const int relu = b.op(OpType::Relu, "relu", {b.qdq(x, 0.1f)});
  AttrMap perm;
  perm.set("perm", std::vector<int64_t>{0, 1, 3, 2});
  const int t = b.op(OpType::Transpose, "transpose", {relu}, perm);
  const int f = b.op(OpType::Flatten, "flatten", {t});
  const Qat2Ptq r = convert(b.done({f}));
  EXPECT_EQ(r.pairs, 1);
  EXPECT_FLOAT_EQ(scale_of(r, "x"), 0.1f);
  EXPECT_EQ(rule_of(r, "x"), "Q/DQ");
  EXPECT_FLOAT_EQ(scale_of(r, "relu_out"), 0.1f);
  EXPECT_EQ(rule_of(r, "relu_out"), "Relu (forward)");
  EXPECT_FLOAT_EQ(scale_of(r, "transpose_out"), 0.1f);
  EXPECT_FLOAT_EQ(scale_of(r, "flatten_out"), 0.1f);
  EXPECT_TRUE(r.unscaled.empty());
  EXPECT_FALSE(has_qdq(r.model));
}

TEST(Qat2Ptq, RangeKeepingOpsCarryScalesBackward) {
  Qat b;
  const int x = b.input("x");
  const int relu = b.op(OpType::Relu, "relu", {x});
  AttrMap pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  const int mp = b.op(OpType::MaxPool, "pool", {relu}, pool);
  const int y = b.conv("conv", b.qdq(mp, 0.3f));
  const Qat2Ptq r = convert(b.done({y}));
  EXPECT_FLOAT_EQ(scale_of(r, "pool_out"), 0.3f);
  EXPECT_EQ(rule_of(r, "relu_out"), "MaxPool (backward)");
  EXPECT_FLOAT_EQ(scale_of(r, "relu_out"), 0.3f);
  EXPECT_EQ(rule_of(r, "x"), "Relu (backward)");
  EXPECT_FLOAT_EQ(scale_of(r, "x"), 0.3f);
  // The Conv output has no scale: reported, and it is a graph output, so no consumer joins fp16_nodes.
  EXPECT_EQ(r.unscaled, std::vector<std::string>{"conv_out"});
  EXPECT_TRUE(r.fp16_nodes.empty());
}

TEST(Qat2Ptq, OnlyNearestResizeAndZeroPadKeepRanges) {
  Qat b;
  const int x = b.qdq(b.input("x"), 0.1f);
  const int scales = b.constant("scales", Tensor::from_f32({4}, {1, 1, 2, 2}));
  const int roi = b.constant("roi", Tensor::from_f32({0}, {}));
  const int nearest = b.op(OpType::Resize, "nearest", {x, roi, scales});
  AttrMap linear_mode;
  linear_mode.set("mode", std::string("linear"));
  const int linear = b.op(OpType::Resize, "linear", {x, roi, scales}, linear_mode);
  const int pads = b.constant("pads", Tensor::from_i64({0, 0, 1, 1, 0, 0, 1, 1}));
  const int zero = b.constant("zero", Tensor::scalar_f32(0.f));
  const int five = b.constant("five", Tensor::scalar_f32(5.f));
  const int pad0 = b.op(OpType::Pad, "pad0", {x, pads, zero});
  const int pad5 = b.op(OpType::Pad, "pad5", {x, pads, five});
  const Qat2Ptq r = convert(b.done({nearest, linear, pad0, pad5}));
  EXPECT_FLOAT_EQ(scale_of(r, "nearest_out"), 0.1f);
  EXPECT_FLOAT_EQ(scale_of(r, "pad0_out"), 0.1f);
  EXPECT_EQ(scale_of(r, "linear_out"), 0.f);
  EXPECT_EQ(scale_of(r, "pad5_out"), 0.f);
  EXPECT_EQ(r.unscaled, (std::vector<std::string>{"linear_out", "pad5_out"}));
}

// The view ops and the padding modes that repeat input values, both directions: a scale given before the chain reaches
// its end, and one given after it reaches its start.
TEST(Qat2Ptq, ViewsAndRepeatingPadsCarryScalesBothWays) {
  for (const bool backward : {false, true}) {
    Qat b;
    const int x = b.input("x");
    int t = backward ? x : b.qdq(x, 0.2f);
    const int shape = b.constant("shape", Tensor::from_i64({1, 2, 16}));
    t = b.op(OpType::Reshape, "reshape", {t, shape});
    t = b.op(OpType::Unsqueeze, "unsqueeze", {t, b.constant("axes_u", Tensor::from_i64({3}))});
    t = b.op(OpType::Squeeze, "squeeze", {t, b.constant("axes_s", Tensor::from_i64({3}))});
    t = b.op(OpType::Reshape, "reshape_back", {t, b.constant("shape4", Tensor::from_i64({1, 2, 4, 4}))});
    for (const char* mode : {"edge", "reflect"}) {
      AttrMap m;
      m.set("mode", std::string(mode));
      t = b.op(OpType::Pad, std::string("pad_") + mode, {t, b.constant(std::string("pads_") + mode,
                                                                      Tensor::from_i64({0, 0, 1, 1, 0, 0, 1, 1}))},
               m);
    }
    AttrMap perm;
    perm.set("perm", std::vector<int64_t>{0, 1, 3, 2});
    t = b.op(OpType::Transpose, "transpose", {t}, perm);
    const int scales = b.constant("scales", Tensor::from_f32({4}, {1, 1, 2, 2}));
    t = b.op(OpType::Resize, "nearest", {t, b.constant("roi", Tensor::from_f32({0}, {})), scales});
    t = b.op(OpType::Flatten, "flatten", {t});
    if (backward) t = b.qdq(t, 0.2f);
    const Qat2Ptq r = convert(b.done({t}));
    for (const char* v : {"x", "reshape_out", "unsqueeze_out", "squeeze_out", "reshape_back_out", "pad_edge_out",
                          "pad_reflect_out", "transpose_out", "nearest_out", "flatten_out"}) {
      EXPECT_FLOAT_EQ(scale_of(r, v), 0.2f) << v << (backward ? " (backward)" : " (forward)");
    }
    EXPECT_EQ(rule_of(r, backward ? "x" : "flatten_out"), backward ? "Reshape (backward)" : "Flatten (forward)");
    EXPECT_TRUE(r.unscaled.empty());
  }
}

TEST(Qat2Ptq, ConcatTakesTheLargestInputScaleAndGivesItToInputsWithout) {
  Qat b;
  const int u = b.input("u"), v = b.input("v");
  const int ru = b.op(OpType::Relu, "ru", {b.qdq(u, 0.1f)});
  const int rv = b.op(OpType::Relu, "rv", {b.qdq(v, 0.4f)});
  const int c = b.conv("conv", b.qdq(u, 0.1f));  // its output has no scale of its own
  AttrMap axis1;
  axis1.set("axis", int64_t{1});
  const int cat = b.op(OpType::Concat, "cat", {ru, rv, c}, axis1);
  const Qat2Ptq r = convert(b.done({cat}));
  EXPECT_FLOAT_EQ(scale_of(r, "cat_out"), 0.4f);
  EXPECT_EQ(rule_of(r, "cat_out"), "Concat (max of inputs)");
  EXPECT_FLOAT_EQ(scale_of(r, "conv_out"), 0.4f);
  EXPECT_EQ(rule_of(r, "conv_out"), "Concat (backward)");
  EXPECT_FLOAT_EQ(scale_of(r, "ru_out"), 0.1f);  // a scale, once known, is never replaced
}

TEST(Qat2Ptq, ConcatOutputScaleFromQdqWinsOverItsInputs) {
  Qat b;
  const int u = b.input("u"), v = b.input("v");
  AttrMap axis1;
  axis1.set("axis", int64_t{1});
  const int cat = b.op(OpType::Concat, "cat", {b.qdq(u, 0.1f), v}, axis1);
  const int y = b.conv("conv", b.qdq(cat, 0.5f));
  const Qat2Ptq r = convert(b.done({y}));
  EXPECT_FLOAT_EQ(scale_of(r, "cat_out"), 0.5f);
  EXPECT_EQ(rule_of(r, "cat_out"), "Q/DQ");
  EXPECT_FLOAT_EQ(scale_of(r, "v"), 0.5f);
  EXPECT_FLOAT_EQ(scale_of(r, "u"), 0.1f);
}

TEST(Qat2Ptq, SiluSharesTheScaleOfItsInputAndOutput) {
  // Backward: the Conv output (x of x * sigmoid(x)) takes the Mul output's scale; the Sigmoid output gets 1/127.
  Qat b;
  const int c = b.conv("conv", b.qdq(b.input("x"), 0.1f));
  const int s = b.op(OpType::Sigmoid, "sig", {c});
  const int m = b.op(OpType::Mul, "mul", {s, c});  // either input order
  const int y = b.conv("conv2", b.qdq(m, 0.25f));
  const Qat2Ptq r = convert(b.done({y}));
  EXPECT_FLOAT_EQ(scale_of(r, "conv_out"), 0.25f);
  EXPECT_EQ(rule_of(r, "conv_out"), "SiLU (backward)");
  EXPECT_FLOAT_EQ(scale_of(r, "sig_out"), 1.f / 127.f);
  EXPECT_FLOAT_EQ(scale_of(r, "mul_out"), 0.25f);

  // Forward: the Mul output takes x's scale.
  Qat f;
  const int x = f.input("x");
  const int xd = f.qdq(x, 0.1f);
  const int fs = f.op(OpType::Sigmoid, "sig", {xd});
  const int fm = f.op(OpType::Mul, "mul", {xd, fs});
  const Qat2Ptq rf = convert(f.done({fm}));
  EXPECT_FLOAT_EQ(scale_of(rf, "mul_out"), 0.1f);
  EXPECT_EQ(rule_of(rf, "mul_out"), "SiLU (forward)");

  // A Sigmoid that is not part of a SiLU, and a Mul of two different tensors, get nothing.
  Qat n;
  const int a = n.qdq(n.input("a"), 0.1f);
  const int bb = n.qdq(n.input("b"), 0.2f);
  const int ns = n.op(OpType::Sigmoid, "sig", {a});
  const int nm = n.op(OpType::Mul, "mul", {ns, bb});
  const Qat2Ptq rn = convert(n.done({nm}));
  EXPECT_EQ(rn.unscaled, (std::vector<std::string>{"sig_out", "mul_out"}));
  EXPECT_EQ(rn.fp16_nodes, std::vector<std::string>{"mul"});
}

TEST(Qat2Ptq, UnscaledTensorsListTheirConsumersAsFp16Nodes) {
  Qat b;
  const int x = b.qdq(b.input("x"), 0.1f);
  const int c = b.conv("conv", x);
  const int s = b.op(OpType::Sigmoid, "sig", {c});
  const int e = b.op(OpType::Exp, "exp", {c});
  const int add = b.op(OpType::Add, "add", {s, e});
  const Qat2Ptq r = convert(b.done({add}));
  EXPECT_EQ(r.unscaled, (std::vector<std::string>{"conv_out", "sig_out", "exp_out", "add_out"}));
  EXPECT_EQ(r.fp16_nodes, (std::vector<std::string>{"sig", "exp", "add"}));
  EXPECT_EQ(format_layer_precisions(r), "conv:int8\nsig:fp16\nexp:fp16\nadd:fp16\n");
}

TEST(Qat2Ptq, ConvsWithoutWeightQdqAreFp16Nodes) {
  // conv2's input has a scale (from conv's Q/DQ on the same tensor) but its weights have no Q/DQ: the QAT model left
  // it in float, so it is fp16 in the layer list and the config, as an INT8 build of the QAT model runs it.
  Qat b;
  const int x = b.input("x");
  const int c = b.conv("conv", b.qdq(x, 0.1f));
  const int w2 = b.constant("conv2.w", Tensor::from_f32({2, 2, 1, 1}, {0.5f, -0.26f, 0.1f, 0.2f}));
  const int c2 = b.op(OpType::Conv, "conv2", {x, w2});
  const Qat2Ptq r = convert(b.done({c, c2}));
  EXPECT_FLOAT_EQ(scale_of(r, "x"), 0.1f);
  EXPECT_EQ(r.fp16_nodes, std::vector<std::string>{"conv2"});
  EXPECT_EQ(format_layer_precisions(r), "conv2:fp16\nconv:int8\n");  // graph order (topologically sorted)
}

TEST(Qat2Ptq, UnitScaleForAConvOutputThatFeedsAnAdd) {
  auto graph = [] {
    Qat b;
    const int x = b.qdq(b.input("x"), 0.1f);
    const int c = b.conv("conv", x);
    return b.done({b.op(OpType::Add, "add", {c, x})});
  };
  const Qat2Ptq off = convert(graph());
  EXPECT_EQ(scale_of(off, "conv_out"), 0.f);
  EXPECT_EQ(off.fp16_nodes, std::vector<std::string>{"add"});
  const Qat2Ptq on = convert(graph(), true);
  EXPECT_FLOAT_EQ(scale_of(on, "conv_out"), 1.f);
  EXPECT_EQ(rule_of(on, "conv_out"), "unit scale (Conv + Add)");
  EXPECT_TRUE(on.fp16_nodes.empty());
}

TEST(Qat2Ptq, WeightsBecomeTheDequantizedQatWeights) {
  Qat b;
  const Qat2Ptq r = convert(b.done({b.conv("conv", b.qdq(b.input("x"), 0.1f))}));
  const Tensor* w = r.model.constant(r.model.find_value("conv.w"));
  ASSERT_NE(w, nullptr);
  // w = [0.5, -0.26 | 0.1, 0.2], s = [0.1 | 0.01]: q = round_half_even(w / s) = [5, -3 | 10, 20].
  EXPECT_FLOAT_EQ(w->data<float>()[0], 5 * 0.1f);
  EXPECT_FLOAT_EQ(w->data<float>()[1], -3 * 0.1f);
  EXPECT_FLOAT_EQ(w->data<float>()[2], 10 * 0.01f);
  EXPECT_FLOAT_EQ(w->data<float>()[3], 20 * 0.01f);
  EXPECT_EQ(r.weight_scales.at("conv.w"), (std::vector<float>{0.1f, 0.01f}));
}

TEST(Qat2Ptq, ErrorsNameTheNode) {
  Qat a;
  auto ra = qat_to_ptq(a.done({a.conv("conv", a.qdq(a.input("x"), 0.1f, 3))}), {});
  ASSERT_FALSE(ra);
  EXPECT_NE(ra.status().to_string().find("zero point"), std::string::npos) << ra.status().to_string();
  EXPECT_NE(ra.status().to_string().find("q_x"), std::string::npos) << ra.status().to_string();
  Qat b;
  auto rb = qat_to_ptq(b.done({b.conv("conv", b.qdq(b.input("x"), 0.1f, 0, 0.2f))}), {});
  ASSERT_FALSE(rb);
  EXPECT_NE(rb.status().to_string().find("'q_x'"), std::string::npos) << rb.status().to_string();
  EXPECT_NE(rb.status().to_string().find("'dq_x'"), std::string::npos) << rb.status().to_string();
  Qat c;
  auto rc = qat_to_ptq(c.done({c.op(OpType::Relu, "relu", {c.input("x")})}), {});
  ASSERT_FALSE(rc);
  EXPECT_NE(rc.status().to_string().find("no QuantizeLinear"), std::string::npos) << rc.status().to_string();
  // Asymmetric (uint8) activations run on the CPU reference, but TensorRT's INT8 cannot take them.
  Qat d;
  auto rd = qat_to_ptq(d.done({d.conv("conv", d.qdq(d.input("x"), 0.1f, 30, 0, DType::kUInt8))}), {});
  ASSERT_FALSE(rd);
  EXPECT_NE(rd.status().to_string().find("asymmetrically"), std::string::npos) << rd.status().to_string();
  EXPECT_NE(rd.status().to_string().find("zero point 30"), std::string::npos) << rd.status().to_string();
}

TEST(Qat2Ptq, WritesModelCacheConfigAndLayerPrecisions) {
  Qat b;
  const int c = b.conv("conv", b.qdq(b.input("x"), 0.1f));
  const Qat2Ptq r = convert(b.done({b.op(OpType::Sigmoid, "sig", {c})}));
  const std::string dir = test::temp_dir("qat2ptq_write") + "/out";
  CalibCache header;
  ASSERT_TRUE(parse_cache_header("TRT-8601-EntropyCalibration2", &header).is_ok());
  ASSERT_TRUE(write_qat2ptq(r, dir, header).is_ok());

  auto cache = read_calib_cache(dir + "/model.cache");
  ASSERT_TRUE(cache) << cache.status().to_string();
  EXPECT_EQ(cache->version, "8601");
  ASSERT_EQ(cache->scales.size(), 1u);
  EXPECT_EQ(cache->scales[0].first, "x");
  EXPECT_EQ(cache->scales[0].second, 0.1f);

  auto model = import_onnx_file(dir + "/model.onnx");
  ASSERT_TRUE(model) << model.status().to_string();
  EXPECT_FALSE(has_qdq(*model));
  ASSERT_EQ(model->nodes.size(), 2u);
  EXPECT_EQ(model->nodes[0].name, "conv");

  auto config = read_precision_config(dir + "/model.json");
  ASSERT_TRUE(config) << config.status().to_string();
  EXPECT_EQ(config->int8_tensor_scales, (std::vector<std::pair<std::string, float>>{{"x", 0.1f}}));
  EXPECT_EQ(config->fp16_nodes, std::vector<std::string>{"sig"});
  EXPECT_EQ(config->weight_scales.at("conv.w"), (std::vector<float>{0.1f, 0.01f}));
  EXPECT_TRUE(check_precision_config(*config, *model, "model.json").is_ok());

  auto layers = read_file(dir + "/model.layer_precisions.txt");
  ASSERT_TRUE(layers);
  EXPECT_EQ(*layers, "conv:int8\nsig:fp16\n");
  // Nothing else is left behind (no temporary files).
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 4);
}

// The shipped QAT detector: qat2ptq's model + cache builds into the same detector as the QAT model itself (fake
// quantization keeps the test fast); with the precision config (the QAT weight scales) the outputs are identical.
TEST(Qat2Ptq, ShippedQatModelGivesTheSameDetections) {
  const std::string qat = test::source_dir() + "/models/yolov5n_fmnist_det_qat.onnx";
  auto g = import_onnx_file(qat);
  ASSERT_TRUE(g) << g.status().to_string();
  auto r = qat_to_ptq(std::move(*g), {});
  ASSERT_TRUE(r) << r.status().to_string();
  const std::string dir = test::temp_dir("qat2ptq_yolo");
  ASSERT_TRUE(write_qat2ptq(*r, dir, CalibCache{}).is_ok());
  // Every Conv input got a scale (from its Q/DQ or inferred), so nothing falls back to float.
  for (const Node& n : r->model.nodes) {
    if (n.op == OpType::Conv) {
      EXPECT_NE(r->find(r->model.values[n.inputs[0]].name), nullptr) << n.name;
    }
  }

  BuildOptions opt;
  opt.precision = Precision::kInt8;
  opt.int8_mode = "fake";
  auto direct = build_engine(qat, opt);
  ASSERT_TRUE(direct) << direct.status().to_string();
  opt.calib_cache = dir + "/model.cache";
  auto via_cache = build_engine(dir + "/model.onnx", opt);
  ASSERT_TRUE(via_cache) << via_cache.status().to_string();
  opt.calib_cache.clear();
  opt.precision_config = dir + "/model.json";
  auto via_config = build_engine(dir + "/model.onnx", opt);
  ASSERT_TRUE(via_config) << via_config.status().to_string();
  EXPECT_NE((*via_cache)->describe().find("100.0% of MACs in int8"), std::string::npos) << (*via_cache)->describe();

  auto image = read_image(test::source_dir() + "/models/samples/000001.jpg");
  ASSERT_TRUE(image) << image.status().to_string();
  std::vector<std::vector<Detection>> dets;
  std::vector<Tensor> outs;
  for (Engine* e : {direct->get(), via_cache->get(), via_config->get()}) {
    auto det = Detector::create(e, {});
    ASSERT_TRUE(det) << det.status().to_string();
    std::vector<LetterboxInfo> infos;
    auto x = det->preprocess({&*image}, &infos);
    ASSERT_TRUE(x) << x.status().to_string();
    auto out = e->run({{e->inputs()[0].name, *x}});
    ASSERT_TRUE(out) << out.status().to_string();
    outs.push_back((*out)[0]);
    auto d = det->postprocess(*out, infos);
    ASSERT_TRUE(d) << d.status().to_string();
    dets.push_back((*d)[0]);
  }
  EXPECT_EQ(test::max_abs_diff(outs[0], outs[2]), 0.0);
  // Via the cache, the weights are re-quantized per channel from max|w| (as TensorRT does): where fine-tuning left
  // max|q| below 127 the int8 weights move by up to half a step, which is int8 noise (scores move by up to ~0.06,
  // as much as another BLAS thread count moves them). Every confident detection of the QAT model is still there,
  // same class, same place.
  auto iou = [](const Detection& a, const Detection& b) {
    const float w = std::max(0.f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
    const float h = std::max(0.f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
    const float inter = w * h;
    return inter / ((a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter);
  };
  int confident = 0;
  for (const Detection& d : dets[0]) {
    if (d.score < 0.5f) continue;
    ++confident;
    bool found = false;
    for (const Detection& e : dets[1]) {
      found |= e.class_id == d.class_id && iou(d, e) > 0.8f && std::fabs(e.score - d.score) < 0.1f;
    }
    EXPECT_TRUE(found) << "class " << d.class_id << " score " << d.score << " at " << d.x1 << "," << d.y1;
  }
  EXPECT_GE(confident, 3);
}

}  // namespace qd
