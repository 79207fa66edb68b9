#include <algorithm>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernels/eltwise_chain.h"
#include "backends/cuda/kernels/pdl.cuh"

namespace qd::cuda {

namespace {

// The same formulas as the generic unary/binary kernels, so fusing changes no result.
__device__ __forceinline__ float step(const EwStep& s, float x, float c) {
  switch (s.op) {
    case EwOp::kRelu: return fmaxf(x, 0.f);
    case EwOp::kSigmoid: return 1.f / (1.f + expf(-x));
    case EwOp::kTanh: return tanhf(x);
    case EwOp::kExp: return expf(x);
    case EwOp::kNeg: return -x;
    case EwOp::kAbs: return fabsf(x);
    case EwOp::kSqrt: return sqrtf(x);
    case EwOp::kReciprocal: return 1.f / x;
    case EwOp::kHardSigmoid: return fmaxf(0.f, fminf(1.f, s.a * x + s.b));
    case EwOp::kHardSwish: return x * fmaxf(0.f, fminf(1.f, x / 6.f + 0.5f));
    case EwOp::kLeakyRelu: return x >= 0.f ? x : s.a * x;
    case EwOp::kClip: return fminf(fmaxf(x, s.a), s.b);
    case EwOp::kAdd: return x + c;
    case EwOp::kSub: return x - c;
    case EwOp::kMul: return x * c;
    case EwOp::kDiv: return x / c;
    case EwOp::kPow: return powf(x, c);
    case EwOp::kMax: return fmaxf(x, c);
    case EwOp::kMin: return fminf(x, c);
    case EwOp::kRSub: return c - x;
    case EwOp::kRDiv: return c / x;
    case EwOp::kRPow: return powf(c, x);
  }
  return x;
}

// Index arithmetic in I: uint32_t when every index fits (64-bit division costs ~4x more), int64_t otherwise.
template <typename I>
__device__ __forceinline__ float run_program(const EwProgram& p, float v, I i) {
  for (int k = 0; k < p.steps; ++k) {
    const EwStep& s = p.step[k];
    float c = s.a;
    if (s.operand >= 0) {
      const EwOperand& o = p.operand[s.operand];
      c = o.p[(i / static_cast<I>(o.div[0])) % static_cast<I>(o.mod[0]) * static_cast<I>(o.mul[0]) +
              (i / static_cast<I>(o.div[1])) % static_cast<I>(o.mod[1]) * static_cast<I>(o.mul[1])];
    }
    v = step(s, v, c);
  }
  return v;
}

template <typename I>
__global__ void eltwise_chain_kernel(const float* x, float* y, I n, const EwProgram p) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * blockDim.x) {
    y[i] = run_program(p, x[i], i);
  }
}

__device__ __forceinline__ int segment_of(const SliceConcatParams& p, int col) {
  int k = 0;
  while (k + 1 < p.segments && col >= p.seg[k + 1].out_start) ++k;
  return k;
}

// Row-major x: one thread per output element.
template <typename I>
__global__ void slice_concat_rows_kernel(const float* x, float* y, const SliceConcatParams p) {
  const I n = static_cast<I>(p.rows) * p.out_cols;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I r = i / p.out_cols;
    const int col = static_cast<int>(i - r * p.out_cols);
    const SliceSegment& sg = p.seg[segment_of(p, col)];
    const int c = col - sg.out_start;
    const float v = run_program(sg.prog, x[r * p.src_cols + sg.src_start + c], r * sg.len + c);
    const I b = r / static_cast<I>(p.rows_per_batch);
    y[b * static_cast<I>(p.out_batch_stride) + static_cast<I>(p.out_offset) +
      (r - b * static_cast<I>(p.rows_per_batch)) * p.out_cols + col] = v;
  }
}

// Transposed x (src_hw > 0): a block takes kTilePixels pixels of one (n, a): it reads their C columns along the
// pixels (coalesced) into shared memory, then writes the tile's output rows, which are contiguous in y.
constexpr int kTilePixels = 32;
template <typename I>
__global__ void slice_concat_tiled_kernel(const float* x, float* y, const SliceConcatParams p) {
  extern __shared__ float tile[];  // [C][kTilePixels + 1]
  pdl_wait();
  pdl_trigger();
  const int na = blockIdx.y, p0 = blockIdx.x * kTilePixels, C = p.src_cols;
  const int npix = min(kTilePixels, p.src_hw - p0);
  const float* xs = x + (static_cast<I>(na) * C) * p.src_hw + p0;
  // kLoads loads in flight per thread before their stores: one at a time, a block waited out the load latency about
  // 11 times (85 channels), 9-13 us per YOLOv5 head at batch 1 (H200).
  constexpr int kLoads = 8;
  for (int e0 = threadIdx.x; e0 < C * kTilePixels; e0 += kLoads * blockDim.x) {
    float v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int e = e0 + u * blockDim.x, c = e / kTilePixels, px = e - c * kTilePixels;
      if (e < C * kTilePixels && px < npix) v[u] = xs[static_cast<I>(c) * p.src_hw + px];
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int e = e0 + u * blockDim.x, c = e / kTilePixels, px = e - c * kTilePixels;
      if (e < C * kTilePixels && px < npix) tile[c * (kTilePixels + 1) + px] = v[u];
    }
  }
  __syncthreads();
  const I r0 = static_cast<I>(na) * p.src_hw + p0;  // the tile's first row
  const I b = r0 / static_cast<I>(p.rows_per_batch);
  float* yo = y + b * static_cast<I>(p.out_batch_stride) + static_cast<I>(p.out_offset) +
              (r0 - b * static_cast<I>(p.rows_per_batch)) * p.out_cols;
  // Segment by segment, so that a warp runs one program (no divergence, uniform parameter loads).
  for (int k = 0; k < p.segments; ++k) {
    const SliceSegment& sg = p.seg[k];
    for (int e = threadIdx.x; e < npix * sg.len; e += blockDim.x) {
      const int px = e / sg.len, c = e - px * sg.len;
      yo[px * p.out_cols + sg.out_start + c] =
          run_program(sg.prog, tile[(sg.src_start + c) * (kTilePixels + 1) + px], (r0 + px) * sg.len + c);
    }
  }
}

}  // namespace

// Whether every index these kernels form stays below 2^31 (then they use 32-bit arithmetic).
static bool fits_u32(int64_t elements) { return elements < (int64_t{1} << 31); }
static int64_t grid_for(int64_t n) { return std::min<int64_t>(ceil_div(n, 256), 65535 * 16); }

Status launch_slice_concat(const float* x, float* y, const SliceConcatParams& p, cudaStream_t s) {
  const int64_t n = p.rows * p.out_cols;
  if (n == 0) return Status::ok();
  const int64_t out_end = (p.rows / p.rows_per_batch) * p.out_batch_stride + p.out_offset + p.rows_per_batch * p.out_cols;
  const bool small = fits_u32(p.rows * std::max(p.src_cols, p.out_cols)) && fits_u32(out_end);
  if (p.src_hw > 0) {
    const int64_t na = p.rows / p.src_hw;
    if (p.src_cols > kMaxSliceTransposedCols || na > 65535 || p.rows % p.src_hw || p.rows_per_batch % p.src_hw) {
      return internal("slice_concat: transposed source out of range");
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(p.src_hw, kTilePixels)), static_cast<unsigned>(na));
    const size_t smem = static_cast<size_t>(p.src_cols) * (kTilePixels + 1) * sizeof(float);
    if (small) {
      launch_pdl(slice_concat_tiled_kernel<uint32_t>, grid, 256, smem, s, x, y, p);
    } else {
      launch_pdl(slice_concat_tiled_kernel<int64_t>, grid, 256, smem, s, x, y, p);
    }
  } else if (small) {
    slice_concat_rows_kernel<uint32_t><<<static_cast<unsigned>(grid_for(n)), 256, 0, s>>>(x, y, p);
  } else {
    slice_concat_rows_kernel<int64_t><<<static_cast<unsigned>(grid_for(n)), 256, 0, s>>>(x, y, p);
  }
  return cuda_status(cudaGetLastError(), "slice_concat");
}

Status launch_eltwise_chain(const float* x, float* y, int64_t n, const EwProgram& prog, cudaStream_t s) {
  if (n == 0) return Status::ok();
  if (fits_u32(n)) {
    eltwise_chain_kernel<uint32_t><<<static_cast<unsigned>(grid_for(n)), 256, 0, s>>>(x, y, static_cast<uint32_t>(n), prog);
  } else {
    eltwise_chain_kernel<int64_t><<<static_cast<unsigned>(grid_for(n)), 256, 0, s>>>(x, y, n, prog);
  }
  return cuda_status(cudaGetLastError(), "eltwise_chain");
}

}  // namespace qd::cuda
