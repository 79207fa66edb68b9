// Activation functions applied in fused epilogues (fp32 math; SiLU and Sigmoid with the fast exp and division,
// a few ulp from the reference's, as the epilogue's instruction count bounds the thin layers).
#pragma once

#include "backends/cuda/kernels/conv.h"

namespace qd::cuda {

__device__ __forceinline__ float apply_act(float v, Act act, float a, float b) {
  switch (act) {
    case Act::kNone: return v;
    case Act::kRelu: return fmaxf(v, 0.f);
    case Act::kSilu: return __fdividef(v, 1.f + __expf(-v));
    case Act::kSigmoid: return __fdividef(1.f, 1.f + __expf(-v));
    case Act::kLeakyRelu: return v >= 0.f ? v : v * a;
    case Act::kHardSwish: return v * fminf(fmaxf(v * (1.f / 6.f) + 0.5f, 0.f), 1.f);
    case Act::kHardSigmoid: return fminf(fmaxf(v * a + b, 0.f), 1.f);
    case Act::kClip: return v < a ? a : (v > b ? b : v);  // NaN passes through, as in the reference
  }
  return v;
}

}  // namespace qd::cuda
