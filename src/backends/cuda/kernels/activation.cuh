// Activation functions applied in fused epilogues (fp32 math). SiLU comes two ways: from the hardware's approximate
// tanh (the tensor-core convs' epilogues, which it bounded in the thin layers), or from its approximate exp2 and
// reciprocal, a few ulp from the reference's (fp32 convs; bit-exact plans' tie checks).
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

// SiLU on one instruction of the 16-per-clock-per-SM pipe: x sigmoid(x) = h + h tanh(h) with h = x / 2, from the
// hardware's approximate tanh. sigmoid_fast's SiLU issues two there (exp2 and reciprocal), which bounded the thin INT8
// layers' epilogues. Its error is absolute (silu_tanh_error: under 8.1e-6 |x| / 2 as measured), a few ten-thousandths
// of an int8 output's step: the epilogues' SiLU outside bit-exact plans (+-1 LSB by the contract; more values than
// with silu_sigmoid land on the other side of a rounding tie, yet the detector's mAP is the same with either).
// silu_tanh_half(h) is silu_tanh(2 h): for epilogues that compute h = v / 2 in the FMA that makes v (ChannelPair).
__device__ __forceinline__ float silu_tanh_half(float h) {
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(h));
  return fmaf(h, t, h);
}
__device__ __forceinline__ float silu_tanh(float v) { return silu_tanh_half(0.5f * v); }

// SiLU within silu_fast_error of the reference's (relative): what bit-exact plans' epilogues compute before they
// check a value's distance from a rounding tie (conv_igemm_kernels.cuh's SiluTies).
__device__ __forceinline__ float silu_sigmoid(float v) { return v * sigmoid_fast(v); }

// kFast: SiLU from the approximate tanh (the fp16 and INT8 tensor-core convs' epilogues), else from exp2 and a
// reciprocal, a relative error (fp32 convs, whose plans are the accurate ones). Sigmoid from exp2 and a reciprocal
// either way: the detection heads' Sigmoid from the tanh (its error absolute, 4e-6) made YOLOv5s no faster.
// kGelu: whether GELU is among the cases. Only fp16 linear layers fuse it (lower_linear); leaving its erff out of the
// INT8 epilogues keeps their code as it was without it (with it, YOLOv5s INT8 ran 3.5% slower at batch 1).
template <bool kFast = true, bool kGelu = true>
__device__ __forceinline__ float apply_act(float v, Act act, float a, float b) {
  switch (act) {
    case Act::kNone: return v;
    case Act::kRelu: return fmaxf(v, 0.f);
    case Act::kSilu: return kFast ? silu_tanh(v) : silu_sigmoid(v);
    case Act::kSigmoid: return sigmoid_fast(v);
    case Act::kLeakyRelu: return v >= 0.f ? v : v * a;
    case Act::kHardSwish: return v * fminf(fmaxf(v * (1.f / 6.f) + 0.5f, 0.f), 1.f);
    case Act::kHardSigmoid: return fminf(fmaxf(v * a + b, 0.f), 1.f);
    case Act::kClip: return v < a ? a : (v > b ? b : v);  // NaN passes through, as in the reference
    case Act::kGelu:
      if constexpr (kGelu) return 0.5f * v * (1.f + erff(v * 0.70710678f));  // the generic Gelu kernel's
      return v;
  }
  return v;
}

// SiLU as the reference backend computes it: its Sigmoid node in double, rounded to float, then its Mul node in
// float. The INT8 epilogues use it where the fast SiLU's value lies so close to a rounding tie of the output's scale
// that the two could quantize to different integers (SiluTies in conv_igemm_kernels.cuh); that keeps INT8 tensors
// identical to the reference's, instead of differing by one code wherever a value lands near a tie, which every later
// layer then reads.
__device__ __forceinline__ float silu_exact(float x) {
  return __fmul_rn(x, static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(x)))));
}

// A bound on |silu_sigmoid's f - silu_exact(x)|: |f| (6e-7 + 7e-8 |x|), the reciprocal's and the product's
// roundings and the two of silu_exact in the constant, and the error of the exp2, which grows with |x| (its argument
// x log2(e) rounded to float: 1.9e-6 |f| measured at x = -29.7). Holds where |silu_exact(x)| >= 1e-30
// (below, both are under 1e-30 apart); checked on every 5th float in tests/cuda
// (CudaActivation.SigmoidSiluWithinItsErrorBound).
__host__ __device__ __forceinline__ float silu_fast_error(float x, float f) {
  return fabsf(f) * fmaf(fabsf(x), 7e-8f, 6e-7f);
}

// A bound on |silu_tanh's f - silu_exact(x)|: |x| / 2 times a bound on the approximate tanh's absolute error
// (kTanhError = 2^-16: PTX promises only 2^-11; 8.0e-6, 2^-16.9, measured on an H100 over every 5th float), and the
// product's and silu_exact's roundings. Checked on every 5th float in tests/cuda
// (CudaActivation.TanhSiluWithinItsErrorBound).
constexpr float kTanhError = 1.f / 65536.f;
__host__ __device__ __forceinline__ float silu_tanh_error(float x, float f) {
  return fmaf(fabsf(x), 0.5f * kTanhError, fabsf(f) * 3e-7f);
}

}  // namespace qd::cuda
