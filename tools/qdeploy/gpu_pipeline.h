// Where `detect` and `eval` switch a Detector to GPU pre- and post-processing (tasks/cuda/detect_pipeline.h):
// one function, called right after Detector::create, so that wiring the CUDA engine in is a change to its body only.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/engine.h"
#include "tasks/detector.h"

namespace qd::cli {

// When `engine` runs on a CUDA GPU and can run on device pointers, and the model outputs the decoded
// [N, boxes, 5+nc] tensor, routes det.detect() through a cuda::DetectPipeline for batches of up to max_batch images
// and returns the object that owns it (keep it alive as long as `det` is used). Otherwise leaves `det` on its CPU
// path and returns nullptr (with *why saying why, when the engine is a CUDA engine that cannot use it). Detections
// are the same either way. The GPU path: fused letterbox written into the engine's input binding, the engine as a
// CUDA graph on the same stream, batched filter + NMS on its output buffer (tasks/cuda/engine_detect.h).
// `images`, when known, is how many images will come (the last, partial batch is warmed up too).
Expected<std::shared_ptr<void>> use_gpu_pipeline(Engine& engine, Detector& det, int max_batch,
                                                 std::string* why = nullptr, size_t images = 0);

}  // namespace qd::cli
