// Kernel start and end times of a few runs of an enqueued model, from CUPTI's activity API, which qdeploy loads at run
// time (it does not link CUPTI; QD_CUPTI_LIB names the library where the usual places lack it). What a per-layer
// profile (each layer alone, between events) cannot show: how the kernels of one run overlap (programmatic dependent
// launch, the detection heads' second stream) and where the GPU idles between them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "qdeploy/device.h"
#include "runtime/timeline_json.h"

namespace qd::cuda {

using KernelSpan = qdeploy::KernelSpan;  // the public API's (include/qdeploy/device.h)
using ::qd::timeline_json;

// The kernels each call run(i), i = 0 .. runs - 1, executed, in start order, one list per call; run returns once its
// work has finished on the GPU. A CUDA graph instantiated before the recording starts may go unrecorded: run(0) is
// where the caller sets up (a context, its captured graph) and warms up. One recording at a time per process.
Expected<std::vector<std::vector<KernelSpan>>> kernel_timeline(const std::function<Status(int)>& run, int runs);

}  // namespace qd::cuda
