// A Detector's pre- and post-processing on the GPU, around an engine step given as a callback: decoded images ->
// ImagePreprocessor (letterbox + pack into a device input buffer) -> infer(d_input) -> YoloPostprocessor (filter,
// sort, NMS, map back) -> detections on the host. Same detections as Detector::detect() on the CPU path.
//
// How the CLI switches to it (tools/qdeploy/gpu_pipeline.cpp, use_gpu_pipeline(), called by `detect` and `eval`
// right after Detector::create): for an engine on CUDA whose context can run on device pointers, e.g. with
// CudaContext (backends/cuda/cuda_engine.h):
//
//   auto ctx = std::shared_ptr<cuda::CudaContext>(cuda_engine->create_context());
//   cuda::DetectPipeline::InferFn infer = [ctx, in, out](void* d_input, int n, cudaStream_t s) -> Expected<const void*> {
//     QD_RETURN_IF_ERROR(ctx->set_input_shapes({{in.name, {n, 3, h, w}}}));
//     QD_RETURN_IF_ERROR(ctx->bind(in.name, d_input));
//     QD_RETURN_IF_ERROR(ctx->enqueue(s));
//     return static_cast<const void*>(ctx->device_buffer(out.name));
//   };
//   cuda::DetectPipeline::Config cfg = cuda::DetectPipeline::config_for(*det, max_batch, boxes, out.dtype);
//   cfg.tensor.dtype = in.dtype;   // fp32 unless the plan takes fp16 / int8 input (then also cfg.tensor.int8_scale)
//   auto pipe = QD_TRY(cuda::DetectPipeline::create(cfg, infer, stream));
//   det->set_device_path(pipe->detect_fn());   // keep `pipe` alive as long as `det`
//
// Models with raw head outputs (Detector::raw_heads()) keep the CPU path: the GPU post-processing takes the decoded
// [N, boxes, 5+nc] output only.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <vector>

#include "tasks/cuda/detect_post.h"
#include "tasks/cuda/preprocess.h"
#include "tasks/detector.h"

namespace qd::cuda {

class DetectPipeline {
 public:
  struct Config {
    DetectorOptions detector;  // Detector::options(): the letterbox (size resolved from the model) and NMS options
    TensorOptions tensor;      // the engine input's values: det.options().tensor (x/255 RGB NCHW fp32 by default)
    int max_batch = 1;
    int64_t boxes = 0;         // the decoded output [N, boxes, 5 + num_classes]
    int num_classes = 0;
    DType output_dtype = DType::kFloat32;  // kFloat32 or kFloat16
    int64_t max_candidates = 0;            // see YoloGpuConfig
  };
  // The config that reproduces det's CPU path (its options' TensorOptions, as Detector::preprocess uses).
  static Config config_for(const Detector& det, int max_batch, int64_t boxes, DType output_dtype);

  // The engine step: run the network on d_input (device, ImagePreprocessor::output_shape(n) of config.tensor) on
  // `stream`; return the device address of the decoded output [n, boxes, 5 + nc], valid until the next call.
  using InferFn = std::function<Expected<const void*>(void* d_input, int n, cudaStream_t stream)>;

  // Allocates the input buffer for max_batch images and the pre/post-processing state; all work goes on `stream`.
  static Expected<std::unique_ptr<DetectPipeline>> create(const Config& config, InferFn infer, cudaStream_t stream);
  ~DetectPipeline();
  DetectPipeline(const DetectPipeline&) = delete;
  DetectPipeline& operator=(const DetectPipeline&) = delete;

  // Detections per image (in its own pixels, best first); batches larger than max_batch are split. Timings: GPU time
  // per stage from events on the stream (DetectTimings: the copies apart from the kernels; packing the pinned
  // staging memory on the host is not counted).
  Expected<std::vector<std::vector<Detection>>> detect(const std::vector<const Image*>& images,
                                                       DetectTimings* timings = nullptr);
  // detect() as a Detector device path (captures `this`).
  DetectFn detect_fn();

  void* input_buffer() const { return input_; }

 private:
  DetectPipeline() = default;
  Config cfg_;
  InferFn infer_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<ImagePreprocessor> pre_;
  std::unique_ptr<YoloPostprocessor> post_;
  void* input_ = nullptr;
  // Upload start/end, preprocessed, inferred, NMS done, results copied.
  cudaEvent_t ev_[6] = {};
};

}  // namespace qd::cuda
