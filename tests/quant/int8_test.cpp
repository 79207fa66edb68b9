#include <gtest/gtest.h>

#include <cmath>

#include "ops/interpret.h"
#include "ops/quantize.h"
#include "passes/passes.h"
#include "quant/calibrator.h"
#include "quant/int8.h"
#include "test_util.h"

namespace qd {

namespace {

// x -> Conv(3x3, 8->16, pad 1) -> Relu -> Conv(1x1, 16->4) -> y, random weights.
Graph conv_graph() {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), w1 = g.add_value("w1"), b1 = g.add_value("b1"), c1 = g.add_value("c1"),
            r1 = g.add_value("r1"), w2 = g.add_value("w2"), y = g.add_value("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {2, 8, 12, 12};
  g.values[x].has_shape = true;
  g.constants[w1] = test::random_f32({16, 8, 3, 3}, 11, -0.3f, 0.3f);
  g.constants[b1] = test::random_f32({16}, 12, -0.1f, 0.1f);
  g.constants[w2] = test::random_f32({4, 16, 1, 1}, 13, -0.5f, 0.5f);
  AttrMap pad;
  pad.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.nodes.push_back(Node{"conv1", OpType::Conv, 13, pad, {x, w1, b1}, {c1}});
  g.nodes.push_back(Node{"relu", OpType::Relu, 13, {}, {c1}, {r1}});
  g.nodes.push_back(Node{"conv2", OpType::Conv, 13, {}, {r1, w2}, {y}});
  g.outputs = {y};
  g.relink();
  return g;
}

Tensor run(Graph g, const Int8Options* opt, const Tensor& x, Int8Report* rep = nullptr) {
  PrepareOptions p;
  p.input_shapes["x"] = x.shape();
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  if (opt) {
    auto r = lower_int8(g, *opt);
    EXPECT_TRUE(r) << r.status().to_string();
    if (rep && r) *rep = *r;
  }
  auto out = run_reference(g, {{"x", x}});
  EXPECT_TRUE(out) << out.status().to_string();
  return (*out)[0];
}

// Both outputs quantized with the output's scale agree within one step everywhere, and differ on under 1%.
void expect_within_1lsb(const Tensor& exact, const Tensor& fake, float s_out) {
  int64_t off_by_one = 0;
  for (int64_t i = 0; i < exact.numel(); ++i) {
    const int qa = ops::quantize_value(exact.data<float>()[i], s_out, 0, -128, 127);
    const int qb = ops::quantize_value(fake.data<float>()[i], s_out, 0, -128, 127);
    ASSERT_LE(std::abs(qa - qb), 1) << i;
    off_by_one += qa != qb;
  }
  EXPECT_LT(off_by_one, exact.numel() / 100);
}

// The minmax scales of every tensor of `g` on input x (one batch): what the tests below quantize with.
CalibCache minmax_scales(Graph g, const Tensor& x) {
  PrepareOptions p;
  p.input_shapes["x"] = x.shape();
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  CalibOptions co;
  co.algo = CalibAlgo::kMinMax;
  Calibrator cal(g, co);
  EXPECT_TRUE(cal.observe_range({{"x", x}}).is_ok());
  return cal.result();
}

Int8Options with_scales(const CalibCache& c) {
  Int8Options opt;
  for (const auto& [name, s] : c.scales) opt.act_scales[name] = s;
  return opt;
}

}  // namespace

TEST(Int8, WeightQuantizationPerChannel) {
  Tensor w = Tensor::from_f32({2, 3}, {0.5f, -1.0f, 0.25f, 2.0f, 0.0f, -0.01f});
  WeightQuant q = quantize_weights(w, 0);
  ASSERT_EQ(q.scales.size(), 2u);
  EXPECT_FLOAT_EQ(q.scales[0], 1.0f / 127);
  EXPECT_FLOAT_EQ(q.scales[1], 2.0f / 127);
  EXPECT_EQ(q.q.data<int8_t>()[1], -127);
  EXPECT_EQ(q.q.data<int8_t>()[3], 127);
  EXPECT_EQ(q.q.data<int8_t>()[0], 64);  // 63.5 -> 64 (half to even)
  Tensor z(DType::kFloat32, {1, 4});
  EXPECT_FLOAT_EQ(quantize_weights(z, 0).scales[0], 1.0f);  // all-zero channel: any positive scale
}

TEST(Int8, ExactAndFakeQuantAgreeWithin1Lsb) {
  const Tensor x = test::random_f32({2, 8, 12, 12}, 7, -1.f, 1.f);
  const CalibCache scales = minmax_scales(conv_graph(), x);
  Int8Options opt = with_scales(scales);
  Int8Report rep;
  const Tensor exact = run(conv_graph(), &opt, x, &rep);
  opt.mode = Int8Mode::kFake;
  const Tensor fake = run(conv_graph(), &opt, x);
  const Tensor fp32 = run(conv_graph(), nullptr, x);
  EXPECT_EQ(rep.int8_nodes.size(), 2u);
  EXPECT_EQ(rep.int8_macs, rep.total_macs);
  const float s_out = *scales.find("y");
  expect_within_1lsb(exact, fake, s_out);
  // And INT8 stays close to FP32 (a few quantization steps).
  EXPECT_LT(test::max_abs_diff(exact, fp32), 8 * s_out);
  EXPECT_GT(test::max_abs_diff(exact, fp32), 0.0);  // it really quantized
}

// Linear layers as exporters write them for channels-last inputs: x [2, 5, 5, 16] -> MatMul(w1 [16, 32]) + b1 ->
// Relu -> MatMul(w2 [32, 8]) -> y, and beside it z = MatMul(x, Transpose(x)) (two activations: no INT8 form).
Graph linear_graph() {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), m1 = g.add_value("m1"), a1 = g.add_value("a1"), r1 = g.add_value("r1"),
            y = g.add_value("y"), xt = g.add_value("xt"), z = g.add_value("z");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {2, 5, 5, 16};
  g.values[x].has_shape = true;
  const int w1 = g.add_constant("w1", test::random_f32({16, 32}, 21, -0.3f, 0.3f));
  const int b1 = g.add_constant("b1", test::random_f32({32}, 22, -0.1f, 0.1f));
  const int w2 = g.add_constant("w2", test::random_f32({32, 8}, 23, -0.3f, 0.3f));
  AttrMap perm;
  perm.set("perm", std::vector<int64_t>{0, 1, 3, 2});
  g.nodes.push_back(Node{"matmul1", OpType::MatMul, 13, {}, {x, w1}, {m1}});
  g.nodes.push_back(Node{"bias1", OpType::Add, 13, {}, {m1, b1}, {a1}});
  g.nodes.push_back(Node{"relu", OpType::Relu, 13, {}, {a1}, {r1}});
  g.nodes.push_back(Node{"matmul2", OpType::MatMul, 13, {}, {r1, w2}, {y}});
  g.nodes.push_back(Node{"transpose", OpType::Transpose, 13, perm, {x}, {xt}});
  g.nodes.push_back(Node{"matmul_xx", OpType::MatMul, 13, {}, {x, xt}, {z}});
  g.outputs = {y, z};
  g.relink();
  return g;
}

TEST(Int8, LinearLayersWrittenAsMatMulRunInInt8) {
  const Tensor x = test::random_f32({2, 5, 5, 16}, 24, -1.f, 1.f);
  const CalibCache scales = minmax_scales(linear_graph(), x);
  Int8Options opt = with_scales(scales);
  Int8Report rep;
  const Tensor exact = run(linear_graph(), &opt, x, &rep);
  opt.mode = Int8Mode::kFake;
  const Tensor fake = run(linear_graph(), &opt, x);
  const Tensor fp32 = run(linear_graph(), nullptr, x);
  EXPECT_EQ(rep.int8_nodes, (std::vector<std::string>{"matmul1", "matmul2"}));
  ASSERT_EQ(rep.layers.size(), 3u);
  EXPECT_EQ(rep.layers[2].node, "matmul_xx");
  EXPECT_EQ(rep.layers[2].precision.reason, PrecisionReason::kNotQuantizable);
  EXPECT_LT(rep.int8_macs, rep.total_macs);
  const float s_out = *scales.find("y");
  expect_within_1lsb(exact, fake, s_out);
  EXPECT_LT(test::max_abs_diff(exact, fp32), 8 * s_out);
  EXPECT_GT(test::max_abs_diff(exact, fp32), 0.0);
  Graph prepared = linear_graph();
  PrepareOptions p;
  p.input_shapes["x"] = x.shape();
  ASSERT_TRUE(prepare_graph(prepared, p).is_ok());
  Graph g = prepared;
  opt.mode = Int8Mode::kExact;
  ASSERT_TRUE(lower_int8(g, opt));
  int integer_products = 0;
  for (const Node& n : g.nodes) integer_products += n.op == OpType::MatMulInteger;
  EXPECT_EQ(integer_products, 2);
  // Weight scales are per output column (axis 1 of [C, K]): w2 has 8.
  opt.weight_scales = {{"w1", std::vector<float>(32, 0.01f)}, {"w2", std::vector<float>(32, 0.01f)}};
  auto bad = compute_precision(prepared, opt);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("weight 'w2' has 8 channels but 32 scales"), std::string::npos)
      << bad.status().message();
}

// Asymmetric (uint8) activations, as a QAT model's uint8 Q/DQ pairs give them: x spans [-0.28, 2] like a SiLU output,
// conv1 pads it by 1. Exact mode pads with the zero point (ConvInteger subtracts it, so the pad contributes 0), fake
// mode with 0 in float: the two agree within 1 LSB at the borders too, and the finer uint8 step beats symmetric int8.
TEST(Int8, AsymmetricActivationsExactAndFakeAgree) {
  const Tensor x = test::random_f32({2, 8, 12, 12}, 21, -0.28f, 2.f);
  Int8Options opt;
  opt.act_scales = {{"x", 2.28f / 255}, {"r1", 0.02f}};
  opt.act_zero_points = {{"x", 31}, {"r1", 0}};  // round(0.28 / s) = 31; r1 (after a Relu) is unsigned
  const Tensor exact = run(conv_graph(), &opt, x);
  opt.mode = Int8Mode::kFake;
  const Tensor fake = run(conv_graph(), &opt, x);
  const Tensor fp32 = run(conv_graph(), nullptr, x);
  const float s_out = 0.01f;
  expect_within_1lsb(exact, fake, s_out);
  Int8Options sym;
  sym.act_scales = {{"x", 2.f / 127}, {"r1", 0.02f}};
  const Tensor symmetric = run(conv_graph(), &sym, x);
  auto mean_abs_err = [&](const Tensor& t) {
    double e = 0;
    for (int64_t i = 0; i < t.numel(); ++i) e += std::fabs(t.data<float>()[i] - fp32.data<float>()[i]);
    return e / t.numel();
  };
  EXPECT_LT(mean_abs_err(exact), 0.8 * mean_abs_err(symmetric));
  // Padding with 0 instead of the zero point would shift every border output by 31 steps of x times the taps.
  EXPECT_LT(test::max_abs_diff(exact, fp32), 8 * s_out);
}

TEST(Int8, MissingScalesAndFloatLayersStayFloat) {
  const Tensor x = test::random_f32({2, 8, 12, 12}, 9);
  Int8Options opt;
  opt.act_scales["x"] = 1.f / 127;  // r1 (conv2's input) has no scale
  Int8Report rep;
  run(conv_graph(), &opt, x, &rep);
  EXPECT_EQ(rep.int8_nodes, std::vector<std::string>{"conv1"});
  EXPECT_EQ(rep.no_scale_nodes, std::vector<std::string>{"conv2"});
  opt.act_scales["r1"] = 0.05f;
  opt.float_nodes = {"conv[1]"};  // a regex
  run(conv_graph(), &opt, x, &rep);
  EXPECT_EQ(rep.int8_nodes, std::vector<std::string>{"conv2"});
  EXPECT_EQ(rep.float_nodes, std::vector<std::string>{"conv1"});
  // Explicit weight scales (a QAT model's): conv2's weights have none, so it stays float although r1 has a scale,
  // as TensorRT runs a layer without a weight Q/DQ; without any weight scales both are INT8 (max|w|).
  opt.float_nodes.clear();
  opt.weight_scales["w1"] = std::vector<float>(16, 0.3f / 127);
  run(conv_graph(), &opt, x, &rep);
  EXPECT_EQ(rep.int8_nodes, std::vector<std::string>{"conv1"});
  EXPECT_EQ(rep.no_scale_nodes, std::vector<std::string>{"conv2"});
  ASSERT_EQ(rep.layers.size(), 2u);
  EXPECT_EQ(rep.layers[1].precision.reason, PrecisionReason::kNoWeightScale);
  EXPECT_EQ(precision_words(rep.layers[1].precision), "float (no weight scale)");
  opt.weight_scales.clear();
  run(conv_graph(), &opt, x, &rep);
  EXPECT_EQ(rep.int8_nodes, (std::vector<std::string>{"conv1", "conv2"}));
  opt.act_scales["x"] = -1.f;
  opt.float_nodes.clear();
  Graph g = conv_graph();
  PrepareOptions p;
  p.input_shapes["x"] = x.shape();
  ASSERT_TRUE(prepare_graph(g, p).is_ok());
  EXPECT_FALSE(lower_int8(g, opt));
}

TEST(Calibrator, HistogramAlgorithms) {
  // |x| decays exponentially (like activations), plus a few outliers at the far end (max = 10): every histogram
  // method clips the outliers; minmax keeps them.
  std::vector<double> hist(2048, 0.0);
  for (int b = 0; b < 2048; ++b) hist[b] = std::floor(1e6 * std::exp(-b / 40.0));
  hist[2047] = 3;
  CalibOptions o;
  o.algo = CalibAlgo::kMinMax;
  EXPECT_DOUBLE_EQ(Calibrator::amax_from_histogram(hist, 10.0, o), 10.0);
  o.algo = CalibAlgo::kPercentile;
  o.percentile = 99.9;  // 40 * ln(1000) = 276 bins of 10/2048
  EXPECT_NEAR(Calibrator::amax_from_histogram(hist, 10.0, o), 276 * 10.0 / 2048, 0.02);
  for (CalibAlgo a : {CalibAlgo::kMse, CalibAlgo::kEntropy}) {
    o.algo = a;
    const double t = Calibrator::amax_from_histogram(hist, 10.0, o);
    EXPECT_GT(t, 0.3) << static_cast<int>(a);
    EXPECT_LT(t, 5.0) << static_cast<int>(a);
  }
}

}  // namespace qd
