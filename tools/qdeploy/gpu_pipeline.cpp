#include "gpu_pipeline.h"

#include "tasks/device_pipeline.h"

namespace qd::cli {

Expected<std::shared_ptr<void>> use_gpu_pipeline(Engine& engine, Detector& det, int max_batch, std::string* why,
                                                 size_t images) {
  const int last = max_batch > 0 ? static_cast<int>(images % static_cast<size_t>(max_batch)) : 0;
  return attach_device_pipeline(engine, det, max_batch, why, last);
}

}  // namespace qd::cli
