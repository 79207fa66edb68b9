#include "gpu_pipeline.h"

namespace qd::cli {

Expected<std::shared_ptr<void>> use_gpu_pipeline(Engine& engine, Detector& det, int max_batch) {
  (void)engine;
  (void)max_batch;
  if (det.raw_heads() || det.has_device_path()) return std::shared_ptr<void>();
  // Not wired yet: the CUDA engine's device-pointer runs (CudaContext bind / enqueue / device_buffer) are what the
  // pipeline's InferFn needs. backends/cuda/detect_pipeline.h shows the dozen lines that go here (under
  // #ifdef QD_HAVE_CUDA, for an engine that is a cuda::CudaEngine); until then detect() stays on the CPU path.
  return std::shared_ptr<void>();
}

}  // namespace qd::cli
