// BatchNormalization (inference), InstanceNormalization and LayerNormalization, in fp32 (the reference: double).
// Statistics are two-pass (mean, then the mean of squared deviations), as in the reference. Parameters may be stored
// as fp32 or fp16 independently of the data.
#include "backends/cuda/kernels/generic_device.cuh"
#include "ops/op_geometry.h"

namespace qd::cuda {

namespace {

Expected<float> read_epsilon(const Node& n) {
  const float eps = QD_TRY(n.attrs.get_float("epsilon", 1e-5f));
  if (!std::isfinite(eps) || eps < 0) return invalid("epsilon must be a finite, non-negative number");
  return eps;
}

// ---- BatchNormalization: y = (x - mean) * scale / sqrt(var + eps) + bias per channel (per = 1) or, with the
// spatial=0 form of opsets 7-8, per channel and spatial position ----

struct BnArgs {
  int64_t planes, channels, spatial, per;
  float eps;
  bool half[5];  // storage of inputs 1-4 (scale, B, mean, var)
};

template <typename T>
__global__ void batch_norm_kernel(const T* __restrict__ x, T* __restrict__ y, const void* scale, const void* bias,
                                  const void* mean, const void* var, BnArgs a) {
  for (int64_t p = blockIdx.y; p < a.planes; p += gridDim.y) {
    const int64_t c = p % a.channels;
    float k = 0.f, mu = 0.f, b = 0.f;
    if (a.per == 1) {
      k = load_any(scale, a.half[1], c) / sqrtf(load_any(var, a.half[4], c) + a.eps);
      mu = load_any(mean, a.half[3], c);
      b = load_any(bias, a.half[2], c);
    }
    const T* xp = x + p * a.spatial;
    T* yp = y + p * a.spatial;
    for (int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < a.spatial;
         s += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      if (a.per == 1) {
        yp[s] = from_float<T>((to_float(xp[s]) - mu) * k + b);
      } else {
        const int64_t q = c * a.per + s;
        const float kq = load_any(scale, a.half[1], q) / sqrtf(load_any(var, a.half[4], q) + a.eps);
        yp[s] = from_float<T>((to_float(xp[s]) - load_any(mean, a.half[3], q)) * kq + load_any(bias, a.half[2], q));
      }
    }
  }
}

template <typename T>
class BatchNormKernel final : public GenericKernel {
 public:
  explicit BatchNormKernel(const BnArgs& a) : a_(a) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (a_.planes * a_.spatial == 0) return Status::ok();
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(ceil_div(a_.spatial, kBlock), 1024)),
                    static_cast<unsigned>(std::min<int64_t>(a_.planes, 65535)));
    batch_norm_kernel<T><<<grid, kBlock, 0, s>>>(static_cast<const T*>(in[0]), static_cast<T*>(out[0]), in[1], in[2],
                                                 in[3], in[4], a_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  BnArgs a_;
};

}  // namespace

MadeKernel make_batch_norm(const NodeArgs& a) {
  const Shape& x = a.in[0].shape;
  const DType t = a.in[0].dtype;
  if (!is_float_storage(t)) return no_kernel_dtype(a, t);
  if (x.size() < 2) return invalid("X must have shape [N, C, ...]");
  for (size_t i = 1; i < a.out.size(); ++i) {
    if (a.has_out(i)) return no_kernel(a, "training-mode outputs");
  }
  BnArgs b{};
  b.eps = QD_TRY(read_epsilon(a.node));
  b.channels = x[1];
  b.planes = volume({x[0], x[1]});
  b.spatial = b.planes == 0 ? 0 : volume(Shape(x.begin() + 2, x.end()));
  b.per = 1;
  if (a.node.opset < 9 && QD_TRY(a.node.attrs.get_int("spatial", 1)) == 0) b.per = b.spatial;
  for (int i = 1; i <= 4; ++i) {
    if (!a.has_in(i) || !is_float_storage(a.in[i].dtype)) return no_kernel(a, "parameters must be float32/float16");
    if (volume(a.in[i].shape) != b.channels * b.per) return invalid("a parameter has the wrong size");
    b.half[i] = a.in[i].dtype == DType::kFloat16;
  }
  KernelPtr k;
  QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
    k.reset(new BatchNormKernel<decltype(tag)>(b));
    return Status::ok();
  }));
  return std::move(k);
}

namespace {

// ---- rows normalized by their own statistics: InstanceNormalization (a row = an (n, c) plane, per-channel scale
// and bias) and LayerNormalization (a row = dims [axis, rank), scale and bias broadcast to X) ----

struct RowNormArgs {
  int64_t rows, len;
  float eps;
  bool half_scale, half_bias;
  // InstanceNormalization: scale/bias index = row % channels. LayerNormalization: index = column when `by_column`,
  // else the broadcast walk of element (row * len + column) (operand 0: scale, 1: bias).
  bool instance;
  int64_t channels;
  // GroupNormalization (groups > 0): a row is an (n, g) run of C / G channels of `spatial` elements each; scale and
  // bias per channel, or per group when per_group.
  int64_t groups, spatial;
  bool per_group;
  bool by_column;
  Walk<2> bcast;
};

template <typename T, typename SumF>
__device__ __forceinline__ void norm_row(const T* __restrict__ x, T* __restrict__ y, const void* scale,
                                         const void* bias, float* mean_out, float* inv_out, const RowNormArgs& a,
                                         int64_t row, int lane, int lanes, SumF reduce_sum) {
  const T* xr = x + row * a.len;
  T* yr = y + row * a.len;
  float s = 0.f;
  for (int64_t j = lane; j < a.len; j += lanes) s += to_float(xr[j]);
  const float mean = reduce_sum(s) / static_cast<float>(a.len);
  float v = 0.f;
  for (int64_t j = lane; j < a.len; j += lanes) {
    const float d = to_float(xr[j]) - mean;
    v += d * d;
  }
  const float var = reduce_sum(v) / static_cast<float>(a.len);
  const float inv = 1.f / sqrtf(var + a.eps);
  if (lane == 0) {
    if (mean_out) mean_out[row] = mean;
    if (inv_out) inv_out[row] = inv;
  }
  if (a.groups > 0) {
    const int64_t g = row % a.groups, first = g * (a.channels / a.groups);
    for (int64_t j = lane; j < a.len; j += lanes) {
      const int64_t c = a.per_group ? g : first + j / a.spatial;
      const float k = load_any(scale, a.half_scale, c) * inv, b = load_any(bias, a.half_bias, c);
      yr[j] = from_float<T>((to_float(xr[j]) - mean) * k + b);
    }
    return;
  }
  if (a.instance) {
    const int64_t c = row % a.channels;
    const float k = load_any(scale, a.half_scale, c) * inv, b = load_any(bias, a.half_bias, c);
    for (int64_t j = lane; j < a.len; j += lanes) yr[j] = from_float<T>((to_float(xr[j]) - mean) * k + b);
    return;
  }
  for (int64_t j = lane; j < a.len; j += lanes) {
    int64_t si = j, bi = j;
    if (!a.by_column) {
      int64_t off[2];
      walk_offsets<int64_t>(a.bcast, row * a.len + j, off);
      si = off[0];
      bi = off[1];
    }
    float r = (to_float(xr[j]) - mean) * inv * load_any(scale, a.half_scale, si);
    if (bias) r += load_any(bias, a.half_bias, bi);
    yr[j] = from_float<T>(r);
  }
}

template <typename T>
__global__ void norm_warp_kernel(const T* __restrict__ x, T* __restrict__ y, const void* scale, const void* bias,
                                 float* mean_out, float* inv_out, RowNormArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < a.rows; r += warps) {
    norm_row<T>(x, y, scale, bias, mean_out, inv_out, a, r, lane, 32, [](float v) { return warp_sum(v); });
  }
}

template <typename T>
__global__ void norm_block_kernel(const T* __restrict__ x, T* __restrict__ y, const void* scale, const void* bias,
                                  float* mean_out, float* inv_out, RowNormArgs a) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    norm_row<T>(x, y, scale, bias, mean_out, inv_out, a, r, threadIdx.x, blockDim.x,
                [&](float v) { return block_sum(v, scratch); });
  }
}

// Statistics of empty rows are NaN (the reference's); only the optional outputs can hold them.
__global__ void fill_nan_kernel(float* p, int64_t n) {
  QD_GRID_LOOP(i, n) p[i] = NAN;
}

template <typename T>
class RowNormKernel final : public GenericKernel {
 public:
  explicit RowNormKernel(const RowNormArgs& a) : a_(a) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    float* mean_out = out.size() > 1 ? static_cast<float*>(out[1]) : nullptr;
    float* inv_out = out.size() > 2 ? static_cast<float*>(out[2]) : nullptr;
    if (a_.rows == 0) return Status::ok();
    if (a_.len == 0) {
      for (float* p : {mean_out, inv_out}) {
        if (p) fill_nan_kernel<<<grid_1d(a_.rows), kBlock, 0, s>>>(p, a_.rows);
      }
      QD_CUDA_LAUNCHED();
      return Status::ok();
    }
    const T* x = static_cast<const T*>(in[0]);
    T* y = static_cast<T*>(out[0]);
    const void* bias = in.size() > 2 ? in[2] : nullptr;
    if (a_.len <= 1024) {
      norm_warp_kernel<T><<<grid_1d(a_.rows * 32), kBlock, 0, s>>>(x, y, in[1], bias, mean_out, inv_out, a_);
    } else {
      norm_block_kernel<T><<<grid_1d(a_.rows * 512, 512), 512, 0, s>>>(x, y, in[1], bias, mean_out, inv_out, a_);
    }
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  RowNormArgs a_;
};

MadeKernel make_row_norm(const NodeArgs& a, RowNormArgs r) {
  const DType t = a.in[0].dtype;
  if (!is_float_storage(t)) return no_kernel_dtype(a, t);
  if (a.out[0].dtype != t) return internal("normalization: output type differs from the input's");
  for (size_t i = 1; i <= 2; ++i) {
    if (a.has_in(i) && !is_float_storage(a.in[i].dtype)) return no_kernel_dtype(a, a.in[i].dtype, "a parameter");
  }
  r.half_scale = a.in[1].dtype == DType::kFloat16;
  r.half_bias = a.has_in(2) && a.in[2].dtype == DType::kFloat16;
  KernelPtr k;
  QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
    k.reset(new RowNormKernel<decltype(tag)>(r));
    return Status::ok();
  }));
  return std::move(k);
}

}  // namespace

MadeKernel make_instance_norm(const NodeArgs& a) {
  const Shape& x = a.in[0].shape;
  if (x.size() < 2) return invalid("input must have shape [N, C, D1, ...]");
  if (!a.has_in(2)) return invalid("InstanceNormalization needs B");
  RowNormArgs r{};
  r.eps = QD_TRY(read_epsilon(a.node));
  r.instance = true;
  r.channels = x[1];
  r.rows = volume({x[0], x[1]});
  r.len = r.rows == 0 ? 0 : volume(Shape(x.begin() + 2, x.end()));
  if (r.len == 0) r.rows = 0;  // nothing to normalize, no statistics output
  return make_row_norm(a, r);
}

MadeKernel make_group_norm(const NodeArgs& a) {
  const ops::GroupNormGeom g = QD_TRY(ops::group_norm_geom(a.node, a.in[0].shape));
  RowNormArgs r{};
  r.eps = QD_TRY(read_epsilon(a.node));
  r.groups = g.groups;
  r.channels = g.channels;
  r.spatial = g.spatial;
  r.per_group = g.per_group;
  r.len = g.channels / g.groups * g.spatial;
  r.rows = r.len == 0 ? 0 : volume(a.in[0].shape) / r.len;
  return make_row_norm(a, r);
}

MadeKernel make_layer_norm(const NodeArgs& a) {
  const Shape& x = a.in[0].shape;
  const ops::LayerNormGeom g = QD_TRY(ops::layer_norm_geom(a.node, x));
  for (size_t i = 1; i <= 2; ++i) {
    if (a.has_out(i) && a.out[i].dtype != DType::kFloat32) {
      return no_kernel_dtype(a, a.out[i].dtype, i == 1 ? "Mean" : "InvStdDev");
    }
  }
  RowNormArgs r{};
  r.eps = QD_TRY(read_epsilon(a.node));
  // (An empty X still has statistics outputs of x[:axis] rows, NaN.)
  r.rows = volume(Shape(x.begin(), x.begin() + g.axis));
  r.len = r.rows == 0 ? 0 : volume(Shape(x.begin() + g.axis, x.end()));
  // Scale and bias usually have the normalized shape: their index is the column. Otherwise walk their broadcast.
  DimsStrides v;
  v.dims = x;
  bool by_column = true;
  const std::vector<int64_t> xs = strides_of(x);
  for (size_t i = 1; i <= 2; ++i) {
    if (!a.has_in(i)) {
      v.strides.push_back(std::vector<int64_t>(x.size(), 0));
      continue;
    }
    const std::vector<int64_t> st = broadcast_strides(a.in[i].shape, x);
    for (size_t d = 0; d < x.size(); ++d) {
      const int64_t want = static_cast<int>(d) < g.axis ? 0 : xs[d];
      if (st[d] != want && x[d] != 1) by_column = false;
    }
    v.strides.push_back(st);
  }
  r.by_column = by_column;
  if (!by_column && volume(x) > 0) QD_RETURN_IF_ERROR(make_walk(coalesce(v), &r.bcast));
  return make_row_norm(a, r);
}

}  // namespace qd::cuda
