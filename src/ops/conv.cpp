// Conv: N-d (1-d and 2-d; 1-d runs as 2-d with H=1) grouped convolution, reference = im2col + BLAS sgemm.
// ConvInteger runs the same code in float64, which is exact for int8/uint8 operands (|sum| < 2^53).
#include <cblas.h>

#include "ops/common.h"
#include "ops/window.h"

namespace qd::ops {

Expected<ConvGeom> conv_geom(const Node& node, const Shape& x, const Shape& wt, Shape* out) {
  if (x.size() < 3 || x.size() > 4) return unsupported("Conv on rank-" + std::to_string(x.size()) + " input (1-d and 2-d only)");
  if (wt.size() != x.size()) return invalid("weight rank " + std::to_string(wt.size()) + " differs from input rank " + std::to_string(x.size()));
  const size_t k = x.size() - 2;
  const int64_t group = QD_TRY(node.attrs.get_int("group", 1));
  const int64_t c = x[1], m = wt[0];
  if (group <= 0 || c % group != 0 || m % group != 0) {
    return invalid("group " + std::to_string(group) + " does not divide input channels " + std::to_string(c) +
                   " and output channels " + std::to_string(m));
  }
  if (wt[1] * group != c) {
    return invalid("weight has " + std::to_string(wt[1]) + " input channels per group; input has " + std::to_string(c) +
                   " channels in " + std::to_string(group) + " groups");
  }
  Window win = QD_TRY(read_window(node.attrs, k, std::vector<int64_t>(wt.begin() + 2, wt.end())));
  for (size_t i = 0; i < k; ++i) {
    if (win.kernel[i] != wt[2 + i]) return invalid("kernel_shape disagrees with the weight's shape");
  }
  std::vector<int64_t> spatial(x.begin() + 2, x.end());
  std::vector<int64_t> os = QD_TRY(window_output(spatial, &win, false));
  *out = {x[0], m};
  out->insert(out->end(), os.begin(), os.end());
  ConvGeom g{};
  g.n = x[0]; g.c = c; g.m = m; g.group = group;
  fill_plane(g, x, wt, win, os);
  return g;
}

namespace {

// cols[(ci*kh + i)*kw + j][oy*ow + ox] = x[ci][oy*sh - ph + i*dh][ox*sw - pw + j*dw] (0 outside).
template <typename T>
void im2col(const T* x, const ConvGeom& g, int64_t channels, T* cols) {
  for (int64_t ci = 0; ci < channels; ++ci) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = cols + ((ci * g.kh + i) * g.kw + j) * g.oh * g.ow;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t iy = oy * g.sh - g.ph + i * g.dh;
          T* r = row + oy * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(r, r + g.ow, T(0));
            continue;
          }
          const T* xr = x + (ci * g.h + iy) * g.w;
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const int64_t ix = ox * g.sw - g.pw + j * g.dw;
            r[ox] = (ix >= 0 && ix < g.w) ? xr[ix] : T(0);
          }
        }
      }
    }
  }
}

// C[M,N] = A[M,K] * B[K,N] (row-major).
void gemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, a, static_cast<int>(k), b, static_cast<int>(n), 0.0f, c, static_cast<int>(n));
}
void gemm(int64_t m, int64_t n, int64_t k, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0, a, static_cast<int>(k), b, static_cast<int>(n), 0.0, c, static_cast<int>(n));
}

}  // namespace

Status infer_Conv(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  Shape out;
  QD_RETURN_IF_ERROR(conv_geom(c.node, c.shape(0), c.shape(1), &out).status());
  if (c.has_input(2) && (c.rank(2) != 1 || c.shape(2)[0] != c.shape(1)[0])) {
    return invalid("bias must have shape [" + std::to_string(c.shape(1)[0]) + "], got " + shape_str(c.shape(2)));
  }
  c.set_output(0, c.dtype(0), out);
  return Status::ok();
}

namespace {
// y = conv(x, w) + bias, NCHW.
template <typename T>
void conv_forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
    const int64_t cg = g.c / g.group, mg = g.m / g.group;
    const int64_t kdim = cg * g.kh * g.kw, spatial = g.oh * g.ow;
    const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    std::vector<T> cols(pointwise ? 0 : static_cast<size_t>(kdim * spatial));
    for (int64_t b = 0; b < g.n; ++b) {
      for (int64_t gi = 0; gi < g.group; ++gi) {
        const T* xg = x + (b * g.c + gi * cg) * g.h * g.w;
        const T* src = xg;
        if (!pointwise) {
          im2col(xg, g, cg, cols.data());
          src = cols.data();
        }
        T* yg = y + (b * g.m + gi * mg) * spatial;
        gemm(mg, spatial, kdim, w + gi * mg * kdim, src, yg);
        if (bias) {
          for (int64_t o = 0; o < mg; ++o) {
            const T bv = bias[gi * mg + o];
            T* row = yg + o * spatial;
            for (int64_t s = 0; s < spatial; ++s) row[s] += bv;
          }
        }
      }
    }
}
}  // namespace

Status run_Conv(KernelCtx& c) {
  Shape out;
  const ConvGeom g = QD_TRY(conv_geom(c.node, c.in[0]->shape(), c.in[1]->shape(), &out));
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* bias = c.in.size() > 2 && c.in[2] ? c.in[2]->data<T>() : nullptr;
    conv_forward(g, c.in[0]->data<T>(), c.in[1]->data<T>(), bias, c.out[0]->data<T>());
    return Status::ok();
  });
}

// ConvInteger: int32 y = sum (x - x_zero_point) * (w - w_zero_point[m]); padding contributes 0 after the shift.
Status infer_ConvInteger(InferCtx& c) {
  for (size_t i = 0; i < 2; ++i) {
    if (c.dtype(i) != DType::kInt8 && c.dtype(i) != DType::kUInt8) return invalid("ConvInteger takes int8/uint8 inputs");
  }
  if (c.has_input(2) && numel(c.shape(2)) != 1) return invalid("x_zero_point must be a scalar");
  if (c.has_input(3) && numel(c.shape(3)) != 1 && numel(c.shape(3)) != c.shape(1)[0]) {
    return invalid("w_zero_point must be a scalar or have one entry per output channel");
  }
  Shape out;
  QD_RETURN_IF_ERROR(conv_geom(c.node, c.shape(0), c.shape(1), &out).status());
  c.set_output(0, DType::kInt32, out);
  return Status::ok();
}

Status run_ConvInteger(KernelCtx& c) {
  Shape out;
  const ConvGeom g = QD_TRY(conv_geom(c.node, c.in[0]->shape(), c.in[1]->shape(), &out));
  const Tensor& x = *c.in[0];
  const Tensor& w = *c.in[1];
  const double xzp = c.in.size() > 2 && c.in[2] ? c.in[2]->get_f64(0) : 0.0;
  const Tensor* wzp = c.in.size() > 3 ? c.in[3] : nullptr;
  std::vector<double> xd(static_cast<size_t>(x.numel())), wd(static_cast<size_t>(w.numel())), yd(static_cast<size_t>(c.out[0]->numel()));
  for (int64_t i = 0; i < x.numel(); ++i) xd[i] = x.get_f64(i) - xzp;
  const int64_t per_m = w.numel() / std::max<int64_t>(1, g.m);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const double z = !wzp ? 0.0 : wzp->numel() == 1 ? wzp->get_f64(0) : wzp->get_f64(i / per_m);
    wd[i] = w.get_f64(i) - z;
  }
  conv_forward<double>(g, xd.data(), wd.data(), nullptr, yd.data());
  int32_t* y = c.out[0]->data<int32_t>();
  for (size_t i = 0; i < yd.size(); ++i) y[i] = static_cast<int32_t>(yd[i]);
  return Status::ok();
}

}  // namespace qd::ops
