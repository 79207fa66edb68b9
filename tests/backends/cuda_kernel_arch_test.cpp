// Which convolution configurations a device runs (backends/cuda/kernel_arch.h): host code, checked without a GPU.
#include <gtest/gtest.h>

#include "backends/cuda/kernel_arch.h"

namespace qd::cuda {
namespace {

constexpr int kKiB = 1024;
// Compute capability, opt-in shared memory per block (CUDA programming guide, "Compute Capabilities" table), and
// whether the loaded code has wgmma and griddepcontrol.
const DeviceArch kH100{9, 0, 227 * kKiB, true, true};
const DeviceArch kH100Sm87Code{9, 0, 227 * kKiB, false, false};  // a "-DQD_CUDA_ARCH=87" build's PTX, JIT on Hopper
const DeviceArch kH100Sm90Code{9, 0, 227 * kKiB, false, true};   // sm_90 without the "a" features
const DeviceArch kOrin{8, 7, 163 * kKiB, false, false};  // Jetson AGX Orin's GPU, a "87;90a" build's sm_87 code
const DeviceArch kA100{8, 0, 163 * kKiB, false, false};
const DeviceArch kTuring{7, 5, 64 * kKiB, false, false};

TEST(KernelArch, Sm90KernelsOnlyWhereTheDeviceAndTheCodeHaveThem) {
  const KernelNeeds wgmma{true, 96 * kKiB}, mma_sync{false, 96 * kKiB};
  EXPECT_TRUE(kernel_runs_on(wgmma, kH100));
  EXPECT_TRUE(kernel_runs_on(mma_sync, kH100));
  EXPECT_FALSE(kernel_runs_on(wgmma, kOrin));
  EXPECT_TRUE(kernel_runs_on(mma_sync, kOrin));
  EXPECT_FALSE(kernel_runs_on(wgmma, kA100));
  EXPECT_FALSE(kernel_runs_on(wgmma, kH100Sm87Code));
  EXPECT_TRUE(kernel_runs_on(mma_sync, kH100Sm87Code));
  EXPECT_FALSE(kernel_runs_on(wgmma, kH100Sm90Code));
  // A probe that reports wgmma code on a device below sm_90 (impossible, but the capability decides).
  EXPECT_FALSE(kernel_runs_on(wgmma, DeviceArch{8, 7, 163 * kKiB, true, true}));
  EXPECT_FALSE(has_sm90_features(kOrin));
  EXPECT_TRUE(has_sm90_features(kH100));
}

TEST(KernelArch, DependentLaunchOnlyWhereTheCodeWaits) {
  EXPECT_TRUE(has_pdl(kH100));
  EXPECT_TRUE(has_pdl(kH100Sm90Code));
  EXPECT_FALSE(has_pdl(kH100Sm87Code));  // its kernels have no griddepcontrol.wait
  EXPECT_FALSE(has_pdl(kOrin));
  EXPECT_FALSE(has_pdl(kA100));
}

TEST(KernelArch, SharedMemoryBeyondTheDevicesIsNotOffered) {
  // 200 KiB fits Hopper's 227 KiB but not Orin's 163 KiB.
  EXPECT_TRUE(kernel_runs_on(KernelNeeds{false, 200 * kKiB}, kH100));
  EXPECT_FALSE(kernel_runs_on(KernelNeeds{false, 200 * kKiB}, kOrin));
  EXPECT_TRUE(kernel_runs_on(KernelNeeds{false, 163 * kKiB}, kOrin));
}

TEST(KernelArch, NothingBelowSm80) {
  EXPECT_FALSE(kernel_runs_on(KernelNeeds{false, 16 * kKiB}, kTuring));
}

}  // namespace
}  // namespace qd::cuda
