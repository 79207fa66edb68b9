// Which convolution configurations a device can run, from its compute capability (host code, no CUDA: the CPU
// tests check the filter). Every kernel needs sm_80 (cp.async, mma.sync, ldmatrix); the warpgroup-MMA, TMA and
// cluster split-K ones need sm_90a's instructions, present only where this binary holds sm_90a code for the device
// (the probe of conv_igemm_init: a "87;90a" build runs its sm_87 code on Orin, where those kernels trap).
#pragma once

namespace qd::cuda {

struct DeviceArch {
  int cc_major = 0, cc_minor = 0;
  int smem_per_block_optin = 0;  // bytes of dynamic shared memory a block may opt into
  bool wgmma_code = false;       // the loaded code has wgmma (arch_probe_kernel)
  bool pdl_code = false;         // the loaded code has griddepcontrol (sm_90+, pdl.cuh's pdl_wait)
};

struct KernelNeeds {
  bool sm90 = false;   // wgmma, TMA or thread-block clusters
  int smem_bytes = 0;  // dynamic shared memory per block
};

// The sm_90a features (wgmma, TMA, clusters): compute capability 9.0 and code that has them.
inline bool has_sm90_features(const DeviceArch& d) { return d.cc_major >= 9 && d.wgmma_code; }

// Programmatic dependent launch: compute capability 9.0 and code whose kernels wait for their predecessor
// (griddepcontrol.wait). Code for an older arch JIT-compiled on Hopper (the PTX of a "-DQD_CUDA_ARCH=87" build) has
// the wait left out, and a kernel launched early without it would read its predecessor's output too soon.
inline bool has_pdl(const DeviceArch& d) { return d.cc_major >= 9 && d.pdl_code; }

// Whether a configuration with these needs runs on the device.
inline bool kernel_runs_on(const KernelNeeds& k, const DeviceArch& d) {
  if (d.cc_major < 8) return false;
  if (k.sm90 && !has_sm90_features(d)) return false;
  return k.smem_bytes <= d.smem_per_block_optin;
}

}  // namespace qd::cuda
