// A Detector on a CudaEngine, end to end on the GPU: decoded images -> fused letterbox/normalize written straight
// into the engine's input binding -> the engine (a CUDA graph) on the same stream -> batched decode filter + NMS
// reading the engine's output buffer -> detections on the host. No host round trip of the input or output tensors.
// This is the DetectPipeline (detect_pipeline.h) wired to a CudaContext; `qdeploy detect` and `eval` switch to it
// through tools/qdeploy/gpu_pipeline.cpp, and the tests use it the same way.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backends/cuda/cuda_engine.h"
#include "tasks/cuda/detect_pipeline.h"
#include "tasks/detector.h"

namespace qd::cuda {

// Why (engine, det) cannot run on the GPU pipeline (raw head outputs, an input or output dtype the GPU kernels do
// not take, ...), or "" when it can.
std::string engine_pipeline_unsupported(const CudaEngine& engine, const Detector& det);

class EngineDetectPipeline {
 public:
  // Owns a stream, a CudaContext of `engine` (CUDA graph on unless cuda_graph is false) and a DetectPipeline for
  // batches of up to max_batch images; runs warm-up batches (of last_batch images, when a last, partial batch is
  // known to come, then of max_batch) so that setup costs and the graph capture happen before timing starts.
  // `engine` must outlive the result. engine_pipeline_unsupported() must be "".
  static Expected<std::unique_ptr<EngineDetectPipeline>> create(const CudaEngine& engine, const Detector& det,
                                                                int max_batch, bool cuda_graph = true,
                                                                int last_batch = 0);
  ~EngineDetectPipeline();
  EngineDetectPipeline(const EngineDetectPipeline&) = delete;
  EngineDetectPipeline& operator=(const EngineDetectPipeline&) = delete;

  // Same contract as Detector::detect(); timings from events on the stream.
  Expected<std::vector<std::vector<Detection>>> detect(const std::vector<const Image*>& images,
                                                       DetectTimings* timings = nullptr) {
    return pipe_->detect(images, timings);
  }
  // For Detector::set_device_path (captures `this`: keep this object alive while the detector uses it).
  DetectFn detect_fn() { return pipe_->detect_fn(); }
  cudaStream_t stream() const { return stream_; }
  int max_batch() const { return max_batch_; }

 private:
  EngineDetectPipeline() = default;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<CudaContext> ctx_;
  std::unique_ptr<DetectPipeline> pipe_;
  int max_batch_ = 1;
};

// Routes det.detect() through a new EngineDetectPipeline when engine_pipeline_unsupported() is ""; returns it (keep
// it alive as long as det is used), or nullptr with *why set when det stays on its CPU path.
Expected<std::shared_ptr<EngineDetectPipeline>> attach_engine_pipeline(const CudaEngine& engine, Detector& det,
                                                                       int max_batch, std::string* why = nullptr,
                                                                       int last_batch = 0);

}  // namespace qd::cuda
