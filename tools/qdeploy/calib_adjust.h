// What `qdeploy calibrate` adds after the scales: auto's per-tensor report (table, JSON) and the weight adjustments
// (--bias-correction, --adaround) written into an output ONNX (quant/weight_adjust.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "calib_data.h"
#include "quant/calib_cache.h"
#include "quant/calibrator.h"
#include "quant/weight_adjust.h"

namespace qd::cli {

using Json = nlohmann::ordered_json;

// Prints auto's choices (a line per tensor and a count per algorithm) and the detection-head rule's tensors.
void print_calib_report(const CalibReport& r);
Json calib_report_json(const CalibReport& r);

// Fits the weights of `model` on `data` with the cache's scales, writes the adjusted model to `out_onnx` and
// prints a line per adjusted Conv (error before and after).
Expected<WeightAdjustResult> adjust_and_export(const std::string& model, const ImageBatches& data,
                                               const CalibCache& cache, const WeightAdjustOptions& opt,
                                               const std::string& out_onnx, bool quiet);
Json weight_adjust_json(const WeightAdjustResult& r);

}  // namespace qd::cli
