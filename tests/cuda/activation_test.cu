// The fused epilogues' fast activations against the reference's arithmetic (activation.cuh).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "backends/cuda/kernels/activation.cuh"
#include "cuda/gpu_test.h"

namespace qd::cuda {
namespace {

struct SiluSweep {
  unsigned worst_bits;      // the largest |fast - exact| / silu_fast_error (a non-negative float's bits order as integers)
  unsigned worst_x_bits;    // an x that reaches it (the last to raise it)
  unsigned long long outside;  // values with |exact| < 1e-30 whose fast value is further than 1e-30 from it
};

// Every 5th float bit pattern (both signs, NaN and infinities skipped): apply_act's SiLU against silu_exact.
__global__ void silu_sweep_kernel(SiluSweep* out) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x * 5;
  for (unsigned long long i = (blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x) * 5;
       i < (1ull << 32); i += stride) {
    const float x = __uint_as_float(static_cast<unsigned>(i));
    if (!isfinite(x)) continue;
    const float f = apply_act(x, Act::kSilu, 0.f, 0.f), e = silu_exact(x);
    const float diff = fabsf(f - e);
    if (fabsf(e) >= 1e-30f) {
      const unsigned bits = __float_as_uint(diff / silu_fast_error(x, f));
      if (bits > atomicMax(&out->worst_bits, bits)) out->worst_x_bits = static_cast<unsigned>(i);
    } else if (diff > 1e-30f) {
      atomicAdd(&out->outside, 1ull);
    }
  }
}

TEST(CudaActivation, FastSiluWithinItsErrorBound) {
  SKIP_WITHOUT_GPU();
  SiluSweep* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, sizeof(SiluSweep)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, sizeof(SiluSweep)), cudaSuccess);
  silu_sweep_kernel<<<1024, 256>>>(d);
  SiluSweep h{};
  ASSERT_EQ(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  float worst = 0.f, x = 0.f;
  std::memcpy(&worst, &h.worst_bits, sizeof(float));
  std::memcpy(&x, &h.worst_x_bits, sizeof(float));
  std::printf("fast SiLU: largest error %.3g of silu_fast_error's bound (at x = %.9g), %llu tiny values outside\n",
              worst, x, h.outside);
  EXPECT_GT(worst, 0.f) << "the sweep ran";
  EXPECT_LE(worst, 1.f);
  EXPECT_EQ(h.outside, 0u);
}

}  // namespace
}  // namespace qd::cuda
