// The CUDA target's fusion rules (backends/cuda/cuda_target.h), which build without CUDA, state the chain kernel's
// limits as kernels/nhwc.h's maxpool_chain_fits does. Host-side only: no GPU needed.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_target.h"
#include "backends/cuda/kernels/nhwc.h"

namespace qd::cuda {
namespace {

TEST(CudaFusionRules, PoolChainRuleMatchesTheKernel) {
  for (int C : {8, 16, 24, 32, 256, 512}) {
    for (int hw : {1, 7, 20, 30, 38, 39, 40, 64}) {
      EXPECT_EQ(cuda_pool_chain_fits(C, hw, hw), maxpool_chain_fits(C, hw, hw)) << C << "x" << hw;
    }
  }
  const FusionRules fp16 = cuda_fusion_rules(Precision::kFp16);
  ASSERT_TRUE(fp16.pool_chain);
  EXPECT_TRUE(fp16.pool_chain({1, 256, 20, 20}, kMaxPoolChain));
  EXPECT_FALSE(fp16.pool_chain({1, 256, 20, 20}, kMaxPoolChain + 1));
  EXPECT_FALSE(cuda_fusion_rules(Precision::kFp32).pool_chain);
}

}  // namespace
}  // namespace qd::cuda
