// Per-layer INT8 sensitivity on the reference backend: how a quality metric moves when one quantizable layer (a node
// that lower_int8 puts in INT8: Conv, Gemm) stays in float while the others run INT8, and when it alone runs INT8;
// plus a greedy fallback that keeps the most sensitive layers in float until the metric is good enough.
//
// The FP32 pass runs once (its outputs are the SNR reference); every configuration is a copy of the one prepared
// graph lowered by lower_int8, so the model is imported and prepared once. Input batches are cached in memory up to
// a budget, since the same batches run for every configuration.
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

// A quality measure accumulated over the outputs of every batch of one configuration; higher is better.
class SensitivityMetric {
 public:
  virtual ~SensitivityMetric() = default;
  // The FP32 outputs of each batch, given once before any configuration runs (SnrMetric keeps them).
  virtual Status set_reference(int batch, const std::vector<Tensor>& outputs) { return Status::ok(); }
  virtual void reset() = 0;  // before each configuration
  virtual Status add(int batch, const std::vector<Tensor>& outputs) = 0;
  virtual Expected<double> value() const = 0;
};

// 10 * log10(signal / noise) in dB; +inf when noise is 0 (identical outputs).
double snr_db(double signal, double noise);

// SNR of the outputs against the FP32 reference: 10·log10(Σ ref² / Σ (ref − q)²) over every element of every
// float output and batch.
class SnrMetric final : public SensitivityMetric {
 public:
  Status set_reference(int batch, const std::vector<Tensor>& outputs) override;
  void reset() override;
  Status add(int batch, const std::vector<Tensor>& outputs) override;
  Expected<double> value() const override;
  // The same ratio for each output alone (in output order), for the configuration measured last.
  std::vector<double> per_output() const;

 private:
  std::vector<std::vector<Tensor>> ref_;  // [batch][output]
  std::vector<double> signal_, noise_;    // per output
};

struct LayerSensitivity {
  std::string name;
  std::string op;
  int64_t macs = 0;
  double metric_float = NAN;  // this layer in float, every other quantizable layer INT8 (NaN: not measured)
  double metric_int8 = NAN;   // this layer alone INT8, everything else float
};

struct FallbackResult {
  std::vector<std::string> float_layers;  // in the order they were added
  std::vector<double> metrics;            // the metric after each addition
  double metric = NAN;                    // of the final configuration
  bool reached = false;                   // metric >= target
  Int8Report report;                      // of the final configuration
};

class SensitivityAnalysis {
 public:
  using BatchFn = std::function<Expected<std::map<std::string, Tensor>>(int batch)>;
  struct Options {
    bool progress = true;                   // progress lines on stderr
    size_t cache_bytes = size_t{1} << 30;   // input batches kept in memory between configurations
    // Sweep and fall back over these layers only (names or regexes, see matches_any; empty: all). The others
    // stay INT8 in every configuration of the float sweep and float in every one of the INT8 sweep.
    std::vector<std::string> only_layers;
  };

  // `prepared`: the float graph, shapes inferred for the batches' shapes. `int8`: scales and mode; its float_nodes
  // stay in float in every configuration. `metric` must outlive the analysis.
  SensitivityAnalysis(Graph prepared, Int8Options int8, int num_batches, BatchFn batches, SensitivityMetric* metric,
                      Options opt);
  SensitivityAnalysis(Graph prepared, Int8Options int8, int num_batches, BatchFn batches, SensitivityMetric* metric)
      : SensitivityAnalysis(std::move(prepared), std::move(int8), num_batches, std::move(batches), metric, Options()) {}

  // Runs FP32 (reference outputs, FP32 metric) and all-INT8, and lists the quantizable layers (those selected by
  // Options::only_layers) in model order.
  Status init();
  double fp32() const { return fp32_; }
  double all_int8() const { return all_int8_; }
  const Int8Report& all_int8_report() const { return all_int8_report_; }
  const std::vector<LayerSensitivity>& layers() const { return layers_; }

  // The metric with `float_layers` (exact node names) in float and every other quantizable layer INT8.
  Expected<double> measure(const std::vector<std::string>& float_layers, Int8Report* report = nullptr);
  // The all-INT8 metric with these activation scales instead (another calibration of the same model).
  Expected<double> measure_scales(const std::map<std::string, float>& act_scales);
  // The two sweeps: fill metric_float / metric_int8 of every layer.
  Status sweep_float();
  Status sweep_int8();
  // Layer indices, most sensitive first: the largest metric with the layer in float (i.e. the largest gain over
  // all-INT8); without that sweep, the lowest metric with the layer alone in INT8.
  std::vector<size_t> ranking() const;
  // Greedy fallback: adds layers in ranking() order to the float set, measuring after each, until the metric is at
  // least `target`. Progress lines name each layer added and the metric it gave.
  Expected<FallbackResult> auto_fallback(double target);

 private:
  Expected<std::map<std::string, Tensor>> batch(int k);
  Expected<double> run(const Graph& g, bool reference);
  Status sweep(bool keep_float);

  Graph prepared_;
  Int8Options int8_;
  int num_batches_;
  BatchFn batches_;
  SensitivityMetric* metric_;
  Options opt_;
  std::vector<std::map<std::string, Tensor>> cache_;
  size_t cached_bytes_ = 0;
  std::function<void()> tick_;  // called after each batch run (progress)
  double fp32_ = NAN, all_int8_ = NAN;
  Int8Report all_int8_report_;
  std::vector<LayerSensitivity> layers_;
  std::vector<std::string> quantizable_;  // every layer all-INT8 runs in INT8, selected or not
};

}  // namespace qd
