#include "backends/cuda/kernels/rows.h"

#include "backends/cuda/kernels/generic_device.cuh"

namespace qd::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp a row

// kVec float4 of a row per lane: columns 4 * (lane + 32 t), t < kVec.
template <int kVec>
__global__ void __launch_bounds__(32 * kRowsPerBlock) add_layer_norm_rows_kernel(RowNormIo io, int64_t rows, int C,
                                                                                   float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t base = row * C;
  float4 v[kVec];
  float s = 0.f;
#pragma unroll
  for (int t = 0; t < kVec; ++t) {
    const int c = 4 * (lane + 32 * t);
    v[t] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c >= C) continue;
    if (io.x16) {
      const uint2 h = *reinterpret_cast<const uint2*>(io.x16 + base + c);
      const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&h.x));
      const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&h.y));
      v[t] = make_float4(lo.x, lo.y, hi.x, hi.y);
    } else {
      v[t] = *reinterpret_cast<const float4*>(io.x + base + c);
    }
    if (io.r) {
      const float4 r = *reinterpret_cast<const float4*>(io.r + base + c);
      v[t].x += r.x;
      v[t].y += r.y;
      v[t].z += r.z;
      v[t].w += r.w;
    }
    if (io.sum) *reinterpret_cast<float4*>(io.sum + base + c) = v[t];
    s += v[t].x + v[t].y + v[t].z + v[t].w;
  }
  const float mean = warp_sum(s) / static_cast<float>(C);
  float q = 0.f;
#pragma unroll
  for (int t = 0; t < kVec; ++t) {
    if (4 * (lane + 32 * t) >= C) continue;
    const float a = v[t].x - mean, b = v[t].y - mean, c = v[t].z - mean, d = v[t].w - mean;
    q += a * a + b * b + c * c + d * d;
  }
  const float inv = 1.f / sqrtf(warp_sum(q) / static_cast<float>(C) + eps);
#pragma unroll
  for (int t = 0; t < kVec; ++t) {
    const int c = 4 * (lane + 32 * t);
    if (c >= C) continue;
    const float4 g = *reinterpret_cast<const float4*>(io.gamma + c);
    const float4 b = io.beta ? *reinterpret_cast<const float4*>(io.beta + c) : make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 y = make_float4((v[t].x - mean) * inv * g.x + b.x, (v[t].y - mean) * inv * g.y + b.y,
                                 (v[t].z - mean) * inv * g.z + b.z, (v[t].w - mean) * inv * g.w + b.w);
    if (io.y32) *reinterpret_cast<float4*>(io.y32 + base + c) = y;
    if (io.y16) {
      __half2 h[2] = {__floats2half2_rn(y.x, y.y), __floats2half2_rn(y.z, y.w)};
      *reinterpret_cast<uint2*>(io.y16 + base + c) = *reinterpret_cast<const uint2*>(h);
    }
  }
}

}  // namespace

Status add_layer_norm_rows(const RowNormIo& io, int64_t rows, int C, float eps, cudaStream_t s) {
  if (C <= 0 || C % 4 || C > kRowNormMaxC) return internal("add_layer_norm_rows: C must be a multiple of 4 up to 1024");
  if (rows == 0) return Status::ok();
  const auto blocks = static_cast<unsigned>(ceil_div(rows, int64_t{kRowsPerBlock}));
  const auto vec = ceil_div(C, 128);
  const dim3 block(32 * kRowsPerBlock);
  if (vec == 1) {
    add_layer_norm_rows_kernel<1><<<blocks, block, 0, s>>>(io, rows, C, eps);
  } else if (vec == 2) {
    add_layer_norm_rows_kernel<2><<<blocks, block, 0, s>>>(io, rows, C, eps);
  } else if (vec <= 4) {
    add_layer_norm_rows_kernel<4><<<blocks, block, 0, s>>>(io, rows, C, eps);
  } else {
    add_layer_norm_rows_kernel<8><<<blocks, block, 0, s>>>(io, rows, C, eps);
  }
  QD_CUDA_LAUNCHED();
  return Status::ok();
}

}  // namespace qd::cuda
