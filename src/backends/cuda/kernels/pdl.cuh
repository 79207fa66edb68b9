// Programmatic dependent launch (sm_90): a kernel launched with launch_pdl may start while the kernel before it in the
// stream finishes (its blocks take free SMs and do what needs no input, e.g. load weights), instead of after it and
// the launch latency. Such a kernel must call pdl_wait() before its first read of anything an earlier kernel wrote
// and before its first write: it blocks until that kernel has completed and its writes are visible. pdl_trigger()
// lets the next such kernel be scheduled once every block of this one has triggered or exited. On older GPUs, with code
// compiled for them (g_pdl_code), or for an engine whose KernelPolicy has pdl off (A/B runs), kernels launch as usual
// and the two calls do nothing.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/kernels/pdl_policy.h"

#include <cstdlib>
#include <utility>

namespace qd::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Whether launch_pdl sets the attribute: compute capability 9.0 or later (asked once per process), not under PdlOff.
inline bool pdl_enabled() {
  static const bool on = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    return major >= 9;
  }();
  return on && g_pdl_code.load(std::memory_order_relaxed) && !t_pdl_off;
}

// kernel<<<grid, block, smem, s>>>(args...) with programmatic stream serialization allowed; the kernel calls pdl_wait.
// cluster_z > 1: the grid's blocks along z of each (x, y) form one thread-block cluster (sm_90). Errors are left for
// cudaGetLastError, as with <<<>>>.
template <typename... Params, typename... Args>
void launch_pdl_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                        unsigned cluster_z, Args&&... args) {
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl_enabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = 1;
    attr[n].val.clusterDim.y = 1;
    attr[n++].val.clusterDim.z = cluster_z;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args&&... args) {
  launch_pdl_cluster(kernel, grid, block, smem, s, 1u, std::forward<Args>(args)...);
}

}  // namespace qd::cuda
