// A Detector's GPU path, reached without naming the CUDA backend: tasks/ and the CLI stay free of CUDA headers and
// of #ifdefs (the CUDA backend implements it; builds without it leave the detector on its CPU path).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/engine.h"
#include "tasks/detector.h"

namespace qd {

// When `engine` runs on a CUDA GPU, can run on device pointers, and the model outputs the decoded [N, boxes, 5+nc]
// tensor, routes det.detect() through the GPU pipeline (fused letterbox written into the engine's input binding, the
// engine as a CUDA graph on the same stream, batched filter + NMS on its output buffer) for batches of up to
// max_batch images, warmed up for a last, partial batch of last_batch images too (0: none). Returns the object that
// owns it (keep it alive as long as `det` is used). Otherwise leaves `det` on its CPU path and returns nullptr, with
// *why saying why when the engine is a CUDA engine that cannot use it. Detections are the same either way.
Expected<std::shared_ptr<void>> attach_device_pipeline(Engine& engine, Detector& det, int max_batch,
                                                       std::string* why = nullptr, int last_batch = 0);

}  // namespace qd
