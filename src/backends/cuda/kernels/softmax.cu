// Softmax, LogSoftmax and Hardmax over the [outer, len, inner] view of ops::softmax_geom (opset < 13: the input
// flattened to 2-D at axis; from 13: one axis), in fp32: maximum first (NaN skipped, as the reference's `v > max`),
// then the sum of exp(x - max), then the outputs. Rows along the innermost dim use a warp (or a block, for long rows)
// per row; strided rows use a thread per row, consecutive threads on consecutive rows.
#include "backends/cuda/kernels/generic_device.cuh"
#include "ops/op_geometry.h"

namespace qd::cuda {

namespace {

enum class SoftKind : int { kSoftmax, kLogSoftmax, kHardmax };

// The first strict maximum (index; -1 when no element exceeds -inf) of a lane's elements, combined across lanes
// by value then by the lower index.
struct ArgBest {
  float v;
  int64_t i;
};
__device__ __forceinline__ ArgBest better(ArgBest a, ArgBest b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}
__device__ __forceinline__ ArgBest warp_best(ArgBest a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ArgBest b{__shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o)};
    a = better(a, b);
  }
  return a;
}

// One row of `len` elements at x[k * stride], processed by `lanes` threads (this thread is `lane`): reduce(v) folds
// a value over the threads of the row (warp or block).
template <typename T, typename SumF, typename MaxF, typename BestF>
__device__ __forceinline__ void softmax_row(SoftKind kind, const T* __restrict__ x, T* __restrict__ y, int64_t len,
                                            int64_t stride, int lane, int lanes, SumF reduce_sum, MaxF reduce_max,
                                            BestF reduce_best) {
  if (kind == SoftKind::kHardmax) {
    ArgBest b{-INFINITY, -1};
    for (int64_t k = lane; k < len; k += lanes) {
      const float v = to_float(x[k * stride]);
      if (v > b.v) b = ArgBest{v, k};  // increasing k: the lane's first maximum
    }
    b = reduce_best(b);
    const int64_t arg = b.i < 0 ? 0 : b.i;
    for (int64_t k = lane; k < len; k += lanes) y[k * stride] = from_float<T>(k == arg ? 1.f : 0.f);
    return;
  }
  float mx = -INFINITY;
  for (int64_t k = lane; k < len; k += lanes) mx = fmaxf(mx, to_float(x[k * stride]));
  mx = reduce_max(mx);
  float sum = 0.f;
  for (int64_t k = lane; k < len; k += lanes) sum += expf(to_float(x[k * stride]) - mx);
  sum = reduce_sum(sum);
  if (kind == SoftKind::kSoftmax) {
    const float inv = 1.f / sum;
    for (int64_t k = lane; k < len; k += lanes) y[k * stride] = from_float<T>(expf(to_float(x[k * stride]) - mx) * inv);
  } else {
    const float lse = mx + logf(sum);
    for (int64_t k = lane; k < len; k += lanes) y[k * stride] = from_float<T>(to_float(x[k * stride]) - lse);
  }
}

// Rows along the innermost dim, one warp each.
template <typename T>
__global__ void softmax_warp_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t len,
                                    SoftKind kind) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    softmax_row<T>(kind, x + r * len, y + r * len, len, 1, lane, 32, [](float v) { return warp_sum(v); },
                   [](float v) { return warp_max(v); }, [](ArgBest b) { return warp_best(b); });
  }
}

// Long rows along the innermost dim, one block each.
template <typename T>
__global__ void softmax_block_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t len,
                                     SoftKind kind) {
  __shared__ float scratch[32];
  __shared__ float scratch_v[32];
  __shared__ int64_t scratch_i[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    auto best = [&](ArgBest b) {
      b = warp_best(b);
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
      __syncthreads();
      if (lane == 0) {
        scratch_v[warp] = b.v;
        scratch_i[warp] = b.i;
      }
      __syncthreads();
      b = lane < warps ? ArgBest{scratch_v[lane], scratch_i[lane]} : ArgBest{-INFINITY, -1};
      return warp_best(b);
    };
    softmax_row<T>(kind, x + r * len, y + r * len, len, 1, threadIdx.x, blockDim.x,
                   [&](float v) { return block_sum(v, scratch); }, [&](float v) { return block_max(v, scratch); },
                   best);
  }
}

// Strided rows (inner > 1): thread per (outer, inner) pair.
template <typename T>
__global__ void softmax_strided_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t len,
                                       int64_t inner, SoftKind kind) {
  QD_GRID_LOOP(t, outer * inner) {
    const int64_t o = t / inner, i = t - o * inner;
    const int64_t off = o * len * inner + i;
    softmax_row<T>(kind, x + off, y + off, len, inner, 0, 1, [](float v) { return v; }, [](float v) { return v; },
                   [](ArgBest b) { return b; });
  }
}

template <typename T>
class SoftmaxKernel final : public GenericKernel {
 public:
  SoftmaxKernel(const ops::SoftmaxGeom& g, SoftKind kind) : g_(g), kind_(kind) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (g_.outer * g_.len * g_.inner == 0) return Status::ok();
    const T* x = static_cast<const T*>(in[0]);
    T* y = static_cast<T*>(out[0]);
    if (g_.inner > 1) {
      softmax_strided_kernel<T><<<grid_1d(g_.outer * g_.inner), kBlock, 0, s>>>(x, y, g_.outer, g_.len, g_.inner,
                                                                               kind_);
    } else if (g_.len <= 2048) {
      softmax_warp_kernel<T><<<grid_1d(g_.outer * 32), kBlock, 0, s>>>(x, y, g_.outer, g_.len, kind_);
    } else {
      softmax_block_kernel<T><<<grid_1d(g_.outer * 512, 512), 512, 0, s>>>(x, y, g_.outer, g_.len, kind_);
    }
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  ops::SoftmaxGeom g_;
  SoftKind kind_;
};

}  // namespace

MadeKernel make_softmax(const NodeArgs& a) {
  const DType t = a.in[0].dtype;
  if (!is_float_storage(t)) return no_kernel_dtype(a, t);
  if (a.out[0].dtype != t) return internal("softmax: output type differs from the input's");
  const ops::SoftmaxGeom g = QD_TRY(ops::softmax_geom(a.node, a.in[0].shape));
  const SoftKind kind = a.node.op == OpType::Softmax      ? SoftKind::kSoftmax
                        : a.node.op == OpType::LogSoftmax ? SoftKind::kLogSoftmax
                                                          : SoftKind::kHardmax;
  KernelPtr k;
  QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
    k.reset(new SoftmaxKernel<decltype(tag)>(g, kind));
    return Status::ok();
  }));
  return std::move(k);
}

}  // namespace qd::cuda
