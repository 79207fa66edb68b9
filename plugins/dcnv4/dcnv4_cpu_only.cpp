// A build without CUDA: DCNv4 runs on the CPU reference alone.
#include "dcnv4.h"

namespace qd_dcnv4 {

std::vector<qdeploy::CudaKernelDef> cuda_kernels() { return {}; }

}  // namespace qd_dcnv4
