// A chain of elementwise ops fused into one pass: x -> op1 -> op2 -> ... -> y, each binary op taking a constant
// (a scalar, or a tensor that broadcasts to x; see EwOperand). Replaces one kernel and one round trip through memory
// per op (e.g. YOLO's box decoding: Mul 2, Add grid, Mul stride, Mul anchors).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/fast_div.h"
#include "core/dtype.h"
#include "core/status.h"

namespace qd::cuda {

enum class EwOp : uint8_t {
  kRelu, kSigmoid, kTanh, kExp, kNeg, kAbs, kSqrt, kReciprocal, kHardSigmoid, kHardSwish, kLeakyRelu, kClip,
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin,  // x op c
  kRSub, kRDiv, kRPow,                       // c op x
};

constexpr int kMaxEwSteps = 16;
constexpr int kMaxEwOperands = 8;

// A constant broadcast to x: element i of x reads p[sum_t (i / div[t]) % mod[t] * mul[t]], one term per run of
// dims the constant does not broadcast over (at most two: e.g. YOLO's anchors [1, 3, 1, 1, 2] over [N, 3, H, W, 2];
// a constant over trailing dims only, [H, W, 2], is the single term i % numel).
struct EwOperand {
  const float* p = nullptr;
  int64_t div[2] = {1, 1}, mod[2] = {1, 1}, mul[2] = {0, 0};
  // For 32-bit indices (the usual case): div[t] and mod[t] as multiply-high magic numbers and shifts (0: a divisor
  // of 1), so that a term costs a few instructions instead of two integer divisions. set_fast_divisors fills them
  // from div and mod, once they are final.
  uint32_t div_magic[2] = {0, 0}, mod_magic[2] = {0, 0};
  uint8_t div_shift[2] = {0, 0}, mod_shift[2] = {0, 0};
};
inline void set_fast_divisors(EwOperand* o) {
  for (int t = 0; t < 2; ++t) {
    fast_divisor(o->div[t], &o->div_magic[t], &o->div_shift[t]);
    fast_divisor(o->mod[t], &o->mod_magic[t], &o->mod_shift[t]);
  }
}

struct EwStep {
  EwOp op = EwOp::kRelu;
  int16_t operand = -1;  // index into EwProgram::operand; -1: the immediate `a`
  float a = 0.f, b = 0.f;  // immediate constant; LeakyRelu alpha; HardSigmoid alpha/beta; Clip min/max
};

struct EwProgram {
  int steps = 0;
  EwStep step[kMaxEwSteps];
  EwOperand operand[kMaxEwOperands];
};

// x and y are fp32 with n elements (y may alias x).
Status launch_eltwise_chain(const float* x, float* y, int64_t n, const EwProgram& prog, cudaStream_t s);

// A Concat along the last axis whose inputs are all slices of one tensor x along its last axis, each slice through
// its own elementwise chain (possibly empty): YOLO's box decoding, Concat(xy(s[..., 0:2]), wh(s[..., 2:4]),
// s[..., 4:]), as one pass. Rows are the flattened leading dims. Output row r of batch b = r / rows_per_batch goes
// to y + b * out_batch_stride + out_offset + (r % rows_per_batch) * out_cols, so the result can land in a slice of
// a later Concat along axis 1 (the levels of a detection head) instead of being copied there.
// src_hw > 0: x is stored transposed, as a conv writes a detection head before its Reshape [N, A, C, H, W] and
// Transpose (0, 1, 3, 4, 2): row r = (n * A + a) * src_hw + pixel, column c is at ((n * A + a) * C + c) * src_hw +
// pixel (C = src_cols <= kMaxSliceTransposedCols, and slice_concat_transposed_fits). The kernel then transposes
// through shared memory.
constexpr int kMaxSliceSegments = 4;
constexpr int kMaxSliceTransposedCols = 256;
// Whether a transposed source's tile and the tile's output rows fit the kernel's shared memory (96 KiB).
bool slice_concat_transposed_fits(int src_cols, int out_cols);
// Lets the kernels take that much shared memory; before the first launch (CudaEngine::init calls it).
Status slice_concat_init();
struct SliceSegment {
  int src_start = 0, len = 0, out_start = 0;  // columns [src_start, +len) of x -> [out_start, +len) of y
  EwProgram prog;  // operands index the slice's own elements (row * len + column - out_start)
};
struct SliceConcatParams {
  int64_t rows = 0, rows_per_batch = 0, out_batch_stride = 0, out_offset = 0;
  int src_cols = 0, out_cols = 0, segments = 0;
  int src_hw = 0;
  SliceSegment seg[kMaxSliceSegments];
};
// x: fp32, or fp16 when transposed (src_hw > 0); y: fp32 or fp16.
Status launch_slice_concat(const void* x, DType xt, void* y, DType yt, const SliceConcatParams& p, cudaStream_t s);

}  // namespace qd::cuda
