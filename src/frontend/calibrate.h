// The calibration loop over a model's input batches, shared by `qdeploy calibrate` (and every command that calibrates
// on the fly) and the public qdeploy::calibrate: import and prepare the model for the first batch's shapes, then one
// pass (minmax) or two (the histogram algorithms) over every batch on the reference backend; for auto, a check of the
// whole model on held-out batches.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/tensor.h"
#include "quant/calibrator.h"

namespace qd {

using CalibBatchFn = std::function<Expected<std::map<std::string, Tensor>>(int k)>;
// Called after each batch with the batches done and the total over all passes.
using CalibProgressFn = std::function<void(int64_t done, int64_t total, int passes)>;

// Batches kept out of calibration for auto's check of the whole model: the output SNR against FP32 of the INT8
// model (fake-quant) with auto's per-tensor picks and with each of the four algorithms for every tensor; one algorithm
// replaces the picks where its SNR is at least kAutoModelMarginDb higher (CalibReport::model_candidates). None
// (num_batches 0): the per-tensor picks stand.
struct HeldOutBatches {
  int num_batches = 0;
  CalibBatchFn batch;
};
// Held-out batches do not resolve smaller differences: 16 of Fashion-MNIST's (128 images) moved the shipped
// classifiers' top-1 by about 0.1 point either way on such ties.
constexpr double kAutoModelMarginDb = 0.5;

Expected<CalibCache> calibrate_batches(const std::string& model, int num_batches, const CalibBatchFn& batch,
                                       const CalibOptions& opt, const CalibProgressFn& progress = nullptr,
                                       CalibReport* report = nullptr, const HeldOutBatches& held = {});

}  // namespace qd
