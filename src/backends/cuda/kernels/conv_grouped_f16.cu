// Grouped and depthwise fp16 convolutions: a group's few input channels are too few for the implicit GEMM's 32-deep
// tensor-core steps, so they run on CUDA cores (fp32 accumulation) with the implicit GEMM's epilogue. A depthwise
// conv (one input channel per group, one output channel per input channel) takes 8 channels of one output pixel per
// thread, its input in 16-byte loads; other grouped convs one output value per thread, as conv_grouped_i8 does.
#include "backends/cuda/kernels/conv_grouped.h"

#include "backends/cuda/kernels/activation.cuh"
#include "backends/cuda/kernels/conv_igemm_kernels.cuh"

namespace qd::cuda {
namespace {

__device__ __forceinline__ void pixel_of(const ConvParams& p, int m, int* n, int* oh, int* ow) {
  *n = m / (p.OH * p.OW);
  const int pix = m - *n * p.OH * p.OW;
  *oh = pix / p.OW;
  *ow = pix - *oh * p.OW;
}

__device__ __forceinline__ void epilogue_store(const ConvParams& p, const ConvArgs& a, int m, int k, float acc) {
  float v = apply_act(acc + a.bias[k], p.act, p.act_a, p.act_b);
  v += residual_value<false>(p, a, m, k);
  store_out<false>(p, a, m, k, v);
}

// total = pixels x K / 8; thread i: pixel i / (K / 8), channels 8 (i % (K / 8)) onwards.
__global__ void conv_depthwise_f16_kernel(const ConvParams p, const ConvArgs a, int cp, int64_t total) {
  const auto* x = static_cast<const __half*>(a.x);
  const auto* w = static_cast<const __half*>(a.w);
  const int kq = p.K / 8;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k0 = static_cast<int>(i % kq) * 8, m = static_cast<int>(i / kq);
    int n, oh, ow;
    pixel_of(p, m, &n, &oh, &ow);
    float acc[8] = {};
    for (int r = 0; r < p.R; ++r) {
      const int ih = oh * p.stride_h - p.pad_h + r * p.dil_h;
      if (ih < 0 || ih >= p.H) continue;
      for (int s = 0; s < p.S; ++s) {
        const int iw = ow * p.stride_w - p.pad_w + s * p.dil_w;
        if (iw < 0 || iw >= p.W) continue;
        const uint4 raw = *reinterpret_cast<const uint4*>(x + (static_cast<int64_t>(n * p.H + ih) * p.W + iw) * p.in_ld + k0);
        const __half* xv = reinterpret_cast<const __half*>(&raw);
        const __half* wp = w + static_cast<int64_t>(k0) * p.Kp + (r * p.S + s) * cp;
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = fmaf(__half2float(xv[j]), __half2float(wp[j * p.Kp]), acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) epilogue_store(p, a, m, k0 + j, acc[j]);
  }
}

// total = pixels x K; thread i: pixel i / K, output channel i % K, reading its group's cg input channels.
__global__ void conv_grouped_f16_kernel(const ConvParams p, const ConvArgs a, int cg, int kg, int cp, int64_t total) {
  const auto* x = static_cast<const __half*>(a.x);
  const auto* w = static_cast<const __half*>(a.w);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % p.K), m = static_cast<int>(i / p.K);
    int n, oh, ow;
    pixel_of(p, m, &n, &oh, &ow);
    const int c0 = k / kg * cg;
    float acc = 0.f;
    for (int r = 0; r < p.R; ++r) {
      const int ih = oh * p.stride_h - p.pad_h + r * p.dil_h;
      if (ih < 0 || ih >= p.H) continue;
      for (int s = 0; s < p.S; ++s) {
        const int iw = ow * p.stride_w - p.pad_w + s * p.dil_w;
        if (iw < 0 || iw >= p.W) continue;
        const __half* xp = x + (static_cast<int64_t>(n * p.H + ih) * p.W + iw) * p.in_ld + c0;
        const __half* wp = w + static_cast<int64_t>(k) * p.Kp + (r * p.S + s) * cp;
        for (int c = 0; c < cg; ++c) acc = fmaf(__half2float(xp[c]), __half2float(wp[c]), acc);
      }
    }
    epilogue_store(p, a, m, k, acc);
  }
}

}  // namespace

Status launch_conv_grouped_f16(const ConvParams& p, const ConvArgs& a, int groups, int cg, int cp, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(p.N) * p.OH * p.OW * p.K;
  if (groups < 1 || p.K % groups || total > INT32_MAX) return internal("conv_grouped_f16: bad groups or size");
  if (total == 0) return Status::ok();
  const bool depthwise = cg == 1 && groups == p.K && p.K % 8 == 0 && p.in_ld % 8 == 0 && aligned(a.x, 16);
  const int64_t items = depthwise ? total / 8 : total;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((items + 255) / 256, 1 << 20));
  if (depthwise) {
    conv_depthwise_f16_kernel<<<blocks, 256, 0, stream>>>(p, a, cp, items);
  } else {
    conv_grouped_f16_kernel<<<blocks, 256, 0, stream>>>(p, a, cg, p.K / groups, cp, items);
  }
  return cuda_status(cudaGetLastError(), "conv_grouped_f16");
}

}  // namespace qd::cuda
