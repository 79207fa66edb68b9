#include <gtest/gtest.h>

#include "backends/cuda/device.h"
#include "cuda/gpu_test.h"

namespace qd {

TEST(CudaDevice, DescribesTheGpu) {
  SKIP_WITHOUT_GPU();
  auto d = cuda::device_info(0);
  ASSERT_TRUE(d) << d.status().to_string();
  EXPECT_FALSE(d->name.empty());
  EXPECT_GE(d->sm_major, 7);
  std::cout << "GPU 0: " << cuda::describe(*d) << "\n";
}

}  // namespace qd
