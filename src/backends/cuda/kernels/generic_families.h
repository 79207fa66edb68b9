// Internal to the generic CUDA kernels: what every op-family factory receives, the factories themselves (one per
// family file; generic.cpp maps each CudaFamily trait to its factory), and host helpers they share (device tables,
// dim coalescing).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/device_buffer.h"  // DeviceBuffer: tables a kernel computes once, when it is created
#include "backends/cuda/kernels/generic.h"
#include "ops/op.h"

namespace qd::cuda {

constexpr int kMaxRank = 8;  // tensors of higher rank (after merging contiguous dims) are unsupported

using KernelPtr = std::unique_ptr<GenericKernel>;
using MadeKernel = Expected<KernelPtr>;

// A node as a factory sees it. `ctx` carries the spec dtypes/shapes and, as values, the node's constant inputs, so
// that the ops' own geometry functions (ops/op_geometry.h, ops/window.h) resolve attributes exactly as the reference
// does. Dtypes come from the specs, not the graph: the engine may store a float tensor as fp16.
struct NodeArgs {
  const Graph& graph;
  const Node& node;
  const std::vector<TensorSpec>& in;
  const std::vector<TensorSpec>& out;
  const InferCtx& ctx;
  bool has_in(size_t i) const { return i < in.size() && i < node.inputs.size() && node.inputs[i] >= 0; }
  bool has_out(size_t i) const { return i < out.size() && i < node.outputs.size() && node.outputs[i] >= 0; }
  const Tensor* constant(size_t i) const { return has_in(i) ? graph.constant(node.inputs[i]) : nullptr; }
};

// kUnsupported: "<Op>: <why>" (the dispatcher attaches the node's name).
Status no_kernel(const NodeArgs& a, const std::string& why);
// kUnsupported for a dtype the family does not handle.
Status no_kernel_dtype(const NodeArgs& a, DType t, const char* what = "input");

bool is_float_storage(DType t);  // float32 or float16: the types float math runs on

// A strided view: dims plus, for each of `n` operands, a stride per dim (elements; 0 broadcasts, negative walks
// backwards). Host-side helpers build and simplify them; kernels get them by value.
struct DimsStrides {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;  // [operand][dim]
};
// Drops size-1 dims and merges neighbours that every operand walks contiguously (rank 6 NCHW-ish broadcasts usually
// become rank 1-3). The element order of the walk is unchanged.
DimsStrides coalesce(DimsStrides v);
// Strides with which a tensor of shape `in` is read while walking the broadcast shape `out` (0 on broadcast dims).
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

int64_t volume(const Shape& s);  // element count; 0 when any dim is 0

// ---- factories, one per op family (each in its .cu file) ----
MadeKernel make_unary(const NodeArgs& a);        // elementwise.cu: math/activations, Not, Clip, Cast
MadeKernel make_binary(const NodeArgs& a);       // elementwise.cu: arithmetic/compare/logic with broadcasting
MadeKernel make_variadic(const NodeArgs& a);     // elementwise.cu: Max, Min, Sum, Mean
MadeKernel make_where(const NodeArgs& a);        // elementwise.cu
MadeKernel make_copy(const NodeArgs& a);         // movement.cu: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout
MadeKernel make_strided(const NodeArgs& a);      // movement.cu: Transpose, Slice, Expand, DepthToSpace, SpaceToDepth
MadeKernel make_concat(const NodeArgs& a);       // movement.cu
MadeKernel make_split(const NodeArgs& a);        // movement.cu
MadeKernel make_gather(const NodeArgs& a);       // movement.cu
MadeKernel make_tile(const NodeArgs& a);         // movement.cu
MadeKernel make_pad(const NodeArgs& a);          // movement.cu
MadeKernel make_precomputed(const NodeArgs& a);  // movement.cu: Shape, Size, ConstantOfShape, ... known at build
MadeKernel make_pool(const NodeArgs& a);         // pool.cu: MaxPool, AveragePool, LpPool
MadeKernel make_global_pool(const NodeArgs& a);  // pool.cu: GlobalAveragePool, GlobalMaxPool
MadeKernel make_resize(const NodeArgs& a);       // resize.cu: Resize, Upsample
MadeKernel make_softmax(const NodeArgs& a);      // softmax.cu: Softmax, LogSoftmax, Hardmax
MadeKernel make_reduce(const NodeArgs& a);       // reduce.cu: Reduce*
MadeKernel make_argminmax(const NodeArgs& a);    // reduce.cu: ArgMax, ArgMin
MadeKernel make_batch_norm(const NodeArgs& a);   // norm.cu
MadeKernel make_instance_norm(const NodeArgs& a);  // norm.cu
MadeKernel make_group_norm(const NodeArgs& a);      // norm.cu: GroupNormalization
MadeKernel make_layer_norm(const NodeArgs& a);   // norm.cu
MadeKernel make_matmul(const NodeArgs& a);       // matmul.cu: MatMul, Gemm
MadeKernel make_conv(const NodeArgs& a);         // conv_direct.cu
MadeKernel make_conv_fused(const NodeArgs& a, const ConvEpilogue& e);  // conv_direct.cu
MadeKernel make_conv_transpose(const NodeArgs& a);  // conv_direct.cu
MadeKernel make_quantize(const NodeArgs& a);     // quantize.cu: QuantizeLinear, DequantizeLinear

}  // namespace qd::cuda
