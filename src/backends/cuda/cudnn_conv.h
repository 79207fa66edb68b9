// cuDNN's convolution algorithms as kernel candidates for the fp16 fused convolution (the builder times them against
// qdeploy's own implicit-GEMM configurations, as TensorRT's tactic sources do).
//
// cuDNN is optional: libcudnn.so.9 is loaded at run time (dlopen; QD_CUDNN_LIBRARY names another file), so qdeploy
// starts and builds without it, with its own kernels only. cuDNN computes the convolution (fp16 in and out, fp32
// accumulation, tensor cores) into a scratch tensor; conv_epilogue (conv_igemm_kernels.cuh) then applies the fused
// layer's bias, activation and residual add and writes its output format, so a cuDNN layer computes what the fused
// kernel does, with one more pass over the output.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernels/conv.h"
#include "core/status.h"

namespace qd::cuda {

// Whether cuDNN could be loaded (tried once per process); why not, when it could not.
bool cudnn_available();
std::string cudnn_unavailable_reason();
// cudnnGetVersion() of the loaded library (e.g. 91400), 0 when none.
uint32_t cudnn_loaded_version();
// Creates the calling thread's cuDNN handle for the current device if it has none: before a CUDA-graph capture,
// during which cudnnCreate (it allocates) is not allowed.
Status cudnn_thread_init();

// The most workspace a cuDNN algorithm may use to be a candidate.
constexpr size_t kMaxCudnnWorkspace = size_t{256} << 20;

// One convolution's cuDNN descriptors and algorithm; immutable after create, shared by execution contexts (each
// thread launches through its own cuDNN handle).
class CudnnConv {
 public:
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // The algorithms cuDNN offers for this convolution (fp16, NHWC, `p.in_ld` elements between input pixels), best
  // first by its heuristics; empty when cuDNN is not loaded or supports none.
  static std::vector<int> algorithms(const ConvParams& p);
  static std::string algorithm_name(int algo);
  // Descriptors for `p` with algorithm `algo`; `w_dense` is the weights as [K][R][S][C] fp16 (no row padding).
  // `warm`: one call on scratch buffers, so that cuDNN's per-shape setup (milliseconds per convolution)
  // happens here, where the engine prepares an instance, rather than in the first enqueue or a graph capture.
  static Expected<std::unique_ptr<CudnnConv>> create(const ConvParams& p, int algo, const void* w_dense,
                                                     bool warm = true);

  // Scratch bytes run() needs: the convolution's result, then cuDNN's workspace.
  size_t workspace_bytes() const { return result_bytes_ + cudnn_bytes_; }
  // y = conv(x) into the scratch, then conv_epilogue from it with `a` (bias, activation, residual, outputs).
  Status run(const ConvParams& p, const ConvArgs& a, void* workspace, cudaStream_t stream) const;

 private:
  CudnnConv() = default;
  Status warm_up(const ConvParams& p) const;
  struct Descriptors;
  std::unique_ptr<Descriptors> d_;
  int algo_ = 0;
  const void* w_ = nullptr;
  size_t result_bytes_ = 0, cudnn_bytes_ = 0;
};

}  // namespace qd::cuda
