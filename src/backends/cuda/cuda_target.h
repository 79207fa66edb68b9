// The CUDA builder's answer to plan/target.h's question, from the graph and the op traits alone: no device, no CUDA
// headers (it builds without CUDA, so that `qdeploy inspect --target cuda` answers on any machine). The lowering asks
// it before making a generic layer; lower_conv.cpp, lower_movement.cpp and kernels/ hold the layers it describes.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

#include "core/precision.h"
#include "passes/passes.h"
#include "plan/layout.h"
#include "plan/target.h"

namespace qd::cuda {

class CudaTarget : public Target {
 public:
  std::string name() const override { return "cuda"; }
  Support supports(const Graph& g, const Node& n, const NodeFormats& formats) const override;
  // Convs and linear layers: their epilogue writes fp32 in the ONNX form when no reader is on the fast path.
  bool writes_onnx_form(const Graph& g, const Node& n) const override;
};

// The fusions the CUDA builder's kernels allow, for a build of precision p: SPPF's pools as one MaxPoolChain where
// the chain kernel fits (fp16 and INT8 builds; kernels/nhwc.h's maxpool_chain_fits, which a GPU test checks this
// against), and head decodes as one SliceConcat within the decode kernel's limits (every precision).
// `qdeploy inspect --target cuda` shows what they fuse.
FusionRules cuda_fusion_rules(Precision p);
// The chain kernel's limits as the rules state them: at most 4 pools, channels a multiple of 16, the plane's two
// 16-byte-per-pixel copies within 48 KiB of shared memory.
constexpr int kCudaMaxPoolChain = 4;
bool cuda_pool_chain_fits(int C, int H, int W);

// The CUDA build's layout plan of fused graph g for a build of precision p: every node asked in fp16, the INT8 convs
// and linear layers (`int8`, node names) in int8, none in fp32 builds (the lowering and `inspect --target cuda`
// share it).
LayoutPlan cuda_layouts(const Graph& g, Precision p, const std::set<std::string>& int8);

// Which of the nodes the precision plan puts in INT8 (`plan_int8`, names) the CUDA build runs in INT8: the Convs,
// and the Gemms and MatMuls with linear_operands whose input no INT8 Conv reads (a tensor has one int8 copy: NHWC
// pixels for convs, rows [..., C] for linear layers). The lowering and `inspect --target cuda` share it.
std::set<std::string> cuda_int8_nodes(const Graph& g, const std::set<std::string>& plan_int8);

// The head decode kernel's limits (kernels/eltwise_chain.h), which the rules state for fuse_slice_concat: segments,
// elementwise steps per segment, and constant tensors (not scalars) per segment.
constexpr int kCudaMaxSliceSegments = 4, kCudaMaxEwSteps = 16, kCudaMaxEwOperands = 8;
// How the elementwise kernels read a constant of shape `cs` broadcast to x of shape `xs`: element i of x reads
// sum_t (i / div[t]) % mod[t] * mul[t], one term per run of dims the constant does not broadcast over. False when it
// does not broadcast to xs or needs more than two terms.
struct BroadcastTerms {
  int64_t div[2] = {1, 1}, mod[2] = {1, 1}, mul[2] = {0, 0};
};
bool broadcast_terms(const Shape& xs, const Shape& cs, BroadcastTerms* t);

// A linear layer's operands as the CUDA build runs it on the tensor cores (a 1x1 conv over the input's rows): a Gemm
// with a 2-d input [N, C] (no transA, alpha = beta = 1), or a MatMul of a float input [..., C] (N = its other
// dimensions' product); a constant fp32 2-d B ([C, K], or [K, C] with a Gemm's transB); for a Gemm no bias or a
// constant one per output column (a MatMul's bias is the Add after it, which the lowering fuses). INT8 takes all of
// them (cuda_int8_nodes), fp16 plans those whose rows are 16-byte multiples (linear_fp16); other ones stay in fp32.
struct LinearOperands {
  const Tensor* b = nullptr;
  const Tensor* bias = nullptr;
  bool trans_b = false;
  int64_t N = 0, C = 0, K = 0;
};
std::optional<LinearOperands> linear_operands(const Graph& g, const Node& n);
inline bool linear_fp16(const LinearOperands& l) { return l.C % 8 == 0 && l.N * l.C <= INT32_MAX; }

}  // namespace qd::cuda
