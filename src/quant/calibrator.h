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
//   auto        every tensor takes the one of the four thresholds above with the smallest expected squared
//               quantize-dequantize error (quant_error_from_histogram: each bin's mass spread evenly over 8 points
//               inside the bin, so that fine quantization steps are not judged by the bin centre alone); the smaller
//               threshold on ties. choices() reports each tensor's candidates and pick. One histogram pass serves
//               all four (minmax needs only the max).
// Detection-head rule (CalibOptions::float_head, on by default): tensors on the float side of a model's output
//   head get no scale, so that no engine reading the cache (TensorRT's implicit INT8 in particular, which runs any
//   tensor with a scale in INT8 when that is faster) squeezes a Sigmoid, a box decode or concatenated boxes and
//   scores into one per-tensor INT8 scale. These tensors are head_tensors(g): for each graph output, walking back
//   through every node that is not a Conv/Gemm and stopping at tensors a Conv/Gemm reads (quantization points of
//   the INT8 contract keep their scales), the tensors met (the last Conv/Gemm outputs included), when that region
//   holds a Sigmoid and a Concat (a detection decode joining boxes and scores, or the levels; a segmentation
//   model's lone Sigmoid map, e.g. PP-OCR's text detector, keeps its scale). The head's convs stay INT8: their inputs keep their
//   scales and their outputs are written in float, as in Ultralytics' and NNCF's ignored-scope rules for YOLO heads.
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

enum class CalibAlgo { kMinMax, kEntropy, kPercentile, kMse, kAuto };
Expected<CalibAlgo> parse_calib_algo(const std::string& name);
// Header name: MinMaxCalibration, EntropyCalibration2, ...; auto writes EntropyCalibration2, the header TensorRT's
// IInt8EntropyCalibrator2 accepts (as qat2ptq's caches do), since no TensorRT calibrator is named for a mix.
const char* calib_algo_trt_name(CalibAlgo a);
const char* calib_algo_name(CalibAlgo a);  // minmax, entropy, percentile, mse, auto

struct CalibOptions {
  CalibAlgo algo = CalibAlgo::kEntropy;
  double percentile = 99.99;
  int bins = 2048;
  bool float_head = true;  // the detection-head rule above
};

// What auto weighed for one tensor: the four candidate thresholds and their expected squared errors.
struct CalibChoice {
  std::string tensor;
  CalibAlgo chosen = CalibAlgo::kMinMax;
  double max = 0;                // max|x|
  double amax[4] = {0, 0, 0, 0};  // minmax, entropy, percentile, mse (CalibAlgo order)
  double mse[4] = {0, 0, 0, 0};
  double signal = 0;              // mean x^2 (the SQNR's numerator)
  // 10 log10(signal / mse) of the chosen threshold, in dB (+inf for an error of 0).
  double sqnr_db() const;
};

// Expected squared quantize-dequantize error per value of a histogram of |x| over [0, max] quantized with threshold
// `amax` (step amax / 127, values beyond amax clipped), each bin's mass spread evenly over 8 points inside it.
double quant_error_from_histogram(const std::vector<double>& hist, double max, double amax);

// One configuration auto weighed for the whole model: its output SNR against FP32 on held-out data.
struct CalibModelCandidate {
  std::string algo;  // "per-tensor" (auto's per-tensor picks), or one algorithm for every tensor
  double snr_db = 0;
};

// What a calibration decided beyond the scales: auto's per-tensor picks and the detection-head rule's tensors, and
// auto's check of the whole model on held-out data (frontend/calibrate.h's calibrate_batches).
struct CalibReport {
  std::vector<CalibChoice> choices;     // auto only; in the cache's order
  std::vector<std::string> float_head;  // left without a scale by the detection-head rule
  std::vector<CalibModelCandidate> model_candidates;  // empty: not checked (not auto, or no held-out data)
  std::string model_pick;               // the candidate kept
  int held_out_images = 0;
};

// The detection-head rule's tensors (names, graph order): see the header comment.
std::vector<std::string> head_tensors(const Graph& g);

class Calibrator {
 public:
  // `g` must be prepared (shapes inferred) for the batch shape that observe() receives.
  Calibrator(const Graph& g, CalibOptions opt);
  bool needs_histograms() const { return opt_.algo != CalibAlgo::kMinMax; }
  const CalibOptions& options() const { return opt_; }
  // Pass 1: max|x| of every float tensor (graph inputs and node outputs).
  Status observe_range(const std::map<std::string, Tensor>& feeds);
  // Pass 2 (not for minmax): histograms over [0, max].
  Status observe_histogram(const std::map<std::string, Tensor>& feeds);
  // amax per tensor -> scale = amax / 127 (tensors that were always 0 get scale 1/127, i.e. amax 1).
  // The detection-head rule's tensors (float_head) are left out.
  CalibCache result() const;
  // For auto: every tensor's candidates and pick, in the cache's order (empty for the other algorithms).
  std::vector<CalibChoice> choices() const;
  // The tensors the detection-head rule left without a scale (empty when float_head is off).
  const std::vector<std::string>& float_head_tensors() const { return head_; }
  CalibReport report() const {
    CalibReport r;
    r.choices = choices();
    r.float_head = head_;
    return r;
  }
  // amax from a histogram of |x| over [0, max], for one algorithm (exposed for tests).
  static double amax_from_histogram(const std::vector<double>& hist, double max, const CalibOptions& opt);

 private:
  Status run(const std::map<std::string, Tensor>& feeds, bool histogram);
  void add(const std::string& name, const Tensor& t, bool histogram);
  const Graph& g_;
  CalibOptions opt_;
  double amax_of(const std::string& name, double max, CalibChoice* choice) const;
  std::vector<std::string> order_;  // tensors in graph order (the cache's line order)
  std::vector<std::string> head_;   // left out by the detection-head rule
  std::map<std::string, double> max_;
  std::map<std::string, std::vector<double>> hist_;
};

}  // namespace qd
