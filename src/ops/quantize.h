// The INT8 arithmetic of QuantizeLinear / DequantizeLinear, shared with the quantizer and the backends so that every
// part of qdeploy rounds the same way: q = saturate(round_half_even(x / scale) + zero_point).
#pragma once

#include <cmath>
#include <cstdint>

namespace qd::ops {

// Rounds to the nearest integer, ties to even (2.5 -> 2, 3.5 -> 4, -2.5 -> -2), independent of the FPU rounding mode.
// NaN stays NaN; infinities stay infinite.
inline double round_half_even(double v) {
  const double r = std::floor(v);
  const double diff = v - r;
  if (diff > 0.5) return r + 1;
  if (diff == 0.5) return std::fmod(r, 2.0) == 0 ? r : r + 1;
  return r;
}

// saturate(round_half_even(q) + zero_point) into [lo, hi], where q = x / scale was already computed (in float32 for
// float32 tensors, as ONNX Runtime and the GPU kernels do). NaN quantizes to the zero point.
inline int32_t quantize_scaled(double q, int32_t zero_point, int32_t lo, int32_t hi) {
  if (std::isnan(q)) return zero_point < lo ? lo : (zero_point > hi ? hi : zero_point);
  const double v = round_half_even(q) + zero_point;
  if (v <= lo) return lo;
  if (v >= hi) return hi;
  return static_cast<int32_t>(v);
}

// One float32 value to int8 (lo=-128, hi=127) or uint8 (0, 255). The scale must be positive and finite.
inline int32_t quantize_value(float x, float scale, int32_t zero_point, int32_t lo, int32_t hi) {
  return quantize_scaled(static_cast<double>(x / scale), zero_point, lo, hi);
}

inline float dequantize_value(int32_t q, float scale, int32_t zero_point) {
  return static_cast<float>(static_cast<int64_t>(q) - zero_point) * scale;
}

}  // namespace qd::ops
