// Kernels over rows of channels-last activations (tokens of C values), the layers between the linear layers of
// ConvNeXt- and InternImage-style blocks: the residual Add and LayerNormalization over the last axis as one pass, its
// result written as fp16 rows for the fp16 linear layers that read it (and/or fp32 for other readers).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace qd::cuda {

// The widest row add_layer_norm_rows takes (values held in registers, one warp per row).
constexpr int kRowNormMaxC = 1024;

struct RowNormIo {
  const float* x = nullptr;      // [rows, C]
  const __half* x16 = nullptr;   // or x as fp16 rows (the NHWC fp16 output of a conv, read as its pixels' rows)
  const float* r = nullptr;      // optional [rows, C]: the normalized row is x + r (a residual Add)
  const float* gamma = nullptr;  // [C]
  const float* beta = nullptr;   // optional [C]
  float* sum = nullptr;          // optional: x + r, for the Add's other readers
  __half* y16 = nullptr;         // optional: the normalized rows, fp16
  float* y32 = nullptr;          // optional: the same in fp32
};

// LayerNormalization over the last axis (C a multiple of 4, at most kRowNormMaxC) of x or x + r, as the generic
// kernel computes it (mean, then the variance of the deviations, fp32), in one read of the rows.
Status add_layer_norm_rows(const RowNormIo& io, int64_t rows, int C, float eps, cudaStream_t s);

}  // namespace qd::cuda
