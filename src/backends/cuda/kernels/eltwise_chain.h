// A chain of elementwise ops fused into one pass: x -> op1 -> op2 -> ... -> y, each binary op taking a constant
// (a scalar, or a tensor that broadcasts over leading dims only, read at index i % numel). Replaces one kernel and
// one round trip through memory per op (e.g. YOLO's box decoding: Mul 2, Add grid, Mul stride).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace qd::cuda {

enum class EwOp : uint8_t {
  kRelu, kSigmoid, kTanh, kExp, kNeg, kAbs, kSqrt, kReciprocal, kHardSigmoid, kHardSwish, kLeakyRelu, kClip,
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin,  // x op c
  kRSub, kRDiv, kRPow,                       // c op x
};

constexpr int kMaxEwSteps = 16;

struct EwStep {
  EwOp op = EwOp::kRelu;
  int16_t operand = -1;  // index into EwProgram::operands; -1: the immediate `a`
  float a = 0.f, b = 0.f;  // immediate constant; LeakyRelu alpha; HardSigmoid alpha/beta; Clip min/max
};

struct EwProgram {
  int steps = 0;
  EwStep step[kMaxEwSteps];
  const float* operand[kMaxEwSteps] = {};
  int64_t operand_numel[kMaxEwSteps] = {};
};

// x and y are fp32 with n elements (y may alias x).
Status launch_eltwise_chain(const float* x, float* y, int64_t n, const EwProgram& prog, cudaStream_t s);

}  // namespace qd::cuda
