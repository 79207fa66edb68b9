// Activation calibration: per-tensor amax from representative data, then scale = amax / 127.
//
// Two passes over the same data: the first finds max|x| per tensor, the second fills a histogram of |x| with `bins`
// bins over [0, max]. Algorithms:
//   minmax      amax = max|x|
//   percentile  amax = upper edge of the bin where the cumulative count reaches `percentile` % of all values (a bin
//               edge, no interpolation inside the bin)
//   mse         amax minimizing the expected squared error of quantize-dequantize (clipping included), from the
//               histogram's bin centres, over candidate thresholds at every 16th bin edge from bins/16 on (the
//               smallest on ties)
//   entropy     TensorRT's EntropyCalibration2 idea: for each threshold i in [128, bins] (bin edges), P = hist[0..i)
//               with the mass beyond i added to its last bin; Q = hist[0..i) merged into 128 levels (level l covers
//               bins [floor(l*i/128), floor((l+1)*i/128)); the clipped mass stays in P only) and spread back evenly
//               over the bins of each level that are non-empty in P (empty bins stay empty, so they never carry
//               mass); the threshold with the smallest KL(P || Q) wins (the smallest threshold on ties). A bin with
//               P > 0 and Q = 0 (only P's last bin, when its level is empty in hist) counts Q as 1e-12; bins where
//               P = 0 contribute nothing. Bin 0 (exact zeros after ReLU) takes bin 1's count first, as NVIDIA's
//               pytorch-quantization does, so a spike of zeros cannot decide the threshold.
// Bins: value |x| goes to bin floor(|x| * bins / max), max|x| itself to the last; NaN and inf are skipped.
// tests/quant/calibrator_test.cpp checks each rule against thresholds derived by hand or by brute force.
// Results are deterministic on one machine: same model, data and options give the same bytes (another CPU may pick
// other BLAS kernels, whose summation order moves the last bits of some scales).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "quant/calib_cache.h"

namespace qd {

enum class CalibAlgo { kMinMax, kEntropy, kPercentile, kMse };
Expected<CalibAlgo> parse_calib_algo(const std::string& name);
const char* calib_algo_trt_name(CalibAlgo a);  // header name: MinMaxCalibration, EntropyCalibration2, ...

struct CalibOptions {
  CalibAlgo algo = CalibAlgo::kEntropy;
  double percentile = 99.99;
  int bins = 2048;
};

class Calibrator {
 public:
  // `g` must be prepared (shapes inferred) for the batch shape that observe() receives.
  Calibrator(const Graph& g, CalibOptions opt);
  bool needs_histograms() const { return opt_.algo != CalibAlgo::kMinMax; }
  // Pass 1: max|x| of every float tensor (graph inputs and node outputs).
  Status observe_range(const std::map<std::string, Tensor>& feeds);
  // Pass 2 (not for minmax): histograms over [0, max].
  Status observe_histogram(const std::map<std::string, Tensor>& feeds);
  // amax per tensor -> scale = amax / 127 (tensors that were always 0 get scale 1/127, i.e. amax 1).
  CalibCache result() const;
  // amax from a histogram of |x| over [0, max], for one algorithm (exposed for tests).
  static double amax_from_histogram(const std::vector<double>& hist, double max, const CalibOptions& opt);

 private:
  Status run(const std::map<std::string, Tensor>& feeds, bool histogram);
  void add(const std::string& name, const Tensor& t, bool histogram);
  const Graph& g_;
  CalibOptions opt_;
  std::vector<std::string> order_;  // tensors in graph order (the cache's line order)
  std::map<std::string, double> max_;
  std::map<std::string, std::vector<double>> hist_;
};

}  // namespace qd
