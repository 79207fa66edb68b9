// Shared by the GPU tests: skipping where there is no GPU (CI), and a fixture with a CUDA stream.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "backends/cuda/cuda_engine.h"
#include "backends/cuda/device.h"
#include "runtime/int8_sources.h"

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

namespace qd::test {

// A CUDA engine of graph g built with opt, INT8 ones with the scales load_int8_options reads (opt.calib_cache), as
// build_engine loads them for a model file; null, with the test failed, where that or the build fails.
inline std::unique_ptr<cuda::CudaEngine> cuda_engine_of(Graph g, const BuildOptions& opt) {
  Int8Options int8;
  if (opt.precision == Precision::kInt8) {
    auto o = load_int8_options(g, opt);
    EXPECT_TRUE(o) << o.status().to_string();
    if (!o) return nullptr;
    int8 = std::move(*o);
  }
  auto e = cuda::CudaEngine::create(std::move(g), opt, {}, std::move(int8));
  EXPECT_TRUE(e) << e.status().to_string();
  return e ? std::move(*e) : nullptr;
}

}  // namespace qd::test
