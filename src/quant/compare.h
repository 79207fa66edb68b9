// Layer-by-layer comparison of a model as built against the CPU oracle (`qdeploy compare`), and a bisection that
// finds the layers whose fallback to float recovers the output.
//
// The engine's tensors are observed while it runs as built: on the CPU, the INT8 graph lower_int8 makes (what a CPU
// plan runs) with the reference's observer, so no tensor is made a graph output and nothing about the plan changes;
// a CUDA plan gives its quantized tensors (CudaContext::read_int8_tensors) to the same accumulator. Each tensor is
// compared with the oracle's value of the same name: the FP32 graph, or the reference's exact INT8 graph (to check
// another backend's INT8 against the contract).
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "quant/int8.h"

namespace qd {

struct TensorCompare {
  std::string tensor;
  std::string layer, op;  // the node producing it in the float graph ("" for a graph input)
  float scale = 0.f;      // its INT8 activation scale where the engine quantizes it (0: it does not)
  int64_t count = 0;
  double ref_sq = 0, err_sq = 0, dot = 0, test_sq = 0, max_err = 0;
  int64_t saturated = 0;  // values beyond the INT8 range of `scale` (|x / scale| above 127.5, or below -128.5)
  double snr_db() const;     // 10 log10(sum ref^2 / sum (ref - test)^2); +inf when equal
  double cosine() const;     // of the two tensors as vectors (1 when both are 0)
  double saturated_share() const { return count ? static_cast<double>(saturated) / count : 0.0; }
  double rms_err() const { return count ? std::sqrt(err_sq / count) : 0.0; }
};

// Accumulates per-tensor statistics over batches, in the order tensors are first seen.
class TensorComparison {
 public:
  // `scale`: the tensor's INT8 scale where the engine quantizes it, else 0. Shapes must agree.
  Status add(const std::string& tensor, const Tensor& ref, const Tensor& test, float scale);
  void describe(const std::string& tensor, const std::string& layer, const std::string& op);
  const std::vector<TensorCompare>& results() const { return results_; }

 private:
  std::vector<TensorCompare> results_;
  std::map<std::string, size_t> index_;
};

using CompareBatchFn = std::function<Expected<std::map<std::string, Tensor>>(int batch)>;

struct CompareOptions {
  bool reference_int8 = false;  // the oracle is the reference's exact INT8 graph, not FP32
  bool quantized_only = false;  // only the tensors the engine quantizes (the layers' outputs an INT8 conv reads)
};

// The CPU engine of `int8` (lower_int8 on a copy of `prepared`, the float graph shapes-inferred for the batches)
// against the oracle, tensor by tensor (every float node output both graphs have, in graph order), over every batch.
Expected<std::vector<TensorCompare>> compare_cpu_layers(const Graph& prepared, const Int8Options& int8,
                                                        int num_batches, const CompareBatchFn& batches,
                                                        const CompareOptions& opt);

// Runs the oracle on one batch and gives each float node output (and graph input) to `visit` by name.
Status run_oracle(const Graph& prepared, const Int8Options& int8, bool reference_int8,
                  const std::map<std::string, Tensor>& feeds,
                  const std::function<void(const std::string&, const Tensor&)>& visit);

struct BisectStep {
  std::string action;  // "prefix" (the first N INT8 layers in float) or "keep int8 <layer>" / "needs <layer>"
  int float_layers = 0;
  double snr_db = NAN;
};

struct BisectResult {
  double target_db = NAN, all_int8_db = NAN, final_db = NAN;
  std::vector<std::string> float_layers;  // the set found, in graph order
  std::vector<BisectStep> steps;          // every configuration measured
  int64_t int8_macs = 0, total_macs = 0;  // of the final configuration
};

// Output SNR against FP32 (every float output, every batch) with `float_layers` kept in float besides int8's own.
Expected<double> output_snr(const Graph& prepared, const Int8Options& int8, const std::vector<std::string>& float_layers,
                            int num_batches, const CompareBatchFn& batches, Int8Report* report = nullptr);

// Like `polygraphy debug precision`, on the layers the engine runs in INT8 (graph order): a binary search for the
// shortest prefix whose fallback to float reaches `target_db` output SNR (assumed monotone in the prefix), then a
// pass from its last layer back to its first that returns each layer to INT8 when the target still holds without
// it. About log2(L) + prefix runs of the data; the result is a small set (minimal against single removals), not
// necessarily the smallest of all.
Expected<BisectResult> bisect_precision(const Graph& prepared, const Int8Options& int8, double target_db,
                                        int num_batches, const CompareBatchFn& batches,
                                        const std::function<void(const BisectStep&)>& on_step = nullptr);

}  // namespace qd
