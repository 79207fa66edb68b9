// Generic CUDA kernels: one per ONNX op family, on contiguous tensors with ONNX (NCHW) semantics, for every op the
// fast paths (fused convolutions) do not cover. Float math is done in fp32 whatever the storage type (fp32 or fp16),
// so results track the reference backend closely. The engine calls make_generic_kernel once per node when it sets up
// a batch size, then launch() for every run (and once while a CUDA graph is captured): launch must not allocate,
// synchronize or copy from the host.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "backends/cuda/kernels/conv.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_traits.h"

namespace qd::cuda {

// What a kernel knows of a tensor when it is created: type and shape (contiguous, row-major).
struct TensorSpec {
  DType dtype = DType::kUndefined;
  Shape shape;
};

class GenericKernel {
 public:
  virtual ~GenericKernel() = default;
  // inputs[i] is nullptr for an omitted optional input; outputs[i] nullptr for an omitted output.
  virtual Status launch(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                        cudaStream_t stream) = 0;
  // Bytes of device scratch memory launch needs (0 for most); the engine passes it via set_workspace before launch.
  virtual size_t workspace_bytes() const { return 0; }
  virtual void set_workspace(void* /*ptr*/) {}
};

// Creates the kernel for `node` with the given input and output specs (shapes as inferred for this batch size).
// Constant inputs that shape the computation (Reshape's shape, Slice's starts, Resize's scales, Pad's pads, ...) are in
// graph.constants and may be read here; the tensors passed to launch() are device copies of them. Returns
// kUnsupported, naming the node and what is missing (op, dtype, attribute value), when there is no CUDA kernel.
Expected<std::unique_ptr<GenericKernel>> make_generic_kernel(const Graph& graph, const Node& node,
                                                              const std::vector<TensorSpec>& inputs,
                                                              const std::vector<TensorSpec>& outputs);

// Whether `family` has a factory here (every CudaFamily but kReferenceOnly must: tests/cuda checks it for each op).
bool has_generic_kernel_family(CudaFamily family);

// A Conv node's generic kernel with an epilogue fused after the bias (fp32 plans: conv + activation + residual in one
// kernel): the activation, then, with `residual`, a tensor of the output's shape added, given to launch() as a
// fourth input after the bias (nullptr when the node has none).
struct ConvEpilogue {
  Act act = Act::kNone;
  float a = 0.f, b = 0.f;  // LeakyRelu alpha; HardSigmoid alpha/beta; Clip min/max
  bool residual = false;
};
// A Conv's epilogue: none; a FusedConv's: its activation (a Clip with min > max clamps to max, as ONNX says) and
// residual.
Expected<ConvEpilogue> conv_epilogue(const Node& node);
Expected<std::unique_ptr<GenericKernel>> make_generic_conv(const Graph& graph, const Node& node,
                                                            const std::vector<TensorSpec>& inputs,
                                                            const std::vector<TensorSpec>& outputs,
                                                            const ConvEpilogue& epilogue);

}  // namespace qd::cuda
