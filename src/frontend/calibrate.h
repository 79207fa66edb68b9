// The calibration loop over a model's input batches, shared by `qdeploy calibrate` (and every command that calibrates
// on the fly) and the public qdeploy::calibrate: import and prepare the model for the first batch's shapes, then one
// pass (minmax) or two (the histogram algorithms) over every batch on the reference backend.
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

Expected<CalibCache> calibrate_batches(const std::string& model, int num_batches, const CalibBatchFn& batch,
                                       const CalibOptions& opt, const CalibProgressFn& progress = nullptr,
                                       CalibReport* report = nullptr);

}  // namespace qd
