// The CUDA builder's answer to plan/target.h's question, from the graph and the op traits alone: no device, no CUDA
// headers (it builds without CUDA, so that `qdeploy inspect --target cuda` answers on any machine). The lowering asks
// it before making a generic layer; lower_conv.cpp, lower_movement.cpp and kernels/ hold the layers it describes.
#pragma once

#include <optional>

#include "core/precision.h"
#include "passes/passes.h"
#include "plan/target.h"

namespace qd::cuda {

class CudaTarget : public Target {
 public:
  std::string name() const override { return "cuda"; }
  Support supports(const Graph& g, const Node& n, const NodeFormats& formats) const override;
};

// The fusions the CUDA builder's kernels allow, for a build of precision p: SPPF's pools as one MaxPoolChain where
// the chain kernel fits (fp16 and INT8 builds; kernels/nhwc.h's maxpool_chain_fits, which a GPU test checks this
// against). `qdeploy inspect --target cuda` shows what they fuse.
FusionRules cuda_fusion_rules(Precision p);
// The chain kernel's limits as the rules state them: at most 4 pools, channels a multiple of 16, the plane's two
// 16-byte-per-pixel copies within 48 KiB of shared memory.
constexpr int kCudaMaxPoolChain = 4;
bool cuda_pool_chain_fits(int C, int H, int W);

// An INT8 Gemm's operands as the CUDA build runs it (a 1x1 INT8 conv over N pixels): a 2-d input [N, C], a constant
// 2-d B ([C, K], or [K, C] with transB), no bias or a constant one per output column. Other Gemms stay in float.
struct Int8Gemm {
  const Tensor* b = nullptr;
  const Tensor* bias = nullptr;
  bool trans_b = false;
  int64_t C = 0, K = 0;
};
std::optional<Int8Gemm> int8_gemm_operands(const Graph& g, const Node& n);

}  // namespace qd::cuda
