#include <gtest/gtest.h>

#include "backends/cuda/device.h"

namespace qd {

TEST(CudaDevice, DescribesTheGpu) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine; GPU tests run on the GPU machine (scripts/gpu-check.sh)";
  auto d = cuda::device_info(0);
  ASSERT_TRUE(d) << d.status().to_string();
  EXPECT_FALSE(d->name.empty());
  EXPECT_GE(d->sm_major, 7);
  std::cout << "GPU 0: " << cuda::describe(*d) << "\n";
}

}  // namespace qd
