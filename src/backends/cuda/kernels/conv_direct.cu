// Direct convolutions in NCHW with fp32 accumulation, the fallback to the fused tensor-core path and the fp32 path:
// Conv (1-d and 2-d, groups, strides, dilations, pads) as an implicit GEMM on the tiled GEMM core per group
// (M = output channels of the group, N = batch * output pixels, K = input channels of the group * kernel taps), or,
// when each group has one input channel (depthwise), a thread per output; ConvTranspose as a gather, a thread per
// output. The geometry is the reference's (ops::conv_geom, ops::tconv_geom; 1-d runs as 2-d with H = 1).
#include "backends/cuda/kernels/activation.cuh"
#include "backends/cuda/kernels/gemm_tile.cuh"
#include "ops/window.h"

namespace qd::cuda {

namespace {

// The plane geometry, as plain numbers for the device.
struct ConvDims {
  int64_t n, c, h, w, m, kh, kw, oh, ow, group;
  int64_t sh, sw, dh, dw, ph, pw;
  int64_t cg, mg;  // channels per group (input, output)
};

ConvDims dims_of(const ops::ConvGeom& g) {
  return ConvDims{g.n, g.c, g.h, g.w, g.m, g.kh, g.kw, g.oh, g.ow, g.group, g.sh, g.sw, g.dh, g.dw, g.ph, g.pw,
                  g.c / g.group, g.m / g.group};
}

// A(m, k) = weight of output channel (group * mg + m) at flat tap k (ci, i, j): weights are [M, cg, kh, kw].
template <typename T>
struct ConvWeights {
  const T* w;
  int64_t K, mg;
  int64_t base = 0;
  __device__ __forceinline__ void batch(int64_t g) { base = g * mg * K; }
  __device__ __forceinline__ float operator()(int64_t m, int64_t k) const { return to_float(w[base + m * K + k]); }
};

// B(k, col) = the input under tap k of output pixel col (batch, oy, ox) of this group; 0 in the padding.
template <typename T>
struct ConvPatches {
  const T* x;
  ConvDims d;
  int64_t base = 0;
  __device__ __forceinline__ void batch(int64_t g) { base = g * d.cg * d.h * d.w; }
  __device__ __forceinline__ float operator()(int64_t k, int64_t col) const {
    const int64_t taps = d.kh * d.kw, pix = d.oh * d.ow;
    const int64_t ci = k / taps, t = k - ci * taps, i = t / d.kw, j = t - i * d.kw;
    const int64_t b = col / pix, p = col - b * pix, oy = p / d.ow, ox = p - oy * d.ow;
    const int64_t iy = oy * d.sh - d.ph + i * d.dh, ix = ox * d.sw - d.pw + j * d.dw;
    if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) return 0.f;
    return to_float(x[base + ((b * d.c + ci) * d.h + iy) * d.w + ix]);
  }
};

// The epilogue of fp32 plans' fused convs (generic.h): bias, activation, then the residual (same layout as y).
template <typename T>
__device__ __forceinline__ float conv_epilogue(float acc, const T* bias, int64_t oc, const ConvEpilogue& e,
                                               const T* residual, int64_t i) {
  if (bias) acc += to_float(bias[oc]);
  acc = apply_act<false>(acc, e.act, e.a, e.b);
  return residual ? acc + to_float(residual[i]) : acc;
}

template <typename T>
struct ConvOut {
  T* y;
  const T* bias;
  ConvDims d;
  ConvEpilogue e;
  const T* residual;
  __device__ __forceinline__ void operator()(int64_t g, int64_t m, int64_t col, float acc) const {
    const int64_t pix = d.oh * d.ow, b = col / pix, p = col - b * pix, oc = g * d.mg + m;
    const int64_t i = (b * d.m + oc) * pix + p;
    y[i] = from_float<T>(conv_epilogue(acc, bias, oc, e, residual, i));
  }
};

// One input channel per group (depthwise, with any channel multiplier): a thread per output.
template <typename T>
__global__ void conv_depthwise_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                      T* __restrict__ y, ConvDims d, int64_t n, ConvEpilogue e, const T* residual) {
  QD_GRID_LOOP(i, n) {
    const int64_t ox = i % d.ow, oy = (i / d.ow) % d.oh, oc = (i / (d.ow * d.oh)) % d.m, b = i / (d.ow * d.oh * d.m);
    const int64_t ci = oc / d.mg;
    const T* xp = x + (b * d.c + ci) * d.h * d.w;
    const T* wp = w + oc * d.kh * d.kw;
    float acc = 0.f;
    for (int64_t r = 0; r < d.kh; ++r) {
      const int64_t iy = oy * d.sh - d.ph + r * d.dh;
      if (iy < 0 || iy >= d.h) continue;
      for (int64_t s = 0; s < d.kw; ++s) {
        const int64_t ix = ox * d.sw - d.pw + s * d.dw;
        if (ix >= 0 && ix < d.w) acc = fmaf(to_float(xp[iy * d.w + ix]), to_float(wp[r * d.kw + s]), acc);
      }
    }
    y[i] = from_float<T>(conv_epilogue(acc, bias, oc, e, residual, i));
  }
}

// Inputs: x, w, the bias (or nullptr) and, with ConvEpilogue::residual, the residual.
template <typename T>
class ConvKernel final : public GenericKernel {
 public:
  ConvKernel(const ConvDims& d, const ConvEpilogue& e) : d_(d), e_(e) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    const T* x = static_cast<const T*>(in[0]);
    const T* w = static_cast<const T*>(in[1]);
    const T* bias = in.size() > 2 ? static_cast<const T*>(in[2]) : nullptr;
    const T* residual = e_.residual && in.size() > 3 ? static_cast<const T*>(in[3]) : nullptr;
    if (e_.residual && !residual) return internal("fused conv: the residual input is missing");
    T* y = static_cast<T*>(out[0]);
    const int64_t n = d_.n * d_.m * d_.oh * d_.ow;
    if (n == 0) return Status::ok();
    if (d_.cg == 1) {
      conv_depthwise_kernel<T><<<grid_1d(n), kBlock, 0, s>>>(x, w, bias, y, d_, n, e_, residual);
      QD_CUDA_LAUNCHED();
      return Status::ok();
    }
    const int64_t K = d_.cg * d_.kh * d_.kw;
    return launch_gemm_tile(d_.mg, d_.n * d_.oh * d_.ow, K, d_.group, ConvWeights<T>{w, K, d_.mg},
                            ConvPatches<T>{x, d_}, ConvOut<T>{y, bias, d_, e_, residual}, s);
  }

 private:
  ConvDims d_;
  ConvEpilogue e_;
};

// ConvTranspose as a gather: output (b, oc, oy, ox) sums x[b, ci, iy, ix] * w[ci, o, i, j] over the input channels
// ci of its group and the taps (i, j) with oy = iy * sh - ph + i * dh (likewise x); weights are [C, M/group, kh, kw].
template <typename T>
__global__ void conv_transpose_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                      T* __restrict__ y, ConvDims d, int64_t n) {
  QD_GRID_LOOP(e, n) {
    const int64_t ox = e % d.ow, oy = (e / d.ow) % d.oh, oc = (e / (d.ow * d.oh)) % d.m, b = e / (d.ow * d.oh * d.m);
    const int64_t gi = oc / d.mg, o = oc - gi * d.mg;
    float acc = bias ? to_float(bias[oc]) : 0.f;
    for (int64_t i = 0; i < d.kh; ++i) {
      const int64_t ty = oy + d.ph - i * d.dh;
      if (ty < 0 || ty % d.sh != 0) continue;
      const int64_t iy = ty / d.sh;
      if (iy >= d.h) continue;
      for (int64_t j = 0; j < d.kw; ++j) {
        const int64_t tx = ox + d.pw - j * d.dw;
        if (tx < 0 || tx % d.sw != 0) continue;
        const int64_t ix = tx / d.sw;
        if (ix >= d.w) continue;
        const T* xp = x + ((b * d.c + gi * d.cg) * d.h + iy) * d.w + ix;
        const T* wp = w + ((gi * d.cg * d.mg + o) * d.kh + i) * d.kw + j;
        for (int64_t ci = 0; ci < d.cg; ++ci) {
          acc = fmaf(to_float(xp[ci * d.h * d.w]), to_float(wp[ci * d.mg * d.kh * d.kw]), acc);
        }
      }
    }
    y[e] = from_float<T>(acc);
  }
}

template <typename T>
class ConvTransposeKernel final : public GenericKernel {
 public:
  explicit ConvTransposeKernel(const ConvDims& d) : d_(d) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    const int64_t n = d_.n * d_.m * d_.oh * d_.ow;
    if (n == 0) return Status::ok();
    const T* bias = in.size() > 2 ? static_cast<const T*>(in[2]) : nullptr;
    conv_transpose_kernel<T><<<grid_1d(n), kBlock, 0, s>>>(static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                                                           bias, static_cast<T*>(out[0]), d_, n);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  ConvDims d_;
};

template <template <typename> class K, typename... Extra>
MadeKernel make_conv_like(const NodeArgs& a, bool transpose, const Extra&... extra) {
  const DType t = a.in[0].dtype;
  if (!is_float_storage(t)) return no_kernel_dtype(a, t);
  for (size_t i = 1; i < a.in.size(); ++i) {
    if (a.has_in(i) && a.in[i].dtype != t) return no_kernel(a, "weights or bias of another type than the input");
  }
  Shape out;
  const ops::ConvGeom g = QD_TRY(transpose ? ops::tconv_geom(a.node, a.in[0].shape, a.in[1].shape, &out)
                                           : ops::conv_geom(a.node, a.in[0].shape, a.in[1].shape, &out));
  if (out != a.out[0].shape || a.out[0].dtype != t) return internal("the output spec differs from the inferred output");
  const ConvDims d = dims_of(g);
  KernelPtr k;
  QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
    k.reset(new K<decltype(tag)>(d, extra...));
    return Status::ok();
  }));
  return std::move(k);
}

}  // namespace

MadeKernel make_conv(const NodeArgs& a) { return make_conv_like<ConvKernel>(a, false, ConvEpilogue{}); }
MadeKernel make_conv_fused(const NodeArgs& a, const ConvEpilogue& e) {
  return make_conv_like<ConvKernel>(a, false, e);
}
MadeKernel make_conv_transpose(const NodeArgs& a) { return make_conv_like<ConvTransposeKernel>(a, true); }

}  // namespace qd::cuda
