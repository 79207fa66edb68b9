// Resize and Upsample: nearest (every nearest_mode, any dtype: a gather by element width), linear and cubic (fp32 /
// fp16, fp32 math) with every coordinate_transformation_mode. The per-axis taps (source index and weight of each
// output coordinate) are the reference's (ops::resize_axis_taps, in double), computed once when the kernel is
// created and kept in device tables, so both backends pick the same source pixels.
#include <cstring>

#include "backends/cuda/kernels/generic_device.cuh"
#include "ops/op_geometry.h"

namespace qd::cuda {

namespace {

// Tables: for axis d and output coordinate c, taps[d] entries from map_at[d] + c * taps[d] of `idx` (input index;
// -1 when the coordinate lies outside the crop of tf_crop_and_resize: the output is the extrapolation value) and
// `w` (weight). An axis that maps every coordinate to itself has one tap of weight 1. With one tap per axis
// (nearest) the tables are AxisMaps' coordinate maps.
struct ResizeArgs : AxisMaps {
  int taps[kMaxRank];
};

// Separable interpolation as one weighted sum over the product of every axis's taps.
template <typename T>
__global__ void resize_interp_kernel(const T* __restrict__ x, T* __restrict__ y, ResizeArgs a,
                                     const int64_t* __restrict__ idx, const float* __restrict__ w, float extrapolation,
                                     int64_t n) {
  QD_GRID_LOOP(i, n) {
    int64_t rest = i, first[kMaxRank];
    bool outside = false;
    for (int d = a.rank - 1; d >= 0; --d) {
      const int64_t c = rest % a.out_dims[d];
      rest /= a.out_dims[d];
      first[d] = a.map_at[d] + c * a.taps[d];
      outside |= idx[first[d]] < 0;
    }
    if (outside) {
      y[i] = from_float<T>(extrapolation);
      continue;
    }
    // Odometer over the taps of every axis (axes with one tap stay fixed).
    int tap[kMaxRank];
    int64_t off = 0;
    float wt = 1.f;
    for (int d = 0; d < a.rank; ++d) {
      tap[d] = 0;
      off += idx[first[d]] * a.in_strides[d];
      wt *= w[first[d]];
    }
    float acc = 0.f;
    for (;;) {
      if (wt != 0.f) acc += wt * to_float(x[off]);
      int d = a.rank - 1;
      for (; d >= 0; --d) {
        if (a.taps[d] == 1) continue;
        const int64_t e = first[d] + tap[d];
        off -= idx[e] * a.in_strides[d];
        if (++tap[d] < a.taps[d]) {
          off += idx[e + 1] * a.in_strides[d];
          break;
        }
        tap[d] = 0;
        off += idx[first[d]] * a.in_strides[d];
      }
      if (d < 0) break;
      wt = 1.f;
      for (int k = 0; k < a.rank; ++k) wt *= w[first[k] + tap[k]];
    }
    y[i] = from_float<T>(acc);
  }
}

template <typename U, bool kInterp>
class ResizeKernel final : public GenericKernel {
 public:
  ResizeKernel(const ResizeArgs& a, int64_t n, U ext_bits, float ext) : a_(a), n_(n), ext_bits_(ext_bits), ext_(ext) {}
  DeviceBuffer idx, w;
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    const U* x = static_cast<const U*>(in[0]);
    U* y = static_cast<U*>(out[0]);
    if constexpr (kInterp) {
      resize_interp_kernel<U><<<grid_1d(n_), kBlock, 0, s>>>(x, y, a_, idx.get<int64_t>(), w.get<float>(), ext_, n_);
    } else {
      axis_map_gather_kernel<U><<<grid_1d(n_), kBlock, 0, s>>>(x, y, a_, idx.get<int64_t>(), nullptr, ext_bits_, n_);
    }
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  ResizeArgs a_;
  int64_t n_;
  U ext_bits_;
  float ext_;
};

}  // namespace

MadeKernel make_resize(const NodeArgs& a) {
  const ops::ResizeParams p = QD_TRY(ops::resize_params(a.ctx, a.node.op == OpType::Upsample));
  const Shape& in = a.in[0].shape;
  const Shape& out = a.out[0].shape;
  const DType t = a.in[0].dtype;
  if (p.out != out || a.out[0].dtype != t) return internal("Resize: the output spec differs from the inferred output");
  if (in.size() > static_cast<size_t>(kMaxRank)) return no_kernel(a, "rank above 8");
  const bool interp = p.mode != ops::ResizeMode::kNearest;
  if (interp && !is_float_storage(t)) {
    return no_kernel(a, std::string("linear/cubic interpolation of ") + dtype_name(t) + " (float32/float16 only)");
  }
  const int64_t n = volume(out);
  ResizeArgs r{};
  r.rank = static_cast<int>(in.size());
  std::vector<int64_t> idx;
  std::vector<float> w;
  const std::vector<int64_t> st = strides_of(in);
  if (n > 0) {
    for (size_t d = 0; d < in.size(); ++d) {
      const ops::ResizeAxisTaps taps = ops::resize_axis_taps(p, d, in[d], out[d]);
      r.out_dims[d] = out[d];
      r.in_strides[d] = st[d];
      r.map_at[d] = static_cast<int64_t>(idx.size());
      const bool identity = taps.identity && in[d] == out[d];
      r.taps[d] = identity ? 1 : taps.n;
      for (int64_t c = 0; c < out[d]; ++c) {
        for (int k = 0; k < r.taps[d]; ++k) {
          if (identity) {
            idx.push_back(c);
            w.push_back(1.f);
          } else {
            idx.push_back(taps.extrapolate[c] ? -1 : taps.idx[c * taps.n + k]);
            w.push_back(static_cast<float>(taps.w[c * taps.n + k]));
          }
        }
      }
    }
  }
  Tensor ext(t, {});
  ext.set_f64(0, p.extrapolation);  // as the reference converts it to the data's type
  KernelPtr k;
  auto finish = [&](auto* kernel) -> Status {
    k.reset(kernel);
    QD_RETURN_IF_ERROR(kernel->idx.upload(idx));
    return kernel->w.upload(w);
  };
  if (interp) {
    QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
      using T = decltype(tag);
      return finish(new ResizeKernel<T, true>(r, n, T{}, static_cast<float>(p.extrapolation)));
    }));
  } else {
    QD_RETURN_IF_ERROR(dispatch_width(t, [&](auto tag) {
      using U = decltype(tag);
      U bits;
      std::memcpy(&bits, ext.raw(), sizeof(U));
      return finish(new ResizeKernel<U, false>(r, n, bits, 0.f));
    }));
  }
  return std::move(k);
}

}  // namespace qd::cuda
