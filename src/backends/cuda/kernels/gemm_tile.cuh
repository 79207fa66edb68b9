// A tiled fp32 GEMM core shared by MatMul/Gemm (matmul.cu) and the direct convolution (conv_direct.cu, an implicit
// GEMM whose B operand is gathered from the input on the fly): C[M, N] = sum_k A(m, k) * B(k, n) per batch, with
// 64x64 output tiles, 16-deep k slices staged in shared memory, 4x4 outputs per thread and fp32 accumulation.
// Loaders and the epilogue are functors, so each user brings its own addressing (transposes, broadcast batches,
// im2col) and output (alpha/beta/C, bias) while sharing the inner loop.
//   LA: void batch(int64_t b); float operator()(int64_t m, int64_t k) const   (called for m < M, k < K only)
//   LB: void batch(int64_t b); float operator()(int64_t k, int64_t n) const   (called for k < K, n < N only)
//   EP: void operator()(int64_t b, int64_t m, int64_t n, float acc) const      (called for m < M, n < N only)
#pragma once

#include "backends/cuda/kernels/generic_device.cuh"

namespace qd::cuda {

constexpr int kGemmBM = 64, kGemmBN = 64, kGemmBK = 16, kGemmThreads = 256;

template <typename LA, typename LB, typename EP>
__global__ void __launch_bounds__(kGemmThreads)
    gemm_tile_kernel(int64_t M, int64_t N, int64_t K, int64_t batches, LA la0, LB lb0, EP ep) {
  __shared__ __align__(16) float As[kGemmBK][kGemmBM];
  __shared__ __align__(16) float Bs[kGemmBK][kGemmBN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t tiles_m = ceil_div(M, kGemmBM);
  for (int64_t b = blockIdx.z; b < batches; b += gridDim.z) {
    LA la = la0;
    LB lb = lb0;
    la.batch(b);
    lb.batch(b);
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      const int64_t m0 = tm * kGemmBM, n0 = static_cast<int64_t>(blockIdx.x) * kGemmBN;
      float acc[4][4] = {};
      for (int64_t k0 = 0; k0 < K; k0 += kGemmBK) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // A slice: consecutive threads on consecutive k
          const int e = tid + i * kGemmThreads, ml = e / kGemmBK, kl = e % kGemmBK;
          const int64_t m = m0 + ml, k = k0 + kl;
          As[kl][ml] = (m < M && k < K) ? la(m, k) : 0.f;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // B slice: consecutive threads on consecutive n
          const int e = tid + i * kGemmThreads, kl = e / kGemmBN, nl = e % kGemmBN;
          const int64_t k = k0 + kl, n = n0 + nl;
          Bs[kl][nl] = (k < K && n < N) ? lb(k, n) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kGemmBK; ++kk) {
          const float4 av = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
          const float4 bv = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
          const float ar[4] = {av.x, av.y, av.z, av.w}, br[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
          }
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t m = m0 + ty * 4 + i;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t n = n0 + tx * 4 + j;
          if (n < N) ep(b, m, n, acc[i][j]);
        }
      }
    }
  }
}

// Launches the GEMM over `batches` independent problems.
template <typename LA, typename LB, typename EP>
Status launch_gemm_tile(int64_t M, int64_t N, int64_t K, int64_t batches, const LA& la, const LB& lb, const EP& ep,
                        cudaStream_t s) {
  if (M == 0 || N == 0 || batches == 0) return Status::ok();
  const int64_t tiles_n = ceil_div(N, kGemmBN);
  if (tiles_n > 0x7fffffff) return unsupported("GEMM with N too large");
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(std::min<int64_t>(ceil_div(M, kGemmBM), 65535)),
                  static_cast<unsigned>(std::min<int64_t>(batches, 65535)));
  gemm_tile_kernel<LA, LB, EP><<<grid, kGemmThreads, 0, s>>>(M, N, K, batches, la, lb, ep);
  QD_CUDA_LAUNCHED();
  return Status::ok();
}

}  // namespace qd::cuda
