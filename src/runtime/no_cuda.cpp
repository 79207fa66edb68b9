// The CUDA entry points in builds without the CUDA backend (no nvcc, sanitizer and fuzz builds).
#include "runtime/engine.h"

namespace qd {

Expected<std::unique_ptr<Engine>> build_cuda_engine(const std::string&, const BuildOptions&) {
  return unsupported("--device cuda: this qdeploy was built without the CUDA backend (nvcc not found, or a "
                     "sanitizer build); rebuild with the CUDA toolkit, or use --device cpu");
}

Expected<std::unique_ptr<Engine>> load_cuda_engine(const PlanFile&) {
  return unsupported("this plan was built for a GPU (target cuda), but this qdeploy was built without the CUDA "
                     "backend; run it with a CUDA build of qdeploy, or build a CPU plan with `qdeploy build MODEL -o "
                     "PLAN --device cpu`");
}

}  // namespace qd
