// The CUDA engine (work in progress).
#include "runtime/engine.h"

namespace qd {

Expected<std::unique_ptr<Engine>> build_cuda_engine(const std::string&, const BuildOptions&) {
  return unsupported("--device cuda: the CUDA engine is being written; use --device cpu");
}

}  // namespace qd
