// Device-side helpers of the generic CUDA kernels: fp32/fp16 loads and stores (math always in fp32), grid-stride
// loops, strided walks passed by value, warp/block reductions. Included by .cu files only (the generic families'
// and eltwise_chain.cu).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernels/generic_families.h"
#include "ops/movement.h"

namespace qd::cuda {

constexpr int kBlock = 256;

// Blocks for n items processed by grid-stride loops (at least 1; capped, the loop covers the rest).
inline unsigned grid_1d(int64_t n, int block = kBlock) {
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(n, block), 1, int64_t{1} << 20));
}

// Every launch is followed by this: a bad configuration is an error of the node, not a silent no-op.
#define QD_CUDA_LAUNCHED() QD_CUDA_TRY(cudaGetLastError())

// for (int64_t i = global thread; i < n; i += all threads)
#define QD_GRID_LOOP(i, n)                                                                      \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// ---- fp32 / fp16 storage ----
// Pow for floats: a square exactly (as the reference's std::pow gives it; powf is within a few ulps), else powf.
__device__ __forceinline__ float pow_float(float x, float y) { return y == 2.f ? x * x : powf(x, y); }

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// Reads element i of a float tensor stored as fp32 or fp16 (parameters whose dtype is only known at run time).
__device__ __forceinline__ float load_any(const void* p, bool half, int64_t i) {
  return half ? __half2float(static_cast<const __half*>(p)[i]) : static_cast<const float*>(p)[i];
}

// Calls fn(T{}) with T = float or __half for a float storage type.
template <typename Fn>
Status dispatch_float_storage(DType t, Fn&& fn) {
  if (t == DType::kFloat32) return fn(float{});
  if (t == DType::kFloat16) return fn(__half{});
  return unsupported(std::string("element type ") + dtype_name(t) + " (float32/float16 only)");
}

// Data movement copies bits, whatever the dtype: the reference's per-width dispatch serves the kernels too.
using ops::dispatch_width;

template <typename T, int N>
struct alignas(sizeof(T) * N) VecOf {
  T v[N];
};

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// ---- strided walks: output element i (row-major over dims) -> an offset into each of N operands ----
template <int N>
struct Walk {
  int rank = 1;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
  int64_t base[N] = {};
};

// Builds a walk from coalesced dims/strides; unsupported when the rank is still above kMaxRank.
template <int N>
Status make_walk(const DimsStrides& v, Walk<N>* w) {
  if (v.dims.size() > static_cast<size_t>(kMaxRank)) {
    return unsupported("a strided access of rank " + std::to_string(v.dims.size()) + " (at most " +
                       std::to_string(kMaxRank) + " after merging contiguous dims)");
  }
  w->rank = static_cast<int>(v.dims.size());
  for (int d = 0; d < w->rank; ++d) {
    w->dims[d] = v.dims[d];
    for (int k = 0; k < N; ++k) w->strides[k][d] = v.strides[k][d];
  }
  return Status::ok();
}

// I: int32_t when every index and offset fits (cheaper division), else int64_t.
template <typename I, int N>
__device__ __forceinline__ void walk_offsets(const Walk<N>& w, int64_t linear, int64_t (&off)[N]) {
  if (w.rank == 1) {  // the common case after coalescing: no division
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = w.base[k] + linear * w.strides[k][0];
    return;
  }
  I idx = static_cast<I>(linear);
  I o[N];
#pragma unroll
  for (int k = 0; k < N; ++k) o[k] = static_cast<I>(w.base[k]);
  for (int d = w.rank - 1; d >= 0; --d) {
    const I dim = static_cast<I>(w.dims[d]);
    const I q = idx / dim;
    const I c = idx - q * dim;
    idx = q;
#pragma unroll
    for (int k = 0; k < N; ++k) o[k] += c * static_cast<I>(w.strides[k][d]);
  }
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = o[k];
}

// True when a walk over n elements of operands holding at most max_elems elements can use 32-bit index math.
inline bool fits_int32(int64_t n, int64_t max_elems) {
  return n < (int64_t{1} << 31) && max_elems < (int64_t{1} << 31);
}

// ---- reductions (fp32) ----
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result. `scratch` holds
// 32 floats of shared memory; consecutive calls may reuse it (the function synchronizes before returning).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// ---- gathers through per-axis coordinate maps (Pad, nearest Resize) ----

// Output coordinate c on axis d reads input coordinate maps[map_at[d] + c]; a -1 on any axis makes the element
// `fill` (*fill_ptr when given: a runtime tensor).
struct AxisMaps {
  int rank;
  int64_t out_dims[kMaxRank], in_strides[kMaxRank], map_at[kMaxRank];
};

template <typename U>
__global__ void axis_map_gather_kernel(const U* __restrict__ x, U* __restrict__ y, AxisMaps p,
                                       const int64_t* __restrict__ maps, const U* fill_ptr, U fill, int64_t n) {
  const U v = fill_ptr ? *fill_ptr : fill;
  QD_GRID_LOOP(i, n) {
    int64_t rest = i, off = 0;
    bool constant = false;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t c = rest % p.out_dims[d];
      rest /= p.out_dims[d];
      const int64_t m = maps[p.map_at[d] + c];
      constant |= m < 0;
      off += m * p.in_strides[d];
    }
    y[i] = constant ? v : x[off];
  }
}

}  // namespace qd::cuda
