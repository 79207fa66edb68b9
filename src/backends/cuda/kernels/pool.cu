// Pooling: MaxPool (with the optional Indices output), AveragePool, LpPool over 1-3 spatial dims, and the Global*
// forms. Window geometry comes from ops/window.h (read_window, window_output), as in the reference (src/ops/pool.cpp):
// each output visits only the taps inside the input, first to last in row-major order, so MaxPool's ties and
// AveragePool's divisors match.
#include <cfloat>

#include "backends/cuda/kernels/generic_device.cuh"
#include "ops/window.h"

namespace qd::cuda {

namespace {

enum class PoolMode : int { kMax, kAvg, kLp };

struct PoolArgs {
  int64_t planes;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];  // spatial dims padded to 3 with leading 1s
  PoolMode mode;
  bool include_pad;  // AveragePool's count_include_pad
  float p;           // LpPool's order
  bool col_major;    // MaxPool's storage_order=1 (Indices in column-major order)
  int spatial;       // the real number of spatial dims (for col_major)
  float lowest;      // MaxPool's value for a window that lies in padding only
};

// Taps j in [0, k) with 0 <= start + j*dil < limit: their count, and the first one's position (pool.cpp's count_taps).
__device__ __forceinline__ int64_t count_taps(int64_t start, int64_t k, int64_t dil, int64_t limit, int64_t* first) {
  const int64_t j0 = start >= 0 ? 0 : (-start + dil - 1) / dil;
  if (start > limit - 1) return 0;
  const int64_t j1 = min(k - 1, (limit - 1 - start) / dil);
  *first = start + j0 * dil;
  return max(int64_t{0}, j1 - j0 + 1);
}

template <typename T>
__device__ __forceinline__ float as_float(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, __half>) return to_float(v);
  else return static_cast<float>(v);
}
template <typename T>
__device__ __forceinline__ T from_pool_float(float v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, __half>) return from_float<T>(v);
  else return static_cast<T>(v);  // MaxPool on int8/uint8: the value is one of the inputs, exact
}

template <typename T>
__global__ void pool_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ indices, PoolArgs a,
                            int64_t n) {
  const int64_t in_plane = a.in[0] * a.in[1] * a.in[2];
  QD_GRID_LOOP(i, n) {
    int64_t rest = i, o[3];
    for (int d = 2; d >= 0; --d) {
      o[d] = rest % a.out[d];
      rest /= a.out[d];
    }
    const int64_t plane = rest;
    int64_t first[3], taps[3], padded = 1, count = 1;
    for (int d = 0; d < 3; ++d) {
      const int64_t start = o[d] * a.s[d] - a.pb[d];
      taps[d] = count_taps(start, a.k[d], a.d[d], a.in[d], &first[d]);
      count *= taps[d];
      int64_t unused;
      padded *= count_taps(start + a.pb[d], a.k[d], a.d[d], a.in[d] + a.pb[d] + a.pe[d], &unused);
    }
    const T* xp = x + plane * in_plane;
    float best = a.lowest, acc = 0.f;
    int64_t best_at = -1;
    for (int64_t t0 = 0; t0 < taps[0]; ++t0) {
      const int64_t p0 = (first[0] + t0 * a.d[0]) * a.in[1];
      for (int64_t t1 = 0; t1 < taps[1]; ++t1) {
        const int64_t p1 = (p0 + first[1] + t1 * a.d[1]) * a.in[2];
        for (int64_t t2 = 0; t2 < taps[2]; ++t2) {
          const int64_t flat = p1 + first[2] + t2 * a.d[2];
          const float v = as_float(xp[flat]);
          if (a.mode == PoolMode::kMax) {
            if (best_at < 0 || v > best) {  // the first maximum wins; a NaN in front stays
              best = v;
              best_at = flat;
            }
          } else if (a.mode == PoolMode::kAvg) {
            acc += v;
          } else {
            const float m = fabsf(v);
            acc += a.p == 1.f ? m : a.p == 2.f ? m * m : powf(m, a.p);
          }
        }
      }
    }
    if (a.mode == PoolMode::kMax) {
      y[i] = from_pool_float<T>(best);
      if (indices) {
        int64_t idx = best_at;
        if (a.col_major && best_at >= 0) {  // row-major flat position -> column-major over the real spatial dims
          idx = 0;
          int64_t r = best_at, stride = 1;
          int64_t pos[3];
          for (int d = 2; d >= 0; --d) {
            pos[d] = r % a.in[d];
            r /= a.in[d];
          }
          for (int d = 3 - a.spatial; d < 3; ++d) {
            idx += pos[d] * stride;
            stride *= a.in[d];
          }
        }
        indices[i] = idx < 0 ? -1 : plane * in_plane + idx;
      }
    } else if (a.mode == PoolMode::kAvg) {
      const int64_t div = a.include_pad ? padded : count;
      y[i] = from_pool_float<T>(div > 0 ? acc / static_cast<float>(div) : NAN);  // padding only: NaN, as the reference
    } else {
      y[i] = from_pool_float<T>(a.p == 1.f ? acc : a.p == 2.f ? sqrtf(acc) : powf(acc, 1.f / a.p));
    }
  }
}

template <typename T>
class PoolKernel final : public GenericKernel {
 public:
  PoolKernel(const PoolArgs& a, int64_t n) : a_(a), n_(n) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    int64_t* indices = out.size() > 1 ? static_cast<int64_t*>(out[1]) : nullptr;
    pool_kernel<T><<<grid_1d(n_), kBlock, 0, s>>>(static_cast<const T*>(in[0]), static_cast<T*>(out[0]), indices, a_,
                                                  n_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  PoolArgs a_;
  int64_t n_;
};

}  // namespace

MadeKernel make_pool(const NodeArgs& a) {
  const Shape& x = a.in[0].shape;
  const DType t = a.in[0].dtype;
  const OpType op = a.node.op;
  if (x.size() < 3 || x.size() > 5) {
    return no_kernel(a, "input of rank " + std::to_string(x.size()) + " (1-3 spatial dims)");
  }
  if (!a.node.attrs.has("kernel_shape")) return invalid("the kernel_shape attribute is required");
  const size_t k = x.size() - 2;
  ops::Window w = QD_TRY(ops::read_window(a.node.attrs, k, {}));
  const int64_t ceil_mode = QD_TRY(a.node.attrs.get_int("ceil_mode", 0));
  const std::vector<int64_t> in_sp(x.begin() + 2, x.end());
  const std::vector<int64_t> out_sp = QD_TRY(ops::window_output(in_sp, &w, ceil_mode != 0));
  Shape out = {x[0], x[1]};
  out.insert(out.end(), out_sp.begin(), out_sp.end());
  if (out != a.out[0].shape || a.out[0].dtype != t) {
    return internal("pool: the output spec differs from the inferred output");
  }
  PoolArgs p{};
  p.planes = x[0] * x[1];
  p.mode = op == OpType::MaxPool ? PoolMode::kMax : op == OpType::AveragePool ? PoolMode::kAvg : PoolMode::kLp;
  p.include_pad = QD_TRY(a.node.attrs.get_int("count_include_pad", 0)) != 0;
  p.p = op == OpType::LpPool ? static_cast<float>(QD_TRY(a.node.attrs.get_int("p", 2))) : 2.f;
  p.col_major = QD_TRY(a.node.attrs.get_int("storage_order", 0)) == 1;
  p.spatial = static_cast<int>(k);
  const size_t lead = 3 - k;  // leading unit dims
  for (size_t d = 0; d < 3; ++d) {
    const bool real = d >= lead;
    const size_t r = d - lead;
    p.in[d] = real ? in_sp[r] : 1;
    p.out[d] = real ? out_sp[r] : 1;
    p.k[d] = real ? w.kernel[r] : 1;
    p.s[d] = real ? w.strides[r] : 1;
    p.d[d] = real ? w.dilations[r] : 1;
    p.pb[d] = real ? w.pads[r] : 0;
    p.pe[d] = real ? w.pads[r + k] : 0;
  }
  if (p.mode == PoolMode::kMax && a.has_out(1) && a.out[1].dtype != DType::kInt64) {
    return no_kernel_dtype(a, a.out[1].dtype, "Indices");
  }
  const int64_t n = volume(out);
  KernelPtr kp;
  if (is_float_storage(t)) {
    p.lowest = t == DType::kFloat16 ? -65504.f : -FLT_MAX;  // numeric_limits<T>::lowest()
    QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
      kp.reset(new PoolKernel<decltype(tag)>(p, n));
      return Status::ok();
    }));
  } else if (p.mode == PoolMode::kMax && (t == DType::kInt8 || t == DType::kUInt8)) {  // the INT8 data path
    p.lowest = t == DType::kInt8 ? -128.f : 0.f;
    if (t == DType::kInt8) kp.reset(new PoolKernel<int8_t>(p, n));
    else kp.reset(new PoolKernel<uint8_t>(p, n));
  } else {
    return no_kernel_dtype(a, t);
  }
  return std::move(kp);
}

namespace {

// ---- global pools: one warp per (n, c) plane for small planes, one block for large ones ----

template <typename T>
__device__ __forceinline__ void global_store(T* y, int64_t p, float acc, int64_t len, bool is_max) {
  y[p] = from_pool_float<T>(is_max ? acc : (len > 0 ? acc / static_cast<float>(len) : NAN));
}

template <typename T>
__global__ void global_pool_warp_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t planes, int64_t len,
                                        bool is_max, float lowest) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; p < planes; p += warps) {
    const T* xp = x + p * len;
    float acc = is_max ? lowest : 0.f;
    for (int64_t i = lane; i < len; i += 32) {
      const float v = as_float(xp[i]);
      acc = is_max ? (v > acc ? v : acc) : acc + v;
    }
    acc = is_max ? warp_max(acc) : warp_sum(acc);
    if (lane == 0) global_store(y, p, acc, len, is_max);
  }
}

template <typename T>
__global__ void global_pool_block_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t planes, int64_t len,
                                         bool is_max, float lowest) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* xp = x + p * len;
    float acc = is_max ? lowest : 0.f;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const float v = as_float(xp[i]);
      acc = is_max ? (v > acc ? v : acc) : acc + v;
    }
    acc = is_max ? block_max(acc, scratch) : block_sum(acc, scratch);
    if (threadIdx.x == 0) global_store(y, p, acc, len, is_max);
  }
}

template <typename T>
class GlobalPoolKernel final : public GenericKernel {
 public:
  GlobalPoolKernel(int64_t planes, int64_t len, bool is_max, float lowest)
      : planes_(planes), len_(len), is_max_(is_max), lowest_(lowest) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (planes_ == 0) return Status::ok();
    const T* x = static_cast<const T*>(in[0]);
    T* y = static_cast<T*>(out[0]);
    if (len_ <= 4096) {
      global_pool_warp_kernel<T><<<grid_1d(planes_ * 32), kBlock, 0, s>>>(x, y, planes_, len_, is_max_, lowest_);
    } else {
      global_pool_block_kernel<T><<<grid_1d(planes_ * kBlock), kBlock, 0, s>>>(x, y, planes_, len_, is_max_, lowest_);
    }
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  int64_t planes_, len_;
  bool is_max_;
  float lowest_;
};

}  // namespace

MadeKernel make_global_pool(const NodeArgs& a) {
  const Shape& x = a.in[0].shape;
  const DType t = a.in[0].dtype;
  if (x.size() < 2) return invalid("the input must have shape [N, C, D1, ...]");
  if (a.out[0].dtype != t) return internal("global pool: output type differs from the input's");
  const bool is_max = a.node.op == OpType::GlobalMaxPool;
  const int64_t planes = volume({x[0], x[1]});
  const int64_t len = planes == 0 ? 0 : volume(Shape(x.begin() + 2, x.end()));
  KernelPtr k;
  if (is_float_storage(t)) {
    const float lowest = t == DType::kFloat16 ? -65504.f : -FLT_MAX;
    QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
      k.reset(new GlobalPoolKernel<decltype(tag)>(planes, len, is_max, lowest));
      return Status::ok();
    }));
  } else if (is_max && t == DType::kInt8) {
    k.reset(new GlobalPoolKernel<int8_t>(planes, len, true, -128.f));
  } else if (is_max && t == DType::kUInt8) {
    k.reset(new GlobalPoolKernel<uint8_t>(planes, len, true, 0.f));
  } else {
    return no_kernel_dtype(a, t);
  }
  return std::move(k);
}

}  // namespace qd::cuda
