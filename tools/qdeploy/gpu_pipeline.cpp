#include "gpu_pipeline.h"

#ifdef QD_HAVE_CUDA
#include "tasks/cuda/engine_detect.h"
#endif

namespace qd::cli {

Expected<std::shared_ptr<void>> use_gpu_pipeline(Engine& engine, Detector& det, int max_batch, std::string* why,
                                                 size_t images) {
  if (why) why->clear();
  if (det.has_device_path()) return std::shared_ptr<void>();
  const TensorOptions& t = det.options().tensor;
  const TensorOptions d;
  if (t.order != d.order || t.layout != d.layout || t.mean != d.mean || t.stddev != d.stddev || t.divisor != d.divisor) {
    // The device pipeline packs the default values (x / 255, RGB); other --preprocess values stay on the CPU.
    if (why) *why = "--preprocess mean/std/order";
    return std::shared_ptr<void>();
  }
#ifdef QD_HAVE_CUDA
  auto* cuda_engine = dynamic_cast<cuda::CudaEngine*>(&engine);
  if (!cuda_engine) return std::shared_ptr<void>();
  const int last = max_batch > 0 ? static_cast<int>(images % static_cast<size_t>(max_batch)) : 0;
  std::shared_ptr<cuda::EngineDetectPipeline> p =
      QD_TRY(cuda::attach_engine_pipeline(*cuda_engine, det, max_batch, why, last));
  return std::shared_ptr<void>(std::move(p));
#else
  (void)engine;
  (void)max_batch;
  (void)images;
  return std::shared_ptr<void>();
#endif
}

}  // namespace qd::cli
