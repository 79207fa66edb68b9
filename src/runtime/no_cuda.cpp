// The CUDA entry points in builds without the CUDA backend (no nvcc, sanitizer and fuzz builds).
#include "runtime/engine.h"

namespace qd {

Expected<std::unique_ptr<Engine>> build_cuda_engine(const std::string&, const BuildOptions&) {
  return unsupported("--device cuda: this qdeploy was built without the CUDA backend (nvcc not found, or a "
                     "sanitizer build); rebuild with the CUDA toolkit, or use --device cpu");
}

}  // namespace qd
