// Bias correction and AdaRound-style rounding (src/quant/weight_adjust.h) on small graphs: the fitted weights must
// lower the INT8 model's output error against FP32 on inputs the fit never saw, re-quantize to exactly the chosen
// integers, and write into a model by name.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/interpret.h"
#include "passes/passes.h"
#include "quant/int8.h"
#include "quant/weight_adjust.h"
#include "test_util.h"

namespace qd {
namespace {

// x [1,8,12,12] -> Conv(3x3, 8->16, pad 1, bias) -> Relu -> Conv(1x1, 16->8, no bias) -> y.
Graph two_convs() {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), w1 = g.add_value("w1"), b1 = g.add_value("b1"), c1 = g.add_value("c1"),
            r1 = g.add_value("r1"), w2 = g.add_value("w2"), y = g.add_value("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {1, 8, 12, 12};
  g.values[x].has_shape = true;
  g.constants[w1] = test::random_f32({16, 8, 3, 3}, 21, -0.3f, 0.3f);
  g.constants[b1] = test::random_f32({16}, 22, -0.1f, 0.1f);
  g.constants[w2] = test::random_f32({8, 16, 1, 1}, 23, -0.5f, 0.5f);
  AttrMap pad;
  pad.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.nodes.push_back(Node{"conv1", OpType::Conv, 13, pad, {x, w1, b1}, {c1}});
  g.nodes.push_back(Node{"relu", OpType::Relu, 13, {}, {c1}, {r1}});
  g.nodes.push_back(Node{"conv2", OpType::Conv, 13, {}, {r1, w2}, {y}});
  g.outputs = {y};
  g.relink();
  PrepareOptions p;
  p.input_shapes["x"] = {1, 8, 12, 12};
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  return g;
}

// Smooth, positive inputs with per-channel offsets (as images and post-activation maps are): neighbouring values
// correlate, and the mean is far from 0, so both the rounding and the mean shift matter.
Tensor input(uint32_t seed) {
  Tensor t = test::random_f32({1, 8, 12, 12}, seed, 0.f, 1.f);
  float* p = t.data<float>();
  for (int c = 0; c < 8; ++c) {
    for (int y = 0; y < 12; ++y) {
      for (int x = 11; x > 0; --x) p[(c * 12 + y) * 12 + x] = 0.5f * (p[(c * 12 + y) * 12 + x] + p[(c * 12 + y) * 12 + x - 1]);
    }
    for (int i = 0; i < 144; ++i) p[c * 144 + i] = p[c * 144 + i] * 0.6f + 0.1f * c;
  }
  return t;
}

std::map<std::string, float> minmax_scales(const Graph& g, const std::vector<Tensor>& data) {
  std::map<std::string, float> amax;
  for (const Tensor& x : data) {
    ReferenceRunOptions ro;
    auto note = [&](const std::string& name, const Tensor& t) {
      float& m = amax[name];
      for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.data<float>()[i]));
    };
    note("x", x);
    ro.observer = [&](const Node& n, const std::vector<const Tensor*>& outs) {
      note(g.values[n.outputs[0]].name, *outs[0]);
    };
    EXPECT_TRUE(run_reference(g, {{"x", x}}, ro));
  }
  std::map<std::string, float> s;
  for (auto& [k, v] : amax) s[k] = v / 127.f;
  return s;
}

// Mean squared difference between the INT8 (exact mode) model and FP32 over the inputs.
double int8_error(const Graph& adjusted, const Graph& fp32, const std::map<std::string, float>& scales,
                  const std::vector<Tensor>& data) {
  Graph q = adjusted;
  Int8Options o;
  o.act_scales = scales;
  EXPECT_TRUE(lower_int8(q, o));
  double sum = 0;
  int64_t n = 0;
  for (const Tensor& x : data) {
    auto a = run_reference(q, {{"x", x}});
    auto b = run_reference(fp32, {{"x", x}});
    EXPECT_TRUE(a && b);
    for (int64_t i = 0; i < (*a)[0].numel(); ++i) {
      const double d = (*a)[0].data<float>()[i] - (*b)[0].data<float>()[i];
      sum += d * d;
      ++n;
    }
  }
  return sum / n;
}

struct Fitted {
  WeightAdjustResult result;
  double held_out_error;
};

Fitted fit(bool adaround, bool bias, int samples_per_batch = 144, int batches = 6) {
  const Graph g = two_convs();
  std::vector<Tensor> calib, held_out;
  for (uint32_t i = 0; i < static_cast<uint32_t>(batches); ++i) calib.push_back(input(100 + i));
  for (uint32_t i = 0; i < 6; ++i) held_out.push_back(input(200 + i));
  const auto scales = minmax_scales(g, calib);
  WeightAdjustOptions o;
  o.adaround = adaround;
  o.bias_correction = bias;
  o.samples_per_batch = samples_per_batch;
  auto r = adjust_weights(g, scales, static_cast<int>(calib.size()),
                          [&](int k) -> Expected<std::map<std::string, Tensor>> {
                            return std::map<std::string, Tensor>{{"x", calib[k]}};
                          },
                          o);
  EXPECT_TRUE(r) << r.status().to_string();
  Graph adjusted = g;
  EXPECT_TRUE(apply_weight_adjustments(adjusted, *r).is_ok());
  return {*r, int8_error(adjusted, g, scales, held_out)};
}

TEST(WeightAdjust, EachCorrectionLowersTheHeldOutError) {
  const double nearest = fit(false, false).held_out_error;
  const Fitted bias = fit(false, true), ada = fit(true, false), both = fit(true, true);
  EXPECT_EQ(fit(false, false).result.layers.size(), 0u);  // nothing asked, nothing fitted
  // Measured: nearest 6.78e-5; bias correction 4.73e-5, adaround 4.71e-5, both 4.63e-5.
  EXPECT_LT(bias.held_out_error, 0.9 * nearest);
  EXPECT_LT(ada.held_out_error, 0.8 * nearest);
  EXPECT_LT(both.held_out_error, ada.held_out_error);
  ASSERT_EQ(both.result.layers.size(), 2u);
  for (const LayerAdjustment& l : both.result.layers) {
    EXPECT_LE(l.err_adjusted, l.err_nearest) << l.node;  // the fit never ends above round-to-nearest
    EXPECT_GT(l.flipped, 0) << l.node;
    EXPECT_GT(l.bias_shift_rms, 0) << l.node;
  }
  EXPECT_EQ(both.result.biases.count("conv2"), 1u);  // conv2 had no bias: it gets one
}

// conv1's patches have 72 values: 100 samples are too few to fit 72 roundings per channel (under 4 per weight), so
// it keeps round-to-nearest; conv2 (16 values) is fitted. The bias correction applies to both.
TEST(WeightAdjust, TooFewSamplesKeepRoundToNearest) {
  const Fitted f = fit(true, true, 100, 1);
  ASSERT_EQ(f.result.layers.size(), 2u);
  EXPECT_FALSE(f.result.layers[0].rounding_fitted);
  EXPECT_EQ(f.result.layers[0].flipped, 0);
  EXPECT_EQ(f.result.weights.count("w1"), 0u);
  EXPECT_TRUE(f.result.layers[1].rounding_fitted);
  EXPECT_EQ(f.result.weights.count("w2"), 1u);
  EXPECT_EQ(f.result.biases.size(), 2u);
}

TEST(WeightAdjust, AdjustedWeightsRequantizeToTheChosenIntegers) {
  const Fitted f = fit(true, false);
  const Graph g = two_convs();
  for (const auto& [name, w] : f.result.weights) {
    const Tensor* orig = g.constant(g.find_value(name));
    ASSERT_NE(orig, nullptr) << name;
    const WeightQuant a = quantize_weights(*orig, 0), b = quantize_weights(w, 0);
    int64_t differ = 0;
    for (size_t c = 0; c < a.scales.size(); ++c) EXPECT_FLOAT_EQ(a.scales[c], b.scales[c]) << name << " " << c;
    const int64_t per = w.numel() / static_cast<int64_t>(b.scales.size());
    for (int64_t i = 0; i < w.numel(); ++i) {
      // Re-quantizing gives back the integer the fit chose, which is the float weight's floor or ceil.
      EXPECT_EQ(w.data<float>()[i], b.q.data<int8_t>()[i] * b.scales[i / per]) << name << " " << i;
      const double r = orig->data<float>()[i] / a.scales[i / per];
      EXPECT_LE(std::fabs(b.q.data<int8_t>()[i] - r), 1.0) << name << " " << i;
      differ += a.q.data<int8_t>()[i] != b.q.data<int8_t>()[i];
    }
    EXPECT_GT(differ, 0) << name;
  }
}

TEST(WeightAdjust, WritesByNameAndRefusesAnotherModel) {
  const Fitted f = fit(true, true);
  Graph g = two_convs();
  ASSERT_TRUE(apply_weight_adjustments(g, f.result).is_ok());
  const Node& conv2 = g.nodes[2];
  ASSERT_EQ(conv2.inputs.size(), 3u);
  const Tensor* b = g.constant(conv2.inputs[2]);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->numel(), 8);
  Graph other = two_convs();
  other.constants[other.find_value("w1")] = test::random_f32({16, 8, 1, 1}, 5);  // another model's weight
  const Status s = apply_weight_adjustments(other, f.result);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("w1"), std::string::npos) << s.message();
}

// Layers the deployment keeps in float stay out of the fit: their weights and biases are left as they are.
TEST(WeightAdjust, SkippedLayersKeepTheirWeights) {
  const Graph g = two_convs();
  std::vector<Tensor> calib;
  for (uint32_t i = 0; i < 6; ++i) calib.push_back(input(100 + i));
  WeightAdjustOptions o;
  o.adaround = o.bias_correction = true;
  o.samples_per_batch = 144;
  o.skip_layers = {"conv1"};
  auto r = adjust_weights(g, minmax_scales(g, calib), 6,
                          [&](int k) -> Expected<std::map<std::string, Tensor>> {
                            return std::map<std::string, Tensor>{{"x", calib[k]}};
                          },
                          o);
  ASSERT_TRUE(r) << r.status().to_string();
  ASSERT_EQ(r->layers.size(), 1u);
  EXPECT_EQ(r->layers[0].node, "conv2");
  EXPECT_EQ(r->weights.count("w1"), 0u);
  EXPECT_EQ(r->biases.count("conv1"), 0u);
  EXPECT_EQ(r->weights.count("w2"), 1u);
  EXPECT_EQ(r->biases.count("conv2"), 1u);
}

}  // namespace
}  // namespace qd
