// Op traits: the facts about an op that modules outside src/ops/ ask, stated once per op in ops.def (its last five
// columns) instead of as a switch in each module. A new op must state each of them, so none silently falls into a
// module's `default:`.
#pragma once

#include <cstdint>

#include "ops/op_type.h"

namespace qd {

// What the op does to its data, in broad strokes (documentation and consistency checks).
enum class OpKind : uint8_t {
  kElementwise,    // each output element from the same-index input elements (with broadcasting); casts
  kMovement,       // output elements are input elements moved, selected or repeated (reshape, slice, gather, pad)
  kGenerate,       // values made from shapes or constants (Shape, Range, ConstantOfShape)
  kReduction,      // reduces or scans along axes (Reduce*, ArgMax, TopK, CumSum)
  kPool,           // sliding-window or global pooling
  kNormalization,  // normalizes with statistics or parameters (BatchNorm, LayerNorm, Softmax)
  kCompute,        // matrix products (Conv, Gemm, MatMul, Einsum): where the MACs are
  kQuantize,       // Q/DQ
  kFused,          // several ops' work in one node, made by a fusion pass (ops/fused.h); never imported
};

// How the op takes part in INT8 (DESIGN.md's INT8 contract; read by quant/).
enum class Int8Rule : uint8_t {
  kFloat,               // a float island: runs between a DequantizeLinear and a QuantizeLinear
  kTransparent,         // output values are input values (plus zeros): one scale serves input and output
  kTransparentNearest,  // kTransparent when it resizes with mode "nearest" (other modes interpolate)
  kTransparentZeroPad,  // kTransparent unless it pads with a constant other than 0
  kWeights,             // a matrix product whose constant weights the INT8 rewrite quantizes (Conv, Gemm)
  kInteger,             // works on integers already (Q/DQ, ConvInteger, MatMulInteger)
};

// Which analysis passes/batch_split.cpp applies to tell whether the op keeps the items of a batch apart (so that an
// engine may run the batch as parts). kNone: not known to; a graph with the op on the batch path is not split.
enum class BatchRule : uint8_t {
  kNone,
  kBroadcast,      // elementwise: each batched operand spans the output's rank, the others broadcast along the batch
  kPerItem,        // input 0 batched, the others parameters (windows, channels, statistics within an item)
  kPerItemScale,   // kPerItem, and a per-axis scale must not run along the batch (Q/DQ)
  kNormAxis,       // kPerItem, normalizing along an `axis` that must not be the batch
  kStatsAxes,      // kPerItem, statistics over `axes` that must not include the batch
  kSearchAxis,     // kPerItem, searching along an `axis` that must not be the batch
  kRunningSum,     // kPerItem, a scan along a constant axis that must not be the batch
  kReduce,         // kPerItem, reducing over constant axes that must not include the batch
  kTriangle,       // kPerItem, on the two last dims, which must not include the batch
  kKeepsBatchDim,  // kPerItem shape changes; the output keeps the batch first (checked for every output)
  kPad,            // kPerItem with constant pads that leave the batch axis alone
  kSqueeze,        // kPerItem, squeezing or inserting constant axes other than the batch
  kPermute,        // kPerItem, a permutation that keeps the batch first
  kTile,           // kPerItem, constant repeats of 1 along the batch
  kConcat,         // every operand batched, joined along an axis other than the batch
  kSplit,          // kPerItem, split along an axis other than the batch
  kSlice,          // kPerItem, constant axes other than the batch
  kGather,         // data batched and indexed along another axis, or a constant table looked up per item
  kIndexElements,  // every operand batched with the same rank, indexed along an axis other than the batch
  kGemm,           // A's rows per item, A not transposed, C not spanning the batch
  kMatMul,         // A's rows (or leading dims) per item, or both batched with the batch as a leading dim
};

// How ir/cost.cpp counts the op's multiply-accumulates (kNone: none counted).
enum class MacsRule : uint8_t {
  kNone,
  kConv,           // output elements x (input channels per group x kernel window)
  kConvTranspose,  // input elements x (output channels per group x kernel window)
  kGemm,           // output elements x K (A's columns, or rows when transA)
  kMatMul,         // output elements x A's last dim
};

// The CUDA generic-kernel family that runs the op (one factory each in src/backends/cuda/kernels/, mapped in
// kernels/generic.cpp), or kReferenceOnly: no CUDA kernel, the op runs on the CPU reference alone.
enum class CudaFamily : uint8_t {
  kReferenceOnly,
  kUnary,         // elementwise.cu: math, activations, Not, Clip, Cast
  kBinary,        // elementwise.cu: arithmetic, comparison, logic with broadcasting
  kVariadic,      // elementwise.cu: Max, Min, Sum, Mean
  kWhere,         // elementwise.cu
  kCopy,          // movement.cu: reshape-like ops (a copy or nothing)
  kStrided,       // movement.cu: Transpose, Slice, Expand, DepthToSpace, SpaceToDepth
  kConcat,        // movement.cu
  kSplit,         // movement.cu
  kGather,        // movement.cu
  kTile,          // movement.cu
  kPad,           // movement.cu
  kPrecomputed,   // movement.cu: outputs known at build time (Shape, Size, ConstantOfShape, Range, EyeLike)
  kPool,          // pool.cu: MaxPool, AveragePool, LpPool
  kGlobalPool,    // pool.cu: GlobalAveragePool, GlobalMaxPool
  kResize,        // resize.cu
  kSoftmax,       // softmax.cu: Softmax, LogSoftmax, Hardmax
  kReduce,        // reduce.cu: Reduce*
  kArgMinMax,     // reduce.cu
  kBatchNorm,     // norm.cu
  kInstanceNorm,  // norm.cu
  kGroupNorm,     // norm.cu
  kLayerNorm,     // norm.cu
  kMatMul,        // matmul.cu: MatMul, Gemm
  kConv,          // conv_direct.cu
  kConvTranspose, // conv_direct.cu
  kQuantize,      // quantize.cu: QuantizeLinear, DequantizeLinear
  kCount
};

struct OpTraits {
  OpKind kind;
  Int8Rule int8;
  BatchRule batch;
  MacsRule macs;
  CudaFamily cuda;
};

const OpTraits& op_traits(OpType op);

}  // namespace qd
