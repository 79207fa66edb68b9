// CUDA device discovery. Compiled only when nvcc is available; callers check has_cuda_device() first.
#pragma once

#include <string>

#include "core/status.h"

namespace qd::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  size_t global_memory = 0;
  size_t l2_bytes = 0;
  int runtime_version = 0, driver_version = 0;
};

// Number of usable CUDA devices (0 when there is no driver or no GPU; never an error).
int device_count();
Expected<DeviceInfo> device_info(int index);
// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB, CUDA runtime 13000 / driver 13000)"
std::string describe(const DeviceInfo& d);

}  // namespace qd::cuda
