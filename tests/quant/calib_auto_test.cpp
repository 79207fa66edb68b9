// --algo auto and the detection-head rule (src/quant/calibrator.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/interpret.h"
#include "passes/passes.h"
#include "quant/int8.h"
#include "quant/calibrator.h"
#include "test_util.h"

namespace qd {
namespace {

// A histogram of |x| over [0, max] for the values, and the values' exact mean squared quantization error.
struct Sample {
  std::vector<double> hist;
  double max = 0;
  std::vector<double> values;
  double exact_error(double amax) const {
    const double step = amax / 127;
    double e = 0;
    for (double v : values) {
      const double a = std::fabs(v);
      const double d = a > amax ? a - amax : a - std::min(127.0, std::nearbyint(a / step)) * step;
      e += d * d;
    }
    return e / values.size();
  }
};

Sample laplace_with_outlier(int bins, uint32_t seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> ex(4.0);
  Sample s;
  for (int i = 0; i < 200000; ++i) s.values.push_back(ex(rng));
  s.values.push_back(12.0);  // one far outlier: minmax wastes most levels on it
  for (double v : s.values) s.max = std::max(s.max, v);
  s.hist.assign(bins, 0);
  for (double v : s.values) s.hist[std::min(bins - 1, static_cast<int>(v * bins / s.max))] += 1;
  return s;
}

TEST(CalibAuto, HistogramErrorMatchesTheValues) {
  const Sample s = laplace_with_outlier(2048, 1);
  for (double amax : {0.5, 1.0, 2.0, 12.0}) {
    const double est = quant_error_from_histogram(s.hist, s.max, amax), exact = s.exact_error(amax);
    EXPECT_NEAR(est, exact, 0.05 * exact) << amax;
  }
  // The bin centre alone misjudges fine steps: at amax 0.5 the step (0.0039) is well under a bin (0.0059).
  std::vector<double> one(2048, 0);
  one[10] = 1;
  const double width = 12.0 / 2048, c = 10.5 * width, step = 0.5 / 127;
  const double centre_error = std::pow(c - std::nearbyint(c / step) * step, 2);
  EXPECT_GT(std::fabs(quant_error_from_histogram(one, 12.0, 0.5) - centre_error), 0.2 * centre_error);
}

TEST(CalibAuto, PicksTheCandidateWithTheSmallestError) {
  const Sample s = laplace_with_outlier(2048, 2);
  CalibOptions o;
  o.algo = CalibAlgo::kAuto;
  const double chosen = Calibrator::amax_from_histogram(s.hist, s.max, o);
  double best = INFINITY, worst = 0;
  for (CalibAlgo a : {CalibAlgo::kMinMax, CalibAlgo::kEntropy, CalibAlgo::kPercentile, CalibAlgo::kMse}) {
    CalibOptions c = o;
    c.algo = a;
    const double e = quant_error_from_histogram(s.hist, s.max, Calibrator::amax_from_histogram(s.hist, s.max, c));
    best = std::min(best, e);
    worst = std::max(worst, e);
  }
  EXPECT_EQ(quant_error_from_histogram(s.hist, s.max, chosen), best);
  EXPECT_LT(best, 0.5 * worst);  // the outlier makes minmax far worse: the choice matters here
  EXPECT_LT(chosen, 0.5 * s.max);
  // Measured on the values themselves, the pick is also the best of the four.
  for (CalibAlgo a : {CalibAlgo::kMinMax, CalibAlgo::kEntropy, CalibAlgo::kPercentile, CalibAlgo::kMse}) {
    CalibOptions c = o;
    c.algo = a;
    EXPECT_LE(s.exact_error(chosen), s.exact_error(Calibrator::amax_from_histogram(s.hist, s.max, c)) * 1.02);
  }
  EXPECT_EQ(parse_calib_algo("auto").value(), CalibAlgo::kAuto);
  EXPECT_FALSE(parse_calib_algo("best"));
}

// x -> Conv -> Relu -> Conv (the head's last conv) -> Sigmoid -> Mul(2) -> Concat(that, the Sigmoid) -> y (a decode
// that joins two parts), plus the Relu output as a second graph output that a Conv also reads. Without `concat`, y is
// the Mul's output (a lone activation map).
Graph head_graph(bool sigmoid, bool concat = true) {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), w1 = g.add_value("w1"), c1 = g.add_value("c1"), r1 = g.add_value("r1"),
            w2 = g.add_value("w2"), c2 = g.add_value("c2"), s2 = g.add_value("s2"), two = g.add_value("two"),
            m = g.add_value("m"), y = g.add_value("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {1, 2, 4, 4};
  g.values[x].has_shape = true;
  g.constants[w1] = test::random_f32({3, 2, 1, 1}, 1);
  g.constants[w2] = test::random_f32({2, 3, 1, 1}, 2);
  g.constants[two] = Tensor::scalar_f32(2.f);
  g.nodes.push_back(Node{"conv1", OpType::Conv, 13, {}, {x, w1}, {c1}});
  g.nodes.push_back(Node{"relu", OpType::Relu, 13, {}, {c1}, {r1}});
  g.nodes.push_back(Node{"conv2", OpType::Conv, 13, {}, {r1, w2}, {c2}});
  g.nodes.push_back(Node{"act", sigmoid ? OpType::Sigmoid : OpType::Relu, 13, {}, {c2}, {s2}});
  AttrMap axis;
  axis.set("axis", int64_t{1});
  g.nodes.push_back(Node{"decode", OpType::Mul, 13, {}, {s2, two}, {concat ? m : y}});
  if (concat) g.nodes.push_back(Node{"join", OpType::Concat, 13, axis, {m, s2}, {y}});
  g.outputs = {y, r1};
  g.relink();
  PrepareOptions p;
  p.input_shapes["x"] = {1, 2, 4, 4};
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  return g;
}

TEST(CalibAuto, DetectionHeadRuleLeavesTheDecodeInFloat) {
  const Graph g = head_graph(true);
  EXPECT_EQ(head_tensors(g), (std::vector<std::string>{"c2", "s2", "m", "y"}));  // r1: conv2's input keeps its scale
  EXPECT_TRUE(head_tensors(head_graph(false)).empty());         // no Sigmoid: not a detection head
  EXPECT_TRUE(head_tensors(head_graph(true, false)).empty());   // a lone Sigmoid map: not a decode
  const Tensor x = test::random_f32({1, 2, 4, 4}, 3);
  for (bool rule : {true, false}) {
    CalibOptions o;
    o.algo = CalibAlgo::kAuto;
    o.float_head = rule;
    Calibrator cal(g, o);
    ASSERT_TRUE(cal.observe_range({{"x", x}}).is_ok());
    ASSERT_TRUE(cal.observe_histogram({{"x", x}}).is_ok());
    const CalibCache cache = cal.result();
    EXPECT_EQ(cache.find("y") == nullptr, rule);
    EXPECT_EQ(cache.find("c2") == nullptr, rule);
    EXPECT_NE(cache.find("r1"), nullptr);
    EXPECT_NE(cache.find("x"), nullptr);
    const CalibReport rep = cal.report();
    EXPECT_EQ(rep.float_head.size(), rule ? 4u : 0u);
    EXPECT_EQ(rep.choices.size(), cache.scales.size());
    for (const CalibChoice& c : rep.choices) {
      const float* s = cache.find(c.tensor);
      ASSERT_NE(s, nullptr) << c.tensor;
      const double amax = c.amax[static_cast<int>(c.chosen)];
      EXPECT_FLOAT_EQ(*s, static_cast<float>((amax > 0 ? amax : 1.0) / 127)) << c.tensor;
    }
  }
}

// qdeploy's INT8 quantizes Conv/Gemm inputs only: the rule's tensors never were quantization points, so an INT8
// model gives the same outputs with or without their scales.
TEST(CalibAuto, DetectionHeadRuleLeavesTheInt8ModelAsItWas) {
  const Graph g = head_graph(true);
  const Tensor x = test::random_f32({1, 2, 4, 4}, 4);
  std::vector<Tensor> outs;
  for (bool rule : {true, false}) {
    CalibOptions o;
    o.algo = CalibAlgo::kMinMax;
    o.float_head = rule;
    Calibrator cal(g, o);
    ASSERT_TRUE(cal.observe_range({{"x", x}}).is_ok());
    Int8Options io;
    for (const auto& [name, s] : cal.result().scales) io.act_scales[name] = s;
    EXPECT_EQ(io.act_scales.size(), rule ? 3u : 7u);  // x, c1, r1 (+ c2, s2, m, y)
    Graph q = g;
    auto rep = lower_int8(q, io);
    ASSERT_TRUE(rep) << rep.status().to_string();
    EXPECT_EQ(rep->int8_nodes.size(), 2u);
    auto y = run_reference(q, {{"x", x}});
    ASSERT_TRUE(y) << y.status().to_string();
    outs.push_back((*y)[0]);
  }
  EXPECT_EQ(test::max_abs_diff(outs[0], outs[1]), 0.0);
}

}  // namespace
}  // namespace qd
