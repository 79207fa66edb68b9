// Activation functions applied in fused epilogues (fp32 math).
#pragma once

#include "backends/cuda/kernels/conv.h"

namespace qd::cuda {

__device__ __forceinline__ float apply_act(float v, Act act, float a, float b) {
  switch (act) {
    case Act::kNone: return v;
    case Act::kRelu: return fmaxf(v, 0.f);
    case Act::kSilu: return v / (1.f + __expf(-v));
    case Act::kSigmoid: return 1.f / (1.f + __expf(-v));
    case Act::kLeakyRelu: return v >= 0.f ? v : v * a;
    case Act::kHardSwish: return v * fminf(fmaxf(v * (1.f / 6.f) + 0.5f, 0.f), 1.f);
    case Act::kHardSigmoid: return fminf(fmaxf(v * a + b, 0.f), 1.f);
    case Act::kClip: return v < a ? a : (v > b ? b : v);  // NaN passes through, as in the reference
  }
  return v;
}

}  // namespace qd::cuda
