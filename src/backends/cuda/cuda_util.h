// Small helpers shared by the CUDA backend: error conversion, device buffers, ceil-div.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace qd::cuda {

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return internal(std::string(what) + ": " + cudaGetErrorString(e));
}

// Returns the CUDA error of `expr` as an internal Status naming the call.
#define QD_CUDA_TRY(expr)                                                    \
  do {                                                                       \
    cudaError_t qd_cuda_err_ = (expr);                                       \
    if (qd_cuda_err_ != cudaSuccess) return ::qd::cuda::cuda_status(qd_cuda_err_, #expr); \
  } while (0)

#ifdef __CUDACC__
#define QD_HOST_DEVICE __host__ __device__
#else
#define QD_HOST_DEVICE
#endif

QD_HOST_DEVICE constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace qd::cuda
