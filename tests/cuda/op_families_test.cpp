// Every op has a CUDA kernel family or is marked reference-only (ops.def's `cuda` trait), and the factory table in
// kernels/generic.cpp agrees: each family an op names has a factory, and a reference-only op is refused by name.
// Host-side only: no GPU needed.
#include <gtest/gtest.h>

#include "backends/cuda/kernels/generic.h"
#include "ops/op.h"

namespace qd::cuda {
namespace {

TEST(CudaOpFamilies, EveryOpHasAFamilyOrIsReferenceOnly) {
  int reference_only = 0;
  for (int i = 0; i < static_cast<int>(OpType::kCount); ++i) {
    const OpType op = static_cast<OpType>(i);
    const CudaFamily f = op_traits(op).cuda;
    if (f == CudaFamily::kReferenceOnly) {
      ++reference_only;
      EXPECT_FALSE(has_generic_kernel_family(f));
      // The dispatcher refuses it before looking at specs, with the op's name.
      Graph g;
      Node n{"node", op, 13, {}, {}, {}};
      auto k = make_generic_kernel(g, n, {}, {});
      ASSERT_FALSE(k.has_value()) << op_name(op);
      EXPECT_NE(k.status().message().find(std::string(op_name(op)) + " has no CUDA kernel"), std::string::npos)
          << k.status().message();
    } else {
      EXPECT_TRUE(has_generic_kernel_family(f)) << op_name(op) << ": family " << static_cast<int>(f)
                                                << " has no factory in kernels/generic.cpp";
    }
  }
  EXPECT_GT(reference_only, 0);
  EXPECT_LT(reference_only, static_cast<int>(OpType::kCount) / 4);  // most ops run on the GPU
}

TEST(CudaOpFamilies, EveryFamilyHasAFactory) {
  for (int f = 1; f < static_cast<int>(CudaFamily::kCount); ++f) {
    EXPECT_TRUE(has_generic_kernel_family(static_cast<CudaFamily>(f))) << "family " << f;
  }
  EXPECT_FALSE(has_generic_kernel_family(CudaFamily::kCount));
}

}  // namespace
}  // namespace qd::cuda
