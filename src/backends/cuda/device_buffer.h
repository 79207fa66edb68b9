// Device memory owned by one object (weights, tables, constants): allocated and filled while building, freed with it.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "backends/cuda/cuda_util.h"

namespace qd::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Status alloc(size_t bytes) {
    reset();
    if (bytes == 0) return Status::ok();
    QD_CUDA_TRY(cudaMalloc(&p_, bytes));
    n_ = bytes;
    return Status::ok();
  }
  // Allocates and copies from the host (synchronous: only while building, never in a launch).
  Status upload(const void* host, size_t bytes) {
    QD_RETURN_IF_ERROR(alloc(bytes));
    if (bytes) QD_CUDA_TRY(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice));
    return Status::ok();
  }
  template <typename T>
  Status upload(const std::vector<T>& v) {
    return upload(v.data(), v.size() * sizeof(T));
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  void* get() const { return p_; }
  template <typename T>
  const T* get() const {
    return static_cast<const T*>(p_);
  }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace qd::cuda
