// tasks/device_pipeline.h on the CUDA backend: the engine is a CudaEngine or the detector stays on the CPU path.
#include "tasks/device_pipeline.h"

#include "tasks/cuda/engine_detect.h"

namespace qd {

Expected<std::shared_ptr<void>> attach_device_pipeline(Engine& engine, Detector& det, int max_batch, std::string* why,
                                                       int last_batch) {
  if (why) why->clear();
  if (det.has_device_path()) return std::shared_ptr<void>();
  const TensorOptions& t = det.options().tensor;
  const TensorOptions d;
  if (t.order != d.order || t.layout != d.layout || t.mean != d.mean || t.stddev != d.stddev || t.divisor != d.divisor) {
    // The device pipeline packs the default values (x / 255, RGB); other --preprocess values stay on the CPU.
    if (why) *why = "--preprocess mean/std/order";
    return std::shared_ptr<void>();
  }
  const auto* cuda_engine = dynamic_cast<const cuda::CudaEngine*>(&engine);
  if (!cuda_engine) return std::shared_ptr<void>();
  std::shared_ptr<cuda::EngineDetectPipeline> p =
      QD_TRY(cuda::attach_engine_pipeline(*cuda_engine, det, max_batch, why, last_batch));
  return std::shared_ptr<void>(std::move(p));
}

}  // namespace qd
