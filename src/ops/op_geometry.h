// The resolved geometry of ops whose attributes and constant inputs take work to interpret: clamped Slice bounds,
// Pad maps, Resize taps, Reduce axes, Softmax/LayerNormalization lanes, MatMul batching, Transpose's perm. The
// reference kernels and the other backends (CUDA) call the same functions, so every backend reads a node the same
// way. Each function is defined in its op's file. (Conv/pool window geometry is in window.h.)
#pragma once

#include <vector>

#include "ops/op.h"

namespace qd::ops {

// ---- Slice (slice.cpp) ----
struct SliceGeom {
  Shape out;
  std::vector<int64_t> start, step;  // per input dim
};
Expected<SliceGeom> slice_geom(const InferCtx& c);

// ---- Transpose (transpose.cpp): perm, defaulting to reversed dims ----
Expected<std::vector<int64_t>> transpose_perm(const InferCtx& c);

// ---- DepthToSpace / SpaceToDepth (transpose.cpp): a strided copy of the input seen as a 6-d `view`; output dim i
// walks view dim perm[i] ----
struct PermutedView {
  Shape view;
  std::vector<int> perm;
};
Expected<PermutedView> depth_to_space_view(const InferCtx& c);
Expected<PermutedView> space_to_depth_view(const InferCtx& c);

// ---- Pad (pad.cpp) ----
enum class PadMode { kConstant, kReflect, kEdge, kWrap };
struct PadGeom {
  PadMode mode;
  std::vector<int64_t> begin;  // per input dim
  Shape out;
};
Expected<PadGeom> pad_geom(const InferCtx& c);
// Input coordinate for output coordinate o along an axis of size n; -1 for the constant.
int64_t pad_map_coord(int64_t o, int64_t begin, int64_t n, PadMode mode);

// ---- Resize / Upsample (resize.cpp) ----
enum class ResizeMode { kNearest, kLinear, kCubic };
enum class ResizeCoord {
  kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn, kTfCropAndResize, kHalfPixelSymmetric
};
// kLegacy: Upsample and Resize-10 (as ONNX Runtime): floor when enlarging, ceil when shrinking.
enum class ResizeNearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };
struct ResizeParams {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kAsymmetric;
  ResizeNearest nearest = ResizeNearest::kLegacy;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;  // opset 18: linear/cubic filters widened by 1 / scale when shrinking
  double extrapolation = 0.0;
  Shape out;
  std::vector<double> scales;   // per axis, used by the coordinate transform
  std::vector<double> resized;  // per axis: in_len * scale before flooring (= the size when sizes are given)
  std::vector<double> roi;      // starts then ends, per axis (tf_crop_and_resize)
};
// `upsample`: the node is an Upsample (opsets 7, 9).
Expected<ResizeParams> resize_params(const InferCtx& c, bool upsample);
// Interpolation taps of one axis: for output coordinate i, n taps (index, weight), or extrapolate[i]. n is 1
// (nearest), 2 (linear), 4 (cubic), or wider with antialias when the axis shrinks.
struct ResizeAxisTaps {
  int n = 1;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<char> extrapolate;
  bool identity = true;  // every output takes exactly its own input element
};
ResizeAxisTaps resize_axis_taps(const ResizeParams& p, size_t axis, int64_t in_len, int64_t out_len);

// ---- Reduce* (reduce.cpp) ----
struct ReduceGeom {
  bool noop = false;  // empty axes with noop_with_empty_axes=1: output = input
  Shape kept;         // input shape with reduced dims set to 1
  Shape out;          // kept, or without the reduced dims when keepdims=0
};
// The axes from the attribute or (ReduceSum, opset 13+) the constant input; pass exactly one of ic / kc.
Expected<std::vector<int64_t>> reduce_axes(const InferCtx* ic, const KernelCtx* kc);
Expected<ReduceGeom> reduce_geom(const Node& n, const Shape& x, const std::vector<int64_t>& axes);

// ---- Softmax, LogSoftmax, Hardmax (softmax.cpp): the input viewed as [outer, len, inner], working along len ----
struct SoftmaxGeom {
  int64_t outer = 1, len = 1, inner = 1;
};
Expected<SoftmaxGeom> softmax_geom(const Node& n, const Shape& x);

// ---- LayerNormalization (normalization.cpp): normalizes [outer, inner] rows over dims [axis, rank) ----
struct LayerNormGeom {
  int axis;
  int64_t outer, inner;
  DType stash;
};
Expected<LayerNormGeom> layer_norm_geom(const Node& n, const Shape& x);

// ---- GroupNormalization (normalization.cpp): x [N, C, ...] normalized over each of `groups` runs of C / groups
// channels; scale and bias per channel (opset 21) or, in opset 18, per group ----
struct GroupNormGeom {
  int64_t groups, channels, spatial;
  bool per_group;  // scale/bias have one value per group (opset 18)
};
Expected<GroupNormGeom> group_norm_geom(const Node& n, const Shape& x);

// ---- Einsum (einsum.cpp) ----
// The multiplies of Einsum node n's reference loop at these input shapes (every label combination, times the
// operands), whether or not the kernel would take that much: what running it costs. A double: it may pass 2^63.
Expected<double> einsum_work(const Node& n, const std::vector<Shape>& shapes);

// ---- MatMul (matmul.cpp): a [..., M, K] x b [..., K, N] with 1-d operands promoted as numpy does ----
struct MatMulGeom {
  Shape a, b, batch, out;
  int64_t m, k, n;
};
Expected<MatMulGeom> matmul_geom(const Shape& a_in, const Shape& b_in);

// ---- QuantizeLinear / DequantizeLinear (quantize.cpp): which scale and zero point element i uses: channel
// (i / inner) % len, or the single one when not per_axis ----
struct QuantGeom {
  bool per_axis = false;
  int64_t len = 1, inner = 1;
};
// x: the tensor being (de)quantized; scale / zero point: the shapes of inputs 1 and 2 (zp may be absent).
Expected<QuantGeom> quant_geom(const Node& n, const Shape& x, const Shape& scale, const Shape* zp);

}  // namespace qd::ops
