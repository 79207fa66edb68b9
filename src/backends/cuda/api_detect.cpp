// tasks/device_pipeline.h on the CUDA backend: the engine is a CudaEngine or the detector stays on the CPU path.
#include "backends/cuda/engine_detect.h"
#include "tasks/device_pipeline.h"

namespace qd {

Expected<std::shared_ptr<void>> attach_device_pipeline(Engine& engine, Detector& det, int max_batch, std::string* why,
                                                       int last_batch) {
  if (why) why->clear();
  const auto* cuda_engine = dynamic_cast<const cuda::CudaEngine*>(&engine);
  if (!cuda_engine || det.has_device_path()) return std::shared_ptr<void>();
  std::shared_ptr<cuda::EngineDetectPipeline> p =
      QD_TRY(cuda::attach_engine_pipeline(*cuda_engine, det, max_batch, why, last_batch));
  return std::shared_ptr<void>(std::move(p));
}

}  // namespace qd
