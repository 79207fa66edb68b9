// Shared by the GPU tests: skipping where there is no GPU (CI), and a fixture with a CUDA stream.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "backends/cuda/device.h"

namespace qd::test {

// True when a CUDA device is visible (asked once).
inline bool has_gpu() {
  static const bool gpu = cuda::device_count() > 0;
  return gpu;
}

}  // namespace qd::test

#define SKIP_WITHOUT_GPU() \
  if (!::qd::test::has_gpu()) GTEST_SKIP() << "no CUDA GPU on this machine; GPU tests run on the GPU machine (scripts/gpu-check.sh)"

namespace qd::test {

// A test with its own stream (stream_), skipped without a GPU.
class GpuStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

}  // namespace qd::test
