// Reference values for the calibrators (src/quant/calibrator.h). Each expected threshold is derived by hand (the
// comment says how) or by a brute-force reference written here from the rules in calibrator.h, independently of
// calibrator.cpp. Where a reference is used, the test also shows that the reference with one rule broken (a bin
// boundary, the clipped mass, empty bins, bin 0, bin centres) gives another threshold on that histogram, so the
// implementation breaking that rule would fail the test. (int8_test.cpp's Calibrator.HistogramAlgorithms checks
// looser properties on a decaying histogram.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "passes/passes.h"
#include "quant/calibrator.h"

namespace qd {
namespace {

double amax(const std::vector<double>& hist, double max, CalibAlgo algo, double percentile = 99.99) {
  CalibOptions o;
  o.algo = algo;
  o.percentile = percentile;
  return Calibrator::amax_from_histogram(hist, max, o);
}

// ---------------------------------------------------------------- entropy: a brute-force reference

// What the reference can get wrong on purpose (to show that a test histogram tells the rule apart).
struct EntropyRules {
  bool bin0_takes_bin1 = true;       // bin 0 gets bin 1's count before the search
  bool clipped_mass_in_q = false;    // wrong: Q's last level also holds the mass beyond the threshold
  bool empty_bins_share = false;     // wrong: a level's mass is spread over all its bins, empty ones too
  bool floor_merge = false;          // other boundaries: i / 128 bins per level, the remainder in the last level
};

// calibrator.h's rule, one candidate threshold i (in bins) at a time: P = hist[0, i) with the mass of hist[i, bins)
// added to P[i-1]; bin j of [0, i) belongs to level l = the largest l in 0..127 with floor(l * i / 128) <= j; Q gives
// each level the sum of hist over its bins (not P's: the clipped mass is not in Q), spread evenly over the level's
// bins where P > 0. KL(P || Q) of the normalized P and Q (a Q of 0 where P > 0 counts as 1e-12); the smallest KL
// wins, the smallest i on ties. amax = i * max / bins.
double entropy_reference(std::vector<double> hist, double max, EntropyRules rules = {}) {
  const int bins = static_cast<int>(hist.size()), levels = 128;
  if (rules.bin0_takes_bin1) hist[0] = hist[1];
  double best = std::numeric_limits<double>::infinity();
  int best_i = bins;
  for (int i = levels; i <= bins; ++i) {
    std::vector<double> p(hist.begin(), hist.begin() + i);
    double clipped = 0;
    for (int j = i; j < bins; ++j) clipped += hist[j];
    p[i - 1] += clipped;
    std::vector<int> level(i);
    for (int j = 0; j < i; ++j) {
      if (rules.floor_merge) {
        level[j] = std::min(levels - 1, j / (i / levels));
      } else {
        int l = 0;
        while (l + 1 < levels && (l + 1) * i / levels <= j) ++l;
        level[j] = l;
      }
    }
    std::vector<double> mass(levels, 0.0), members(levels, 0.0);
    for (int j = 0; j < i; ++j) {
      mass[level[j]] += rules.clipped_mass_in_q ? p[j] : hist[j];
      if (p[j] > 0 || rules.empty_bins_share) members[level[j]] += 1;
    }
    std::vector<double> q(i, 0.0);
    for (int j = 0; j < i; ++j) {
      if ((p[j] > 0 || rules.empty_bins_share) && members[level[j]] > 0) q[j] = mass[level[j]] / members[level[j]];
    }
    double ps = 0, qs = 0;
    for (int j = 0; j < i; ++j) ps += p[j], qs += q[j];
    if (ps <= 0 || qs <= 0) continue;
    double kl = 0;
    for (int j = 0; j < i; ++j) {
      if (p[j] <= 0) continue;
      const double pn = p[j] / ps, qn = q[j] > 0 ? q[j] / qs : 1e-12;
      kl += pn * std::log(pn / qn);
    }
    if (kl < best) best = kl, best_i = i;
  }
  return best_i * (max / bins);
}

TEST(CalibratorReference, EntropyUniformHistogramKeepsEverything) {
  // By hand: 256 equal bins. At i = 256 every level merges two equal bins, so Q = P and KL = 0. At any i < 256 the
  // clipped mass sits in P's last bin and not in Q, so KL > 0. The threshold is the whole range: amax = max.
  const std::vector<double> hist(256, 10.0);
  EXPECT_DOUBLE_EQ(amax(hist, 8.0, CalibAlgo::kEntropy), 8.0);
  EXPECT_DOUBLE_EQ(entropy_reference(hist, 8.0), 8.0);
  // With the clipped mass counted in Q, i = 128 (one bin per level, Q = P) would already give KL = 0: amax = max / 2.
  EXPECT_DOUBLE_EQ(entropy_reference(hist, 8.0, {true, true}), 4.0);
}

TEST(CalibratorReference, EntropyExactly128NonEmptyBins) {
  // By hand: bins 0..127 hold different counts, bins 128..255 nothing. At i = 128 each level is one bin and nothing
  // is clipped, so Q = P and KL = 0, the least possible; thresholds above 128 that reach KL = 0 too (i = 129 merges
  // bins 127 and 128, one of them empty) lose the tie to the smallest. amax = 128 bins of max / 256.
  std::vector<double> hist(256, 0.0);
  for (int j = 0; j < 128; ++j) hist[j] = 1 + (j * 37) % 101;
  EXPECT_DOUBLE_EQ(amax(hist, 2.0, CalibAlgo::kEntropy), 1.0);
  EXPECT_DOUBLE_EQ(entropy_reference(hist, 2.0), 1.0);
  // If the empty bins took a share of their level, i = 129 would put half of bin 127's count into bin 128 of Q and
  // every i > 128 would pay for it; i = 128 still wins. So this case pins the tie rule and the bin width, and the
  // next test the empty bins.
}

TEST(CalibratorReference, EntropyEmptyBinsCarryNoMass) {
  // By hand: 256 bins, odd bins hold 10, even ones nothing, and bin 0 takes bin 1's 10. At i = 256 every level is
  // {2l, 2l+1}: level 0 = two bins of 10, the others one empty bin and one of 10; with empty bins left empty, Q = P
  // and KL = 0; every i < 256 clips some mass into P's last bin only (KL > 0). So amax = max.
  std::vector<double> hist(256, 0.0);
  for (int j = 1; j < 256; j += 2) hist[j] = 10;
  EXPECT_DOUBLE_EQ(amax(hist, 4.0, CalibAlgo::kEntropy), 4.0);
  EXPECT_DOUBLE_EQ(entropy_reference(hist, 4.0), 4.0);
  EntropyRules share;
  share.empty_bins_share = true;  // each level's 10 halved over both bins: KL = log 2 at i = 256, and less elsewhere
  EXPECT_NE(entropy_reference(hist, 4.0, share), 4.0);
}

TEST(CalibratorReference, EntropyZeroSpikeTakesBin1Count) {
  // A post-ReLU tensor: half of all values exactly 0, the rest decaying over the range. Bin 0 counts as bin 1 does.
  std::vector<double> hist(512, 0.0);
  for (int j = 1; j < 512; ++j) hist[j] = std::floor(2000 * std::exp(-j / 60.0));
  double rest = 0;
  for (double h : hist) rest += h;
  hist[0] = rest;
  const double want = entropy_reference(hist, 6.0);
  EXPECT_DOUBLE_EQ(amax(hist, 6.0, CalibAlgo::kEntropy), want);
  EntropyRules spike;
  spike.bin0_takes_bin1 = false;
  EXPECT_NE(entropy_reference(hist, 6.0, spike), want);  // the spike would decide the threshold
  // Only bin 0's count is replaced: any other value there gives the same threshold.
  hist[0] = 1;
  EXPECT_DOUBLE_EQ(amax(hist, 6.0, CalibAlgo::kEntropy), want);
}

// Histograms of several shapes (decays, gaps of empty bins, outliers, random counts) against the reference, and the
// bin boundaries: on these, TensorRT-slides-style boundaries (i / 128 bins per level, the remainder in the last level)
// give other thresholds on at least one.
TEST(CalibratorReference, EntropyMatchesBruteForce) {
  std::mt19937 rng(2024);
  std::vector<std::pair<std::vector<double>, double>> cases;
  {
    std::vector<double> h(300, 0.0);  // exponential decay with a few outliers at the end
    for (int j = 0; j < 300; ++j) h[j] = std::floor(1e5 * std::exp(-j / 25.0));
    h[299] = 3;
    h[290] = 1;
    cases.push_back({h, 3.0});
  }
  {
    std::vector<double> h(400, 0.0);  // two bumps with a gap of empty bins between them
    for (int j = 10; j < 120; ++j) h[j] = 50 + (j % 7) * 10;
    for (int j = 250; j < 270; ++j) h[j] = 30;
    cases.push_back({h, 5.0});
  }
  for (int k = 0; k < 3; ++k) {  // random counts, about a third of the bins empty
    std::vector<double> h(200 + 97 * k, 0.0);
    std::uniform_int_distribution<int> count(0, 60);
    for (double& v : h) {
      const int c = count(rng);
      v = c < 20 ? 0 : c;
    }
    cases.push_back({h, 1.0 + k});
  }
  {
    std::vector<double> h(2048, 0.0);  // the real size: a half-normal shape, sparse far tail
    for (int j = 0; j < 2048; ++j) h[j] = std::floor(1e6 * std::exp(-0.5 * (j / 300.0) * (j / 300.0)));
    for (int j = 1600; j < 2048; j += 37) h[j] = 1;
    cases.push_back({h, 10.0});
  }
  int boundary_sensitive = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& [hist, max] = cases[c];
    const double want = entropy_reference(hist, max);
    EXPECT_DOUBLE_EQ(amax(hist, max, CalibAlgo::kEntropy), want) << "case " << c;
    // A threshold is a bin edge in [128, bins] bins.
    const double bins_at = want / (max / hist.size());
    EXPECT_NEAR(bins_at, std::round(bins_at), 1e-9) << "case " << c;
    EXPECT_GE(std::round(bins_at), 128) << "case " << c;
    EntropyRules other;
    other.floor_merge = true;
    boundary_sensitive += entropy_reference(hist, max, other) != want;
  }
  EXPECT_GE(boundary_sensitive, 1);
}

// ---------------------------------------------------------------- mse: a brute-force reference

// calibrator.h's rule: candidates every 16th bin edge from bins / 16 (i = bins/16, bins/16 + 16, ... <= bins); each
// bin's count sits at its centre; error = sum of count * (centre - dequantize(quantize(centre)))^2 with scale t / 127,
// quantize = clamp(round_half_even(x / s), -127, 127); the smallest error wins (the smallest t on ties).
double mse_reference(const std::vector<double>& hist, double max, bool at_lower_edge = false) {
  const int bins = static_cast<int>(hist.size());
  const double w = max / bins;
  double best = std::numeric_limits<double>::infinity(), best_t = max;
  for (int i = bins / 16; i <= bins; i += 16) {
    const double t = i * w, s = t / 127;
    double err = 0;
    for (int b = 0; b < bins; ++b) {
      const double x = (b + (at_lower_edge ? 0.0 : 0.5)) * w;
      const double q = std::min(127.0, std::max(-127.0, std::nearbyint(x / s)));
      err += hist[b] * (x - q * s) * (x - q * s);
    }
    if (err < best) best = err, best_t = t;
  }
  return best_t;
}

TEST(CalibratorReference, MseSpikeAtTheTopKeepsTheRange) {
  // By hand: all values in the last of 2048 bins (centre max - w/2). Every candidate t < max clips them, error
  // (centre - t)^2 >= (15.5 w)^2; t = max (a candidate: 128 + 16 * 120 = 2048) rounds the centre to 127 steps, error
  // (w/2)^2. amax = max.
  std::vector<double> hist(2048, 0.0);
  hist[2047] = 100;
  EXPECT_DOUBLE_EQ(amax(hist, 2048.0, CalibAlgo::kMse), 2048.0);
}

TEST(CalibratorReference, MseMatchesBruteForce) {
  std::vector<std::pair<std::vector<double>, double>> cases;
  {
    std::vector<double> h(2048, 0.0);  // activations: a decay and a sparse tail
    for (int j = 0; j < 2048; ++j) h[j] = std::floor(1e6 * std::exp(-j / 90.0));
    for (int j = 1500; j < 2048; j += 50) h[j] = 2;
    cases.push_back({h, 12.0});
  }
  {
    std::vector<double> h(2048, 0.0);  // a bulk near zero and a heavy outlier cluster
    for (int j = 0; j < 200; ++j) h[j] = 1000;
    for (int j = 1900; j < 1910; ++j) h[j] = 400;
    cases.push_back({h, 3.0});
  }
  {
    std::vector<double> h(2048, 0.0);  // one spike: the best t puts its value near a quantization level
    h[500] = 5;
    cases.push_back({h, 2048.0});
  }
  {
    std::vector<double> h(1024, 0.0);  // uniform: the range itself
    for (double& v : h) v = 7;
    cases.push_back({h, 1.0});
  }
  int edge_sensitive = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& [hist, max] = cases[c];
    const double want = mse_reference(hist, max);
    EXPECT_DOUBLE_EQ(amax(hist, max, CalibAlgo::kMse), want) << "case " << c;
    edge_sensitive += mse_reference(hist, max, true) != want;
  }
  EXPECT_GE(edge_sensitive, 1);  // values at bin centres, not at lower edges, matter on these histograms
  // The candidates: t is one of the bin edges bins/16 + 16k.
  const auto& [h0, m0] = cases[0];
  const double k = (amax(h0, m0, CalibAlgo::kMse) / (m0 / 2048) - 128) / 16;
  EXPECT_NEAR(k, std::round(k), 1e-9);
}

// ---------------------------------------------------------------- percentile: by hand

TEST(CalibratorReference, PercentileIsTheUpperEdgeOfTheBinReachingIt) {
  // 6 bins of width 0.5 over [0, 3]: counts 4, 0, 0, 3, 0, 3 (10 values), cumulative 4, 4, 4, 7, 7, 10. The amax is
  // the upper edge of the first bin whose cumulative count reaches total * p / 100, never between edges, and empty
  // bins are skipped.
  const std::vector<double> hist = {4, 0, 0, 3, 0, 3};
  EXPECT_DOUBLE_EQ(amax(hist, 3.0, CalibAlgo::kPercentile, 40), 0.5);   // 4 reached in bin 0
  EXPECT_DOUBLE_EQ(amax(hist, 3.0, CalibAlgo::kPercentile, 41), 2.0);   // 4.1: bin 3 (edge 2.0), no interpolation
  EXPECT_DOUBLE_EQ(amax(hist, 3.0, CalibAlgo::kPercentile, 70), 2.0);   // exactly 7: bin 3
  EXPECT_DOUBLE_EQ(amax(hist, 3.0, CalibAlgo::kPercentile, 70.5), 3.0); // 7.05: bin 5
  EXPECT_DOUBLE_EQ(amax(hist, 3.0, CalibAlgo::kPercentile, 100), 3.0);
  // Trailing empty bins: 100% is reached at the last non-empty bin's edge, below max.
  EXPECT_DOUBLE_EQ(amax({1, 0, 1, 0, 0, 0}, 3.0, CalibAlgo::kPercentile, 100), 1.5);
  // The default 99.99 with 9,999 values in bin 0 and one outlier in the last of 2048 bins: 99.99% of 10,000 = 9,999
  // is reached in bin 0, so the outlier is clipped: amax = one bin width.
  std::vector<double> h(2048, 0.0);
  h[0] = 9999;
  h[2047] = 1;
  EXPECT_DOUBLE_EQ(amax(h, 20.48, CalibAlgo::kPercentile), 0.01);
}

// ---------------------------------------------------------------- binning: the Calibrator on a graph

// x -> Relu -> y.
Graph relu_graph(int64_t n) {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), y = g.add_value("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {n};
  g.values[x].has_shape = true;
  g.nodes.push_back(Node{"relu", OpType::Relu, 13, {}, {x}, {y}});
  g.outputs = {y};
  g.relink();
  PrepareOptions p;
  p.input_shapes["x"] = {n};
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  return g;
}

float scale_of(Graph& g, const Tensor& x, CalibAlgo algo, double percentile, int bins, const std::string& name) {
  CalibOptions o;
  o.algo = algo;
  o.percentile = percentile;
  o.bins = bins;
  Calibrator cal(g, o);
  EXPECT_TRUE(cal.observe_range({{"x", x}}).is_ok());
  if (cal.needs_histograms()) {
    EXPECT_TRUE(cal.observe_histogram({{"x", x}}).is_ok());
  }
  const CalibCache cache = cal.result();  // find() points into it
  const float* s = cache.find(name);
  EXPECT_TRUE(s != nullptr) << name;
  return s ? *s : 0.f;
}

TEST(CalibratorReference, BinsOfObservedValues) {
  // |x| over [0, 10] in 10 bins of width 1: bin floor(|x|) (not the nearest), and |x| = max in the last bin. -10 -> 9,
  // 9.5 -> 9, 0 and 0.6 -> 0, 1 and -1.7 -> 1, 2 and 2.5 -> 2, 3 -> 3, 7 -> 7. NaN and inf are not counted (nor in
  // the max).
  // Counts 2, 2, 2, 1, 0, 0, 0, 1, 0, 2; cumulative 2, 4, 6, 7, 7, 7, 7, 8, 8, 10.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_f32({12}, {-10.f, 9.5f, 0.f, 0.6f, 1.f, -1.7f, 2.f, 2.5f, 3.f, 7.f, nan, inf});
  Graph g = relu_graph(12);
  struct Case {
    double p, amax;
  };
  for (const Case c : {Case{20, 1}, Case{20.5, 2}, Case{40, 2}, Case{60, 3}, Case{70, 4}, Case{75, 8}, Case{80, 8},
                       Case{90, 10}, Case{100, 10}}) {
    EXPECT_EQ(scale_of(g, x, CalibAlgo::kPercentile, c.p, 10, "x"), static_cast<float>(c.amax / 127)) << c.p;
  }
  EXPECT_EQ(scale_of(g, x, CalibAlgo::kMinMax, 0, 10, "x"), static_cast<float>(10.0 / 127));
  // y = relu(x): max 9.5 (inf is skipped), 10 bins of 0.95: bin 0 holds 0, relu(-10), 0.6, relu(-1.7) (and
  // relu(NaN) if it is 0), bin 1 holds 1 (1 / 0.95 = 1.05), then 2 and 2.5 in bin 2, 3 in bin 3, 7 in 7, 9.5 in 9.
  // 50% of the 10 (or 11) values is first reached in bin 1: amax = 2 bins = 1.9.
  EXPECT_EQ(scale_of(g, x, CalibAlgo::kMinMax, 0, 10, "y"), static_cast<float>(9.5 / 127));
  EXPECT_EQ(scale_of(g, x, CalibAlgo::kPercentile, 50, 10, "y"), static_cast<float>(2 * (9.5 / 10) / 127));
  // A tensor that is always 0 gets amax 1 (scale 1/127) with every algorithm.
  const Tensor neg = Tensor::from_f32({12}, std::vector<float>(12, -1.f));
  for (CalibAlgo a : {CalibAlgo::kMinMax, CalibAlgo::kPercentile, CalibAlgo::kMse, CalibAlgo::kEntropy}) {
    EXPECT_EQ(scale_of(g, neg, a, 99.99, 2048, "y"), static_cast<float>(1.0 / 127)) << static_cast<int>(a);
  }
}

}  // namespace
}  // namespace qd
