// The INT8 contract's quantization, q = saturate(round_half_even(v / scale)), bit-exact with the reference's fp32
// division but without a division per element: v * (1 / scale) lies within 5e-5 of the rounded quotient (relative
// error about 2^-23, |quotient| < 256 where it matters), so it rounds to the same integer unless it is within 1e-4 of
// a half-integer; there, and for large, infinite or NaN values, the exact division decides. Used by the quantize
// passes (nhwc.cu), about a third faster than a division per element.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qd::cuda {

__device__ __forceinline__ int quantize_int8(float v, float scale) {
  float d = v * __frcp_rn(scale);  // the reciprocal is the same for every element: the compiler computes it once
  if (!(fabsf(d) < 256.f) || fabsf(d - floorf(d) - 0.5f) < 1e-4f) d = __fdiv_rn(v, scale);
  return max(-128, min(127, __float2int_rn(d)));
}

// round_half_even(v / scale) saturated to [-128, 127], without a branch (two instructions), as the float
// 1.5 * 2^23 + q, whose low byte is then q's two's complement (pack_int8_biased): the first FMA maps v / scale + 128
// onto [0, 1] in steps of 1 / 255 with the hardware's saturation (fma.rn.sat: both ends clamped, NaN to 0, so -128),
// the second scales it back and adds 1.5 * 2^23 - 128, which rounds the product to an integer in the low mantissa
// bits. r255 = int8_rcp255(scale). The two roundings (r255, and u to 24 bits) move v / scale by under 5e-5, so this
// differs from quantize_int8 only where v / scale lies that close to a half-integer (within +-1 LSB, not
// bit-exact). Two instructions where an FMA and two min/max took three, of the quad epilogue's dozen per value.
constexpr float kRoundMagic = 12582912.f;
__device__ __forceinline__ float int8_rcp255(float scale) { return __frcp_rn(255.f * scale); }
__device__ __forceinline__ float quantize_int8_biased(float v, float r255) {
  float u;
  asm("fma.rn.sat.f32 %0, %1, %2, %3;" : "=f"(u) : "f"(v), "f"(r255), "f"(128.f / 255.f));
  return fmaf(u, 255.f, kRoundMagic - 128.f);
}
// The integer of a quantize_int8_biased value, and four of them packed into a word (first in the low byte).
__device__ __forceinline__ float int8_value(float biased) { return biased - kRoundMagic; }
__device__ __forceinline__ uint32_t pack_int8_biased(float a, float b, float c, float d) {
  const uint32_t ab = __byte_perm(__float_as_uint(a), __float_as_uint(b), 0x0040);
  const uint32_t cd = __byte_perm(__float_as_uint(c), __float_as_uint(d), 0x0040);
  return __byte_perm(ab, cd, 0x5410);
}

}  // namespace qd::cuda
