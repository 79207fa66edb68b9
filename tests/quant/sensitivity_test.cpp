#include "quant/sensitivity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "passes/passes.h"
#include "quant/calibrator.h"
#include "test_util.h"

namespace qd {

namespace {

// x -> Conv "b.1" -> Relu -> Conv "b.2" -> Relu -> Conv "b_2" -> y (3x3, pad 1, random weights). The names check
// that a layer name is never read as a regex ("b.2" would match "b_2").
Graph three_convs() {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {2, 4, 8, 8};
  g.values[x].has_shape = true;
  AttrMap pad;
  pad.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  int in = x;
  const char* names[] = {"b.1", "b.2", "b_2"};
  for (int i = 0; i < 3; ++i) {
    const std::string n = names[i];
    const int w = g.add_value(n + "_w"), b = g.add_value(n + "_b"), c = g.add_value(n + "_out");
    g.constants[w] = test::random_f32({i == 2 ? 4 : 8, i == 0 ? 4 : 8, 3, 3}, 100 + i, -0.3f, 0.3f);
    g.constants[b] = test::random_f32({i == 2 ? 4 : 8}, 200 + i, -0.1f, 0.1f);
    g.nodes.push_back(Node{n, OpType::Conv, 13, pad, {in, w, b}, {c}});
    if (i < 2) {
      const int r = g.add_value(n + "_relu");
      g.nodes.push_back(Node{n + "/relu", OpType::Relu, 13, {}, {c}, {r}});
      in = r;
    } else {
      in = c;
    }
  }
  g.outputs = {in};
  g.relink();
  PrepareOptions p;
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  return g;
}

// Minmax scales from the data, except that b.2's input gets an amax 40 times its real range: what a calibrator
// does with an activation whose long tail it saw once. Most of that tensor then quantizes to zero, so b.2 is the
// layer INT8 hurts most.
Int8Options scales_with_one_bad_layer(const Graph& g, const Tensor& x) {
  CalibOptions co;
  co.algo = CalibAlgo::kMinMax;
  Calibrator cal(g, co);
  EXPECT_TRUE(cal.observe_range({{"x", x}}).is_ok());
  Int8Options opt;
  opt.mode = Int8Mode::kFake;
  for (const auto& [name, s] : cal.result().scales) opt.act_scales[name] = s;
  opt.act_scales["b.1_relu"] *= 40;
  return opt;
}

}  // namespace

TEST(Sensitivity, SnrByHand) {
  EXPECT_DOUBLE_EQ(snr_db(100, 1), 20.0);
  EXPECT_TRUE(std::isinf(snr_db(1, 0)));
  SnrMetric m;
  // Two outputs: Σref² = 1+4+9+16 = 30 and 25; errors 1 (one element off by 1) and 0.
  const Tensor a = Tensor::from_f32({4}, {1, 2, 3, 4}), b = Tensor::from_f32({1}, {5});
  ASSERT_TRUE(m.set_reference(0, {a, b}).is_ok());
  m.reset();
  ASSERT_TRUE(m.add(0, {Tensor::from_f32({4}, {1, 2, 3, 5}), b}).is_ok());
  EXPECT_NEAR(*m.value(), 10 * std::log10(55.0 / 1.0), 1e-12);
  ASSERT_EQ(m.per_output().size(), 2u);
  EXPECT_NEAR(m.per_output()[0], 10 * std::log10(30.0), 1e-12);
  EXPECT_TRUE(std::isinf(m.per_output()[1]));
  m.reset();
  ASSERT_TRUE(m.add(0, {a, b}).is_ok());
  EXPECT_TRUE(std::isinf(*m.value()));                                  // identical outputs
  EXPECT_FALSE(m.add(1, {a, b}).is_ok());                               // no reference for batch 1
  EXPECT_FALSE(m.add(0, {Tensor::from_f32({2}, {1, 2}), b}).is_ok());   // shape changed
}

TEST(Sensitivity, RanksTheSensitiveLayerFirstAndFallsBackOnIt) {
  const Graph g = three_convs();
  const std::vector<Tensor> data = {test::random_f32({2, 4, 8, 8}, 1), test::random_f32({2, 4, 8, 8}, 2)};
  int calls = 0;
  auto batches = [&](int k) -> Expected<std::map<std::string, Tensor>> {
    ++calls;
    return std::map<std::string, Tensor>{{"x", data[k]}};
  };
  SnrMetric metric;
  SensitivityAnalysis::Options o;
  o.progress = false;
  SensitivityAnalysis an(g, scales_with_one_bad_layer(g, data[0]), 2, batches, &metric, o);
  ASSERT_TRUE(an.init().is_ok());
  EXPECT_TRUE(std::isinf(an.fp32()));
  ASSERT_EQ(an.layers().size(), 3u);
  EXPECT_EQ(an.layers()[1].name, "b.2");
  EXPECT_EQ(an.layers()[1].op, "Conv");
  EXPECT_EQ(an.layers()[1].macs, 2 * 8 * 8 * 8 * 8 * 9);
  EXPECT_EQ(an.all_int8_report().int8_nodes.size(), 3u);
  ASSERT_TRUE(an.sweep_float().is_ok());
  ASSERT_TRUE(an.sweep_int8().is_ok());
  EXPECT_EQ(calls, 2);  // each batch made once, then cached

  const auto& l = an.layers();
  for (const auto& x : l) {
    EXPECT_TRUE(std::isfinite(x.metric_float)) << x.name;
    EXPECT_TRUE(std::isfinite(x.metric_int8)) << x.name;
  }
  // b.2 in float lifts the SNR far more than the others do; b.2 alone in INT8 is the worst single layer.
  EXPECT_GT(l[1].metric_float, l[0].metric_float + 6);
  EXPECT_GT(l[1].metric_float, l[2].metric_float + 6);
  EXPECT_LT(l[1].metric_int8, l[0].metric_int8);
  EXPECT_LT(l[1].metric_int8, l[2].metric_int8);
  EXPECT_GT(an.all_int8(), 0.0);
  EXPECT_LT(an.all_int8(), l[1].metric_float);
  EXPECT_EQ(an.ranking()[0], 1u);

  // A target between all-INT8 and "b.2 in float": exactly b.2 goes to float.
  const double target = (an.all_int8() + l[1].metric_float) / 2;
  auto fb = an.auto_fallback(target);
  ASSERT_TRUE(fb) << fb.status().to_string();
  EXPECT_EQ(fb->float_layers, std::vector<std::string>{"b.2"});
  EXPECT_TRUE(fb->reached);
  EXPECT_DOUBLE_EQ(fb->metric, l[1].metric_float);
  EXPECT_EQ(fb->report.float_nodes, std::vector<std::string>{"b.2"});  // not b_2: names are not regexes
  EXPECT_EQ(fb->report.int8_macs, fb->report.total_macs - l[1].macs);

  // A target already met needs no fallback; an unreachable one ends with every layer in float.
  EXPECT_TRUE(an.auto_fallback(an.all_int8() - 1)->float_layers.empty());
  auto all = an.auto_fallback(INFINITY);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->float_layers.size(), 3u);
  EXPECT_EQ(all->float_layers[0], "b.2");
  EXPECT_TRUE(std::isinf(all->metric));  // everything float is FP32
}

TEST(Sensitivity, OnlySomeLayers) {
  const Graph g = three_convs();
  const Tensor x = test::random_f32({2, 4, 8, 8}, 4);
  auto batches = [&](int) -> Expected<std::map<std::string, Tensor>> {
    return std::map<std::string, Tensor>{{"x", x}};
  };
  SnrMetric all_metric, one_metric;
  SensitivityAnalysis::Options o;
  o.progress = false;
  SensitivityAnalysis all(g, scales_with_one_bad_layer(g, x), 1, batches, &all_metric, o);
  o.only_layers = {"b_2"};
  SensitivityAnalysis one(g, scales_with_one_bad_layer(g, x), 1, batches, &one_metric, o);
  ASSERT_TRUE(all.init().is_ok());
  ASSERT_TRUE(one.init().is_ok());
  ASSERT_EQ(one.layers().size(), 1u);
  EXPECT_EQ(one.layers()[0].name, "b_2");
  for (auto* an : {&all, &one}) {
    ASSERT_TRUE(an->sweep_float().is_ok());
    ASSERT_TRUE(an->sweep_int8().is_ok());
  }
  // The layers left out of the sweep stay INT8 in the float sweep and float in the INT8 sweep: same numbers.
  EXPECT_EQ(one.layers()[0].metric_float, all.layers()[2].metric_float);
  EXPECT_EQ(one.layers()[0].metric_int8, all.layers()[2].metric_int8);
  o.only_layers = {"nothing"};
  SensitivityAnalysis none(g, scales_with_one_bad_layer(g, x), 1, batches, &one_metric, o);
  EXPECT_FALSE(none.init().is_ok());
}

TEST(Sensitivity, ExactModeAgreesWithFake) {
  const Graph g = three_convs();
  const Tensor x = test::random_f32({2, 4, 8, 8}, 3);
  auto batches = [&](int) -> Expected<std::map<std::string, Tensor>> {
    return std::map<std::string, Tensor>{{"x", x}};
  };
  SensitivityAnalysis::Options o;
  o.progress = false;
  Int8Options opt = scales_with_one_bad_layer(g, x);
  SnrMetric fake_metric, exact_metric;
  SensitivityAnalysis fake(g, opt, 1, batches, &fake_metric, o);
  opt.mode = Int8Mode::kExact;
  SensitivityAnalysis exact(g, opt, 1, batches, &exact_metric, o);
  ASSERT_TRUE(fake.init().is_ok());
  ASSERT_TRUE(exact.init().is_ok());
  EXPECT_NEAR(fake.all_int8(), exact.all_int8(), 0.5);  // float summation order only
}

TEST(Sensitivity, NoScalesIsAnError) {
  const Graph g = three_convs();
  const Tensor x = test::random_f32({2, 4, 8, 8}, 3);
  SnrMetric metric;
  SensitivityAnalysis::Options o;
  o.progress = false;
  SensitivityAnalysis an(g, Int8Options{}, 1,
                         [&](int) -> Expected<std::map<std::string, Tensor>> {
                           return std::map<std::string, Tensor>{{"x", x}};
                         },
                         &metric, o);
  const Status s = an.init();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("no layer runs in INT8"), std::string::npos) << s.to_string();
}

}  // namespace qd
