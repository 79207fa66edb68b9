// The fused epilogues' fast activations against the reference's arithmetic (activation.cuh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "backends/cuda/kernels/activation.cuh"
#include "cuda/gpu_test.h"

namespace qd::cuda {
namespace {

struct SiluSweep {
  unsigned worst_bits;      // the largest |fast - exact| / its error bound (a non-negative float's bits order as integers)
  unsigned worst_x_bits;    // an x that reaches it (the last to raise it)
  unsigned tanh_bits;       // kTanh: the largest |fast - exact| / (|x| / 2), the approximate tanh's absolute error
  unsigned long long outside;  // the rest (|exact| < 1e-30; silu_tanh: |x|) whose fast value is over 1e-30 off
};

// Every 5th float bit pattern (both signs, NaN and infinities skipped): a fast SiLU (kTanh: silu_tanh, the epilogues'
// usual one; else silu_sigmoid, bit-exact plans') against silu_exact.
template <bool kTanh>
__global__ void silu_sweep_kernel(SiluSweep* out) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x * 5;
  for (unsigned long long i = (blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x) * 5;
       i < (1ull << 32); i += stride) {
    const float x = __uint_as_float(static_cast<unsigned>(i));
    if (!isfinite(x)) continue;
    const float f = kTanh ? silu_tanh(x) : silu_sigmoid(x), e = silu_exact(x);
    const float diff = fabsf(f - e);
    // silu_fast_error is relative, silu_tanh_error absolute (in x).
    if (fabsf(kTanh ? x : e) >= 1e-30f) {
      const unsigned bits = __float_as_uint(diff / (kTanh ? silu_tanh_error(x, f) : silu_fast_error(x, f)));
      if (bits > atomicMax(&out->worst_bits, bits)) out->worst_x_bits = static_cast<unsigned>(i);
      if (kTanh) atomicMax(&out->tanh_bits, __float_as_uint(diff / (0.5f * fabsf(x))));
    } else if (diff > 1e-30f) {
      atomicAdd(&out->outside, 1ull);
    }
  }
}

template <bool kTanh>
void sweep_silu(const char* name) {
  SiluSweep* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, sizeof(SiluSweep)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, sizeof(SiluSweep)), cudaSuccess);
  silu_sweep_kernel<kTanh><<<1024, 256>>>(d);
  SiluSweep h{};
  ASSERT_EQ(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  float worst = 0.f, x = 0.f, tanh_err = 0.f;
  std::memcpy(&worst, &h.worst_bits, sizeof(float));
  std::memcpy(&x, &h.worst_x_bits, sizeof(float));
  std::memcpy(&tanh_err, &h.tanh_bits, sizeof(float));
  std::printf("%s: largest error %.3g of its bound (at x = %.9g), %llu tiny values outside", name, worst, x, h.outside);
  if (kTanh) std::printf("; the approximate tanh's largest absolute error %.3g (2^%.2f)", tanh_err, std::log2(tanh_err));
  std::printf("\n");
  EXPECT_GT(worst, 0.f) << "the sweep ran";
  EXPECT_LE(worst, 1.f);
  EXPECT_EQ(h.outside, 0u);
}

TEST(CudaActivation, SigmoidSiluWithinItsErrorBound) {
  SKIP_WITHOUT_GPU();
  sweep_silu<false>("silu_sigmoid");
}

TEST(CudaActivation, TanhSiluWithinItsErrorBound) {
  SKIP_WITHOUT_GPU();
  sweep_silu<true>("silu_tanh");
}

}  // namespace
}  // namespace qd::cuda
