// Grouped and depthwise convolutions, INT8 and fp16: a group's few input channels are too few for the implicit GEMM's
// 32-deep tensor-core steps, so they run on CUDA cores (int32 or fp32 accumulation) with the implicit GEMM's epilogue.
// One thread computes one output (pixel m, channel k); consecutive threads take consecutive channels of one pixel, so
// their inputs (a depthwise conv's channel k reads input channel k) are adjacent. fp16 depthwise convs (one input
// channel per group, one output channel per input channel) take 8 channels of a pixel per thread, in 16-byte loads
// (2 where that leaves few threads), and consecutive threads consecutive pixels: a warp then reads the same weights (one broadcast load each, where
// threads over channels loaded 32 weight rows) and writes NCHW outputs in whole lines.
#include "backends/cuda/kernels/conv_grouped.h"

#include <type_traits>

#include "backends/cuda/kernels/activation.cuh"
#include "backends/cuda/kernels/conv_igemm_kernels.cuh"

namespace qd::cuda {
namespace {

// f(x_offset, tap) for each kernel tap (r, s) of output pixel m whose input pixel lies inside the image: x_offset is
// that pixel's first value (in_ld values a pixel), tap = r * S + s.
template <typename F>
__device__ __forceinline__ void for_each_tap(const ConvParams& p, int m, F f) {
  const int n = m / (p.OH * p.OW), pix = m - n * p.OH * p.OW, oh = pix / p.OW, ow = pix - oh * p.OW;
  for (int r = 0; r < p.R; ++r) {
    const int ih = oh * p.stride_h - p.pad_h + r * p.dil_h;
    if (ih < 0 || ih >= p.H) continue;
    for (int s = 0; s < p.S; ++s) {
      const int iw = ow * p.stride_w - p.pad_w + s * p.dil_w;
      if (iw < 0 || iw >= p.W) continue;
      f((static_cast<int64_t>(n * p.H + ih) * p.W + iw) * p.in_ld, r * p.S + s);
    }
  }
}

#define QD_GRID_STRIDE(i, total)                                                                   \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (total); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// int32 dot product over R x S x cg, then the implicit GEMM's INT8 epilogue arithmetic.
__global__ void conv_grouped_i8_kernel(const ConvParams p, const ConvArgs a, int cg, int kg, int cp, int64_t total) {
  const auto* x = static_cast<const int8_t*>(a.x);
  const auto* w = static_cast<const int8_t*>(a.w);
  const SiluTies ties(p, a);
  QD_GRID_STRIDE(i, total) {
    const int k = static_cast<int>(i % p.K), m = static_cast<int>(i / p.K), c0 = k / kg * cg;
    int acc = 0;
    for_each_tap(p, m, [&](int64_t at, int tap) {
      const int8_t* wp = w + static_cast<int64_t>(k) * p.Kp + tap * cp;
      for (int c = 0; c < cg; ++c) acc += static_cast<int>(x[at + c0 + c]) * static_cast<int>(wp[c]);
    });
    const float v = __fadd_rn(__fmul_rn(static_cast<float>(acc), a.alpha[k]), a.bias[k]);
    const float f = ties.act(p, v);
    float y = f;
    if (has_residual(a)) y += residual_value<true>(p, a, m, k);
    store_out<true>(p, a, m, k, exact_silu_near_tie(p, a, ties, m, k, v, f, y));
  }
}

__device__ __forceinline__ void store_f16(const ConvParams& p, const ConvArgs& a, int m, int k, float acc) {
  const float v = apply_act(acc + a.bias[k], p.act, p.act_a, p.act_b);
  store_out<false>(p, a, m, k, v + residual_value<false>(p, a, m, k));
}

__global__ void conv_grouped_f16_kernel(const ConvParams p, const ConvArgs a, int cg, int kg, int cp, int64_t total) {
  const auto* x = static_cast<const __half*>(a.x);
  const auto* w = static_cast<const __half*>(a.w);
  QD_GRID_STRIDE(i, total) {
    const int k = static_cast<int>(i % p.K), m = static_cast<int>(i / p.K), c0 = k / kg * cg;
    float acc = 0.f;
    for_each_tap(p, m, [&](int64_t at, int tap) {
      const __half* wp = w + static_cast<int64_t>(k) * p.Kp + tap * cp;
      for (int c = 0; c < cg; ++c) acc = fmaf(__half2float(x[at + c0 + c]), __half2float(wp[c]), acc);
    });
    store_f16(p, a, m, k, acc);
  }
}

// total = pixels x K / V; thread i: pixel i % pixels, channels V (i / pixels) onwards (V = 8: 16-byte loads; V = 2
// where 8 would leave too few threads, e.g. at batch 1).
template <int V>
__global__ void conv_depthwise_f16_kernel(const ConvParams p, const ConvArgs a, int cp, int64_t total) {
  using Load = std::conditional_t<V == 8, uint4, __half2>;
  const auto* x = static_cast<const __half*>(a.x);
  const auto* w = static_cast<const __half*>(a.w);
  const int pixels = p.N * p.OH * p.OW;
  // 16-byte stores where the output is NHWC fp16 rows with nothing else to write.
  const bool vec_out = V == 8 && p.out_format == OutFormat::kNhwcF16 && !a.residual && !a.y2 && p.out_ld % 8 == 0 &&
                       p.out_coff % 8 == 0 && aligned(a.y, 16);
  QD_GRID_STRIDE(i, total) {
    const int g = static_cast<int>(i / pixels), m = static_cast<int>(i - static_cast<int64_t>(g) * pixels), k0 = g * V;
    float acc[V] = {};
    for_each_tap(p, m, [&](int64_t at, int tap) {
      const Load raw = *reinterpret_cast<const Load*>(x + at + k0);
      const __half* xv = reinterpret_cast<const __half*>(&raw);
      const __half* wp = w + static_cast<int64_t>(k0) * p.Kp + tap * cp;
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = fmaf(__half2float(xv[j]), __half2float(wp[j * p.Kp]), acc[j]);
    });
    if (vec_out) {
      uint4 raw;
      __half2* h2 = reinterpret_cast<__half2*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        h2[j] = __floats2half2_rn(apply_act(acc[2 * j] + a.bias[k0 + 2 * j], p.act, p.act_a, p.act_b),
                                  apply_act(acc[2 * j + 1] + a.bias[k0 + 2 * j + 1], p.act, p.act_a, p.act_b));
      }
      *reinterpret_cast<uint4*>(static_cast<__half*>(a.y) + static_cast<int64_t>(m) * p.out_ld + p.out_coff + k0) = raw;
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) store_f16(p, a, m, k0 + j, acc[j]);
    }
  }
}

Status check_grouped(const ConvParams& p, int groups, int64_t total, const char* what) {
  if (groups < 1 || p.K % groups || total > INT32_MAX) return internal(std::string(what) + ": bad groups or size");
  return Status::ok();
}

constexpr int64_t kDepthwiseWideThreads = 128 * 1024;

unsigned grid_for(int64_t items) { return static_cast<unsigned>(std::min<int64_t>(ceil_div(items, 256), 65535 * 16)); }

}  // namespace

Status launch_conv_grouped_i8(const ConvParams& p, const ConvArgs& a, int groups, int cg, int cp, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(p.N) * p.OH * p.OW * p.K;
  if (total == 0) return Status::ok();
  QD_RETURN_IF_ERROR(check_grouped(p, groups, total, "conv_grouped_i8"));
  conv_grouped_i8_kernel<<<grid_for(total), 256, 0, stream>>>(p, a, cg, p.K / groups, cp, total);
  return cuda_status(cudaGetLastError(), "conv_grouped_i8");
}

Status launch_conv_grouped_f16(const ConvParams& p, const ConvArgs& a, int groups, int cg, int cp, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(p.N) * p.OH * p.OW * p.K;
  if (total == 0) return Status::ok();
  QD_RETURN_IF_ERROR(check_grouped(p, groups, total, "conv_grouped_f16"));
  if (cg == 1 && groups == p.K && p.K % 8 == 0 && p.in_ld % 8 == 0 && aligned(a.x, 16)) {
    // 8 channels a thread while that leaves a few waves of threads on the GPU, else 2.
    if (total / 8 >= kDepthwiseWideThreads) {
      conv_depthwise_f16_kernel<8><<<grid_for(total / 8), 256, 0, stream>>>(p, a, cp, total / 8);
    } else {
      conv_depthwise_f16_kernel<2><<<grid_for(total / 2), 256, 0, stream>>>(p, a, cp, total / 2);
    }
  } else {
    conv_grouped_f16_kernel<<<grid_for(total), 256, 0, stream>>>(p, a, cg, p.K / groups, cp, total);
  }
  return cuda_status(cudaGetLastError(), "conv_grouped_f16");
}

}  // namespace qd::cuda
