// A kernel timeline (qdeploy::kernel_timeline, include/qdeploy/device.h) as JSON, for `qdeploy bench
// --export-timeline`.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "qdeploy/device.h"

namespace qd {

// One run's kernels as JSON: wall time (first start to last end), busy time (the union of the kernels' intervals),
// the kernels' summed durations, and each kernel's start (from the run's first) and duration, in microseconds.
nlohmann::json timeline_json(const std::vector<qdeploy::KernelSpan>& run);

}  // namespace qd
