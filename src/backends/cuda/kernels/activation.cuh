// Activation functions applied in fused epilogues (fp32 math; SiLU and Sigmoid with the fast exp and division,
// a few ulp from the reference's, as the epilogue's instruction count bounds the thin layers).
#pragma once

#include "backends/cuda/kernels/conv.h"

namespace qd::cuda {

// 1 / (1 + e^-v) from the hardware's approximate exp2 and reciprocal (1 ulp, 2 ulp), flushing denormals: one
// instruction each, where __expf and __fdividef add range fixups (the SiLU epilogues are bound by instruction issue).
__device__ __forceinline__ float sigmoid_fast(float v) {
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v * -1.4426950408889634f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
  return r;
}

__device__ __forceinline__ float apply_act(float v, Act act, float a, float b) {
  switch (act) {
    case Act::kNone: return v;
    case Act::kRelu: return fmaxf(v, 0.f);
    case Act::kSilu: return v * sigmoid_fast(v);
    case Act::kSigmoid: return sigmoid_fast(v);
    case Act::kLeakyRelu: return v >= 0.f ? v : v * a;
    case Act::kHardSwish: return v * fminf(fmaxf(v * (1.f / 6.f) + 0.5f, 0.f), 1.f);
    case Act::kHardSigmoid: return fminf(fmaxf(v * a + b, 0.f), 1.f);
    case Act::kClip: return v < a ? a : (v > b ? b : v);  // NaN passes through, as in the reference
  }
  return v;
}

// SiLU as the reference backend computes it: its Sigmoid node in double, rounded to float, then its Mul node in
// float. The INT8 epilogues use it where the fast SiLU's value lies so close to a rounding tie of the output's scale
// that the two could quantize to different integers (SiluTies in conv_igemm.cu); that keeps INT8 tensors
// identical to the reference's, instead of differing by one code wherever a value lands near a tie, which every later
// layer then reads.
__device__ __forceinline__ float silu_exact(float x) {
  return __fmul_rn(x, static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(x)))));
}

// A bound on |apply_act's fast SiLU f - silu_exact(x)|: |f| (6e-7 + 7e-8 |x|), the reciprocal's and the product's
// roundings and the two of silu_exact in the constant, and the error of the exp2, which grows with |x| (its argument
// x log2(e) rounded to float: 1.9e-6 |f| measured at x = -29.7). Holds where |silu_exact(x)| >= 1e-30
// (below, both are under 1e-30 apart); checked on every 5th float in tests/cuda
// (CudaActivation.FastSiluWithinItsErrorBound).
__host__ __device__ __forceinline__ float silu_fast_error(float x, float f) {
  return fabsf(f) * fmaf(fabsf(x), 7e-8f, 6e-7f);
}

}  // namespace qd::cuda
