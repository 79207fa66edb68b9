// The fused epilogues' fast activations and their int8 quantization against the reference's arithmetic
// (activation.cuh, requantize.cuh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cuda/kernels/activation.cuh"
#include "backends/cuda/kernels/requantize.cuh"
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

// quantize_int8_biased (the epilogues' two FMAs) of v[i] with scale[i], as the integer.
__global__ void quantize_kernel(const float* v, const float* scale, int n, int* q) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) q[i] = static_cast<int>(int8_value(quantize_int8_biased(v[i], int8_rcp255(scale[i]))));
}

// Against the INT8 contract's round_half_even(v / scale) saturated to [-128, 127] (in double): within 1 everywhere,
// and equal wherever v / scale is more than 1e-4 from a half-integer (the two roundings, of 1 / (255 scale) and of the
// first FMA's result, move it by under 5e-5); a third of the values sit next to such ties by construction. Saturation,
// infinities and NaN (-128) exact.
TEST(CudaRequantize, TwoFmaQuantizationWithinOneLsb) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> steps(-300.0, 300.0);
  std::vector<float> v, scale;
  for (const float s : {1e-7f, 3.3e-4f, 0.0213f, 0.05f, 0.1917f, 1.f, 7.5f}) {
    for (int i = 0; i < 200000; ++i) {
      const double d = i % 3 == 0 ? std::floor(steps(rng)) + 0.5 : steps(rng);  // a third on ties
      v.push_back(static_cast<float>(d * s));
      scale.push_back(s);
    }
    for (const float x : {0.f, -0.f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          127.5f * s, -128.5f * s, 126.5f * s, -127.5f * s}) {
      v.push_back(x);
      scale.push_back(s);
    }
  }
  const int n = static_cast<int>(v.size());
  float *dv = nullptr, *ds = nullptr;
  int* dq = nullptr;
  ASSERT_EQ(cudaMalloc(&dv, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ds, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dq, n * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv, v.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ds, scale.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  quantize_kernel<<<(n + 255) / 256, 256>>>(dv, ds, n, dq);
  std::vector<int> q(n);
  ASSERT_EQ(cudaMemcpy(q.data(), dq, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dv);
  cudaFree(ds);
  cudaFree(dq);
  int64_t apart = 0, apart_far = 0, beyond = 0, specials_wrong = 0;
  for (int i = 0; i < n; ++i) {
    const double d = static_cast<double>(v[i]) / scale[i];
    const int want = std::isnan(d) ? -128 : static_cast<int>(std::fmin(127.0, std::fmax(-128.0, std::nearbyint(d))));
    const bool near_tie = std::fabs(d - std::floor(d) - 0.5) < 1e-4;
    apart += q[i] != want;
    apart_far += !near_tie && q[i] != want;
    beyond += std::abs(q[i] - want) > 1;
    specials_wrong += (std::isnan(d) || std::fabs(d) > 129.0) && q[i] != want;
  }
  std::printf("quantize_int8_biased: %lld of %d values differ from round_half_even(v / scale), all next to a tie\n",
              static_cast<long long>(apart), n);
  EXPECT_EQ(beyond, 0);
  EXPECT_EQ(specials_wrong, 0);
  EXPECT_EQ(apart_far, 0);
}

}  // namespace
}  // namespace qd::cuda
