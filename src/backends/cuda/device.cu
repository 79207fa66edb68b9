#include <cuda_runtime.h>

#include <cstdio>

#include "backends/cuda/device.h"

namespace qd::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

Expected<DeviceInfo> device_info(int index) {
  cudaDeviceProp p{};
  cudaError_t e = cudaGetDeviceProperties(&p, index);
  if (e != cudaSuccess) return internal(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e));
  DeviceInfo d;
  d.index = index;
  d.name = p.name;
  d.sm_major = p.major;
  d.sm_minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.global_memory = p.totalGlobalMem;
  d.l2_bytes = static_cast<size_t>(p.l2CacheSize);
  cudaRuntimeGetVersion(&d.runtime_version);
  cudaDriverGetVersion(&d.driver_version);
  return d;
}

std::string describe(const DeviceInfo& d) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs, %.1f GiB, CUDA runtime %d / driver %d)", d.name.c_str(),
                d.sm_major, d.sm_minor, d.multiprocessors, d.global_memory / 1073741824.0, d.runtime_version,
                d.driver_version);
  return buf;
}

}  // namespace qd::cuda
