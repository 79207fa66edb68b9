// ConvTranspose (1-d and 2-d): per group, cols = W^T x X (BLAS), then col2im scatter-adds into the output.
#include <cblas.h>

#include "ops/common.h"
#include "ops/window.h"

namespace qd::ops {

Expected<ConvGeom> tconv_geom(const Node& node, const Shape& x, const Shape& wt, Shape* out) {
  if (x.size() < 3 || x.size() > 4) return unsupported("ConvTranspose on rank-" + std::to_string(x.size()) + " input (1-d and 2-d only)");
  if (wt.size() != x.size()) return invalid("weight rank differs from input rank");
  const size_t k = x.size() - 2;
  const int64_t group = QD_TRY(node.attrs.get_int("group", 1));
  if (group <= 0 || x[1] % group != 0) return invalid("group " + std::to_string(group) + " does not divide the input channels " + std::to_string(x[1]));
  if (wt[0] != x[1]) return invalid("weight's first dim " + std::to_string(wt[0]) + " must equal input channels " + std::to_string(x[1]));
  Window win = QD_TRY(read_window(node.attrs, k, std::vector<int64_t>(wt.begin() + 2, wt.end())));
  auto out_pad = QD_TRY(node.attrs.get_ints("output_padding", std::vector<int64_t>(k, 0)));
  auto out_shape = QD_TRY(node.attrs.get_ints("output_shape", std::vector<int64_t>{}));
  if (out_pad.size() != k) return invalid("output_padding needs one entry per spatial dim");
  if (!out_shape.empty() && out_shape.size() != k && out_shape.size() != k + 2) return invalid("output_shape has the wrong length");
  std::vector<int64_t> os(k);
  for (size_t i = 0; i < k; ++i) {
    if (out_pad[i] < 0 || out_pad[i] >= std::max(win.strides[i], win.dilations[i])) {
      return invalid("output_padding must be in [0, max(stride, dilation))");
    }
    const int64_t full = win.strides[i] * (x[2 + i] - 1) + out_pad[i] + (win.kernel[i] - 1) * win.dilations[i] + 1;
    int64_t target = -1;
    if (!out_shape.empty()) target = out_shape[out_shape.size() - k + i];
    else if (win.auto_pad == "SAME_UPPER" || win.auto_pad == "SAME_LOWER") target = x[2 + i] * win.strides[i];
    if (target >= 0) {
      // ONNX: SAME_UPPER puts the smaller half first; otherwise the larger half. A negative total (output_shape
      // beyond the full result) appends positions that only receive the bias.
      if (target > (int64_t{1} << 24)) return invalid("output_shape is absurdly large");
      const int64_t total = full - target;
      const int64_t half = total / 2;
      win.pads[i] = total < 0 ? 0 : win.auto_pad == "SAME_UPPER" ? half : total - half;
      win.pads[i + k] = total - win.pads[i];
    } else if (win.auto_pad == "VALID") {
      win.pads[i] = win.pads[i + k] = 0;
    }
    os[i] = full - win.pads[i] - win.pads[i + k];
    if (os[i] <= 0) return invalid("pads remove the whole output in spatial dim " + std::to_string(i));
  }
  const int64_t m = wt[1] * group;
  *out = {x[0], m};
  out->insert(out->end(), os.begin(), os.end());
  ConvGeom g{};
  g.n = x[0]; g.c = x[1]; g.m = m; g.group = group;
  fill_plane(g, x, wt, win, os);
  return g;
}

namespace {

void gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  // C[M,N] = A^T * B with A stored [K, M]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.f, a, (int)m, b, (int)n, 0.f, c, (int)n);
}
void gemm_tn(int64_t m, int64_t n, int64_t k, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a, (int)m, b, (int)n, 0.0, c, (int)n);
}

}  // namespace

Status infer_ConvTranspose(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  Shape out;
  QD_RETURN_IF_ERROR(tconv_geom(c.node, c.shape(0), c.shape(1), &out).status());
  if (c.has_input(2) && (c.rank(2) != 1 || c.shape(2)[0] != out[1])) return invalid("bias must have one entry per output channel");
  c.set_output(0, c.dtype(0), out);
  return Status::ok();
}

Status run_ConvTranspose(KernelCtx& c) {
  Shape out;
  const ConvGeom g = QD_TRY(tconv_geom(c.node, c.in[0]->shape(), c.in[1]->shape(), &out));
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t cg = g.c / g.group, mg = g.m / g.group, hw = g.h * g.w, kk = g.kh * g.kw;
    std::vector<T> cols(static_cast<size_t>(mg * kk * hw));
    const T* x = c.in[0]->data<T>();
    const T* w = c.in[1]->data<T>();
    const T* bias = c.in.size() > 2 && c.in[2] ? c.in[2]->data<T>() : nullptr;
    T* y = c.out[0]->data<T>();
    for (int64_t b = 0; b < g.n; ++b) {
      for (int64_t gi = 0; gi < g.group; ++gi) {
        gemm_tn(mg * kk, hw, cg, w + gi * cg * mg * kk, x + (b * g.c + gi * cg) * hw, cols.data());
        for (int64_t o = 0; o < mg; ++o) {
          T* yo = y + (b * g.m + gi * mg + o) * g.oh * g.ow;
          std::fill(yo, yo + g.oh * g.ow, bias ? bias[gi * mg + o] : T(0));
          for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) {
              const T* col = cols.data() + ((o * g.kh + i) * g.kw + j) * hw;
              for (int64_t iy = 0; iy < g.h; ++iy) {
                const int64_t oy = iy * g.sh - g.ph + i * g.dh;
                if (oy < 0 || oy >= g.oh) continue;
                for (int64_t ix = 0; ix < g.w; ++ix) {
                  const int64_t ox = ix * g.sw - g.pw + j * g.dw;
                  if (ox >= 0 && ox < g.ow) yo[oy * g.ow + ox] += col[iy * g.w + ix];
                }
              }
            }
          }
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace qd::ops
