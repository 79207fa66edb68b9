// Kernels of the NHWC fp16 fast path that are not convolutions: layout/precision conversions at its borders, and the
// data-movement ops YOLO-style networks put between convolutions (MaxPool, nearest 2x Resize, Concat).
// An NHWC tensor is [N, H, W, ld] with its C channels at [coff, coff + C) of each pixel's ld values.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/dtype.h"
#include "core/status.h"

namespace qd::cuda {

struct NhwcView {
  void* data = nullptr;  // __half*
  int ld = 0, coff = 0;
};

// NCHW fp32 or fp16 -> NHWC fp16 with channels C..ld-1 of each pixel set to zero.
Status nchw_to_nhwc(const void* x, DType x_type, NhwcView y, int N, int C, int H, int W, cudaStream_t s);
// Any tensor's memory (convert_tensor, nchw_to_s2d): NCHW (ld, coff unused) or NHWC [N, H, W, ld] with its channels
// at [coff, coff + C), fp32, fp16 or int8 (the value q * scale).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  bool nhwc = false;
  int ld = 0, coff = 0;
  float scale = 0.f;
};
// y = x element by element across dtypes (to int8: the activation rule with y.scale; int8 to int8 with equal scales
// copies) and layouts, over [N, C, HW]; an NHWC y is a whole tensor (coff 0), its channels C..ld-1 written zero.
// A tensor that is not 4-d converts as N = 1, C = numel, HW = 1.
Status convert_tensor(const TensorView& x, const TensorView& y, int N, int C, int HW, cudaStream_t s);
// Space-to-depth for a stride-2 stem conv (lower.cpp): x [N, C, H, W] (H, W even; NCHW, or NHWC as a caller's input
// binding) -> NHWC [N, H/2, W/2, ld] whose channel (dy * 2 + dx) * C + c is x[n, c, 2y + dy, 2x + dx], channels
// 4C..ld-1 zero. fp16, or int8 quantized with `scale` as quantize_nhwc_i8 does (y.ld a multiple of 16); an int8 x
// (scale x.scale) is copied to int8 (the same scale) or dequantized.
Status nchw_to_s2d(const TensorView& x, NhwcView y, DType y_type, float scale, int N, int C, int H, int W,
                   cudaStream_t s);
// NHWC fp16 -> NCHW fp32 or fp16.
Status nhwc_to_nchw(NhwcView x, void* y, DType y_type, int N, int C, int H, int W, cudaStream_t s);

struct PoolParams {
  int N, C, H, W, OH, OW, kh, kw, sh, sw, ph, pw;
};
Status maxpool_nhwc(NhwcView x, NhwcView y, const PoolParams& p, cudaStream_t s);
// The same on int8 NHWC tensors: max-pooling commutes with a shared per-tensor quantization (quant/int8.h), so pooling
// the quantized values gives the quantized pooled values exactly.
Status maxpool_nhwc_i8(NhwcView x, NhwcView y, const PoolParams& p, cudaStream_t s);
// A chain of `count` (<= kMaxPoolChain) max pools with the same odd kh x kw window, stride 1 and (k - 1) / 2
// padding, each pooling the one before (YOLOv5's SPPF), in one pass: a block keeps one image's plane of 16 bytes of
// channels (8 fp16, or 16 int8 with `int8`) in shared memory and pools it there. Where maxpool_chain_fits (C a
// multiple of 16, the plane small enough); ld and coff multiples of 8 (fp16) or 16 (int8).
constexpr int kMaxPoolChain = 4;
bool maxpool_chain_fits(int C, int H, int W);
Status maxpool_chain_nhwc(NhwcView x, const NhwcView* outs, int count, int N, int C, int H, int W, int kh, int kw,
                          bool int8, cudaStream_t s);
// Nearest-neighbour upsampling by integer factors (ONNX Resize, asymmetric coordinates, floor rounding).
Status upsample_nearest_nhwc(NhwcView x, NhwcView y, int N, int C, int H, int W, int fh, int fw, cudaStream_t s);
// The same on int8 NHWC tensors (a copy, so exact for any quantization): C, ld and coff even.
Status upsample_nearest_nhwc_i8(NhwcView x, NhwcView y, int N, int C, int H, int W, int fh, int fw, cudaStream_t s);
// Copies x's C channels into y's channel slice (a Concat input not written in place by its producer).
Status copy_channels_nhwc(NhwcView x, NhwcView y, int N, int C, int H, int W, cudaStream_t s);

// The INT8 contract's quantization of a conv input, done once per tensor: q = saturate(round_half_even(x / scale))
// into an NHWC int8 tensor (C channels of q.ld, the rest zero), and dq = q * scale, what every other consumer of the
// tensor reads, in x's own layout: NHWC fp16 (x_nhwc) or NCHW fp32; dq nullptr: not written (no such reader).
Status quantize_nhwc_i8(const void* x, bool x_nhwc, NhwcView x_view, NhwcView q, void* dq, NhwcView dq_view, int N,
                        int C, int H, int W, float scale, cudaStream_t s);

}  // namespace qd::cuda
