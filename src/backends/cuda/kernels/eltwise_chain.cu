#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_fp16.h>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernels/eltwise_chain.h"
#include "backends/cuda/kernels/generic_device.cuh"
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
    case EwOp::kPow: return pow_float(x, c);
    case EwOp::kMax: return fmaxf(x, c);
    case EwOp::kMin: return fminf(x, c);
    case EwOp::kRSub: return c - x;
    case EwOp::kRDiv: return c / x;
    case EwOp::kRPow: return pow_float(c, x);
  }
  return x;
}

// The element of operand o that element i of x reads. Index arithmetic in I: uint32_t when every index fits, with the
// operand's magic numbers (YOLOv5s' box decode at batch 32 spent most of its instructions in the divisions), int64_t
// otherwise.
template <typename I>
__device__ __forceinline__ float operand_at(const EwOperand& o, I i) {
  if constexpr (std::is_same_v<I, uint32_t>) {
    uint32_t at = 0;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      if (o.mul[t] == 0) continue;
      const uint32_t q = fast_div(i, o.div_magic[t], o.div_shift[t]);
      const uint32_t r = q - fast_div(q, o.mod_magic[t], o.mod_shift[t]) * static_cast<uint32_t>(o.mod[t]);
      at += r * static_cast<uint32_t>(o.mul[t]);
    }
    return o.p[at];
  } else {
    return o.p[(i / o.div[0]) % o.mod[0] * o.mul[0] + (i / o.div[1]) % o.mod[1] * o.mul[1]];
  }
}

template <typename I>
__device__ __forceinline__ float run_program(const EwProgram& p, float v, I i) {
  for (int k = 0; k < p.steps; ++k) {
    const EwStep& s = p.step[k];
    v = step(s, v, s.operand >= 0 ? operand_at(p.operand[s.operand], i) : s.a);
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
template <typename I, typename TY>
__global__ void slice_concat_rows_kernel(const float* x, TY* y, const SliceConcatParams p) {
  const I n = static_cast<I>(p.rows) * p.out_cols;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I r = i / p.out_cols;
    const int col = static_cast<int>(i - r * p.out_cols);
    const SliceSegment& sg = p.seg[segment_of(p, col)];
    const int c = col - sg.out_start;
    const float v = run_program(sg.prog, x[r * p.src_cols + sg.src_start + c], r * sg.len + c);
    const I b = r / static_cast<I>(p.rows_per_batch);
    y[b * static_cast<I>(p.out_batch_stride) + static_cast<I>(p.out_offset) +
      (r - b * static_cast<I>(p.rows_per_batch)) * p.out_cols + col] = from_float<TY>(v);
  }
}

// Transposed x (src_hw > 0): a block takes kTilePixels pixels of one (n, a). It copies their C columns along the
// pixels (coalesced, cp.async 16 bytes at a time where the planes allow) into a tile in shared memory as they are;
// then the tile's output rows, contiguous in y, are written into shared memory in y's type: the columns with a program
// (YOLO's box) by a thread per value, spread over all the warps, the others by a warp per column, each lane two
// neighbouring pixels; the rows then go out 16 bytes per thread. x and y are fp32 or fp16 (a head conv's fp16 result
// for an fp16 output binding). A copied column costs one shared-memory load and two stores per two values (no
// conversion from fp16 to fp16); only the columns with a program convert and compute. Issue slots bound the kernel
// (ncu, YOLOv5s' P3 level at batch 32: ~0.9 warp instructions issued per cycle and scheduler), so its loops are
// kept short: the first version (a lane per column, per-value index arithmetic, values staged as floats) issued ~2.5
// warp instructions per output value and ran at 1.3 TB/s; the box columns taken a warp per column, like the copies,
// left the first two warps 4 programs per lane and the P3 level 15% slower.
constexpr int kTilePixels = 64;
template <typename T>
__host__ __device__ constexpr int tile_stride() {  // a tile row: kTilePixels values and a 16-byte pad
  return kTilePixels + 16 / static_cast<int>(sizeof(T));
}
template <typename TX, typename TY>
constexpr size_t slice_concat_smem_as(int src_cols, int out_cols) {
  return static_cast<size_t>(src_cols) * tile_stride<TX>() * sizeof(TX) +
         (static_cast<size_t>(kTilePixels) * out_cols * sizeof(TY) + 15) / 16 * 16;
}
// The largest of the four type pairs (fp32 in and out).
constexpr size_t slice_concat_smem(int src_cols, int out_cols) {
  return slice_concat_smem_as<float, float>(src_cols, out_cols);
}
constexpr size_t kSliceConcatMaxSmem = 96 * 1024;

template <typename TY, typename TX>
__device__ __forceinline__ TY convert(TX v) {
  if constexpr (std::is_same_v<TX, TY>) {
    return v;
  } else {
    return from_float<TY>(to_float(v));
  }
}

__device__ __forceinline__ void cp_async16(void* smem_dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst))),
               "l"(src));
}

template <typename I, typename TX, typename TY>
__global__ void slice_concat_tiled_kernel(const TX* x, TY* y, const SliceConcatParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  pdl_wait();
  pdl_trigger();
  const int na = blockIdx.y, p0 = blockIdx.x * kTilePixels, C = p.src_cols, oc = p.out_cols;
  const int npix = min(kTilePixels, p.src_hw - p0);
  constexpr int kStride = tile_stride<TX>();
  TX* tile = reinterpret_cast<TX*>(smem);  // [C][kStride]
  TY* rows = reinterpret_cast<TY*>(smem + static_cast<size_t>(C) * kStride * sizeof(TX));  // [npix][oc]
  const TX* xs = x + (static_cast<I>(na) * C) * p.src_hw + p0;
  constexpr int kLV = 16 / sizeof(TX), kGroups = kTilePixels / kLV;
  if (p.src_hw % kLV == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {  // npix is then a multiple of kLV too
    for (int g = threadIdx.x; g < C * kGroups; g += blockDim.x) {
      const int c = g / kGroups, px = (g % kGroups) * kLV;
      if (px < npix) cp_async16(tile + c * kStride + px, xs + static_cast<I>(c) * p.src_hw + px);
    }
    asm volatile("cp.async.wait_all;\n" ::);
  } else {
    constexpr int kLoads = 8;  // in flight per thread before their stores
    for (int e0 = threadIdx.x; e0 < C * kTilePixels; e0 += kLoads * blockDim.x) {
      TX v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int e = e0 + u * blockDim.x, c = e / kTilePixels, px = e % kTilePixels;
        if (e < C * kTilePixels && px < npix) v[u] = xs[static_cast<I>(c) * p.src_hw + px];
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int e = e0 + u * blockDim.x, c = e / kTilePixels, px = e % kTilePixels;
        if (e < C * kTilePixels && px < npix) tile[c * kStride + px] = v[u];
      }
    }
  }
  __syncthreads();
  const I r0 = static_cast<I>(na) * p.src_hw + p0;  // the tile's first row
  const I b = r0 / static_cast<I>(p.rows_per_batch);
  TY* yo = y + b * static_cast<I>(p.out_batch_stride) + static_cast<I>(p.out_offset) +
           (r0 - b * static_cast<I>(p.rows_per_batch)) * oc;
  // The columns with a program: a thread per column and pixel, over all the warps.
  int prog_cols = 0;
  for (int k = 0; k < p.segments; ++k) prog_cols += p.seg[k].prog.steps ? p.seg[k].len : 0;
  for (int e = threadIdx.x; e < prog_cols * npix; e += blockDim.x) {
    int c = e / npix, k = 0;  // the c-th column with a program: segment k's column c
    const int px = e - c * npix;
    while (p.seg[k].prog.steps == 0 || c >= p.seg[k].len) {
      if (p.seg[k].prog.steps != 0) c -= p.seg[k].len;
      ++k;
    }
    const SliceSegment& sg = p.seg[k];
    rows[px * oc + sg.out_start + c] =
        from_float<TY>(run_program(sg.prog, to_float(tile[(sg.src_start + c) * kStride + px]), (r0 + px) * sg.len + c));
  }
  // The others copied, a warp per column (output column j to warp j % warps), each lane two neighbouring pixels.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int px = 2 * lane;  // this lane's pixels: px, px + 1
  if (px < npix) {
    const bool two = px + 1 < npix;
    for (int k = 0; k < p.segments; ++k) {
      const SliceSegment& sg = p.seg[k];
      if (sg.prog.steps != 0) continue;
      const TX* src = tile + sg.src_start * kStride + px;
      TY* dst = rows + px * oc + sg.out_start;
      for (int c = ((warp - sg.out_start) % warps + warps) % warps; c < sg.len; c += warps) {
        const TX* t = src + c * kStride;
        dst[c] = convert<TY>(t[0]);
        if (two) dst[oc + c] = convert<TY>(t[1]);
      }
    }
  }
  __syncthreads();
  // The tile's npix output rows are npix * oc consecutive values of y.
  constexpr int kOV = 16 / sizeof(TY);
  const int total = npix * oc;
  const int nvec = reinterpret_cast<uintptr_t>(yo) % 16 == 0 ? total / kOV : 0;
  for (int t = threadIdx.x; t < nvec; t += blockDim.x) {
    reinterpret_cast<uint4*>(yo)[t] = reinterpret_cast<const uint4*>(rows)[t];
  }
  for (int e = nvec * kOV + threadIdx.x; e < total; e += blockDim.x) yo[e] = rows[e];
}

}  // namespace

// Whether every index these kernels form stays below 2^31 (then they use 32-bit arithmetic).
static bool fits_u32(int64_t elements) { return elements < (int64_t{1} << 31); }
static int64_t grid_for(int64_t n) { return std::min<int64_t>(ceil_div(n, 256), 65535 * 16); }

template <typename TX, typename TY>
static void launch_slice_concat_as(const void* x, void* y, const SliceConcatParams& p, bool small, cudaStream_t s) {
  const auto* xt = static_cast<const TX*>(x);
  auto* yt = static_cast<TY*>(y);
  if (p.src_hw > 0) {
    const dim3 grid(static_cast<unsigned>(ceil_div(p.src_hw, kTilePixels)), static_cast<unsigned>(p.rows / p.src_hw));
    const size_t smem = slice_concat_smem_as<TX, TY>(p.src_cols, p.out_cols);
    if (small) {
      launch_pdl(slice_concat_tiled_kernel<uint32_t, TX, TY>, grid, 256, smem, s, xt, yt, p);
    } else {
      launch_pdl(slice_concat_tiled_kernel<int64_t, TX, TY>, grid, 256, smem, s, xt, yt, p);
    }
  } else if constexpr (std::is_same_v<TX, float>) {
    const unsigned grid = static_cast<unsigned>(grid_for(p.rows * p.out_cols));
    if (small) {
      slice_concat_rows_kernel<uint32_t, TY><<<grid, 256, 0, s>>>(xt, yt, p);
    } else {
      slice_concat_rows_kernel<int64_t, TY><<<grid, 256, 0, s>>>(xt, yt, p);
    }
  }
}

// Over 48 KiB of dynamic shared memory (fp32 tiles of wide heads) needs each kernel's consent, given once.
template <typename TX, typename TY>
static Status allow_slice_concat_smem() {
  for (const void* k : {reinterpret_cast<const void*>(slice_concat_tiled_kernel<uint32_t, TX, TY>),
                        reinterpret_cast<const void*>(slice_concat_tiled_kernel<int64_t, TX, TY>)}) {
    QD_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSliceConcatMaxSmem)));
  }
  return Status::ok();
}

Status slice_concat_init() {
  QD_RETURN_IF_ERROR((allow_slice_concat_smem<__half, __half>()));
  QD_RETURN_IF_ERROR((allow_slice_concat_smem<__half, float>()));
  QD_RETURN_IF_ERROR((allow_slice_concat_smem<float, __half>()));
  return allow_slice_concat_smem<float, float>();
}

bool slice_concat_transposed_fits(int src_cols, int out_cols) {
  return src_cols > 0 && src_cols <= kMaxSliceTransposedCols && out_cols > 0 &&
         slice_concat_smem(src_cols, out_cols) <= kSliceConcatMaxSmem;
}

Status launch_slice_concat(const void* x, DType xt, void* y, DType yt, const SliceConcatParams& p, cudaStream_t s) {
  const int64_t n = p.rows * p.out_cols;
  if (n == 0) return Status::ok();
  const int64_t out_end = (p.rows / p.rows_per_batch) * p.out_batch_stride + p.out_offset + p.rows_per_batch * p.out_cols;
  const bool small = fits_u32(p.rows * std::max(p.src_cols, p.out_cols)) && fits_u32(out_end);
  const bool x16 = xt == DType::kFloat16, y16 = yt == DType::kFloat16;
  if ((!x16 && xt != DType::kFloat32) || (!y16 && yt != DType::kFloat32) || (x16 && p.src_hw <= 0)) {
    return internal("slice_concat: unsupported tensor types");
  }
  if (p.src_hw > 0 && (!slice_concat_transposed_fits(p.src_cols, p.out_cols) || p.rows / p.src_hw > 65535 ||
                       p.rows % p.src_hw || p.rows_per_batch % p.src_hw)) {
    return internal("slice_concat: transposed source out of range");
  }
  if (x16 && y16) {
    launch_slice_concat_as<__half, __half>(x, y, p, small, s);
  } else if (x16) {
    launch_slice_concat_as<__half, float>(x, y, p, small, s);
  } else if (y16) {
    launch_slice_concat_as<float, __half>(x, y, p, small, s);
  } else {
    launch_slice_concat_as<float, float>(x, y, p, small, s);
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
