// Resize (opsets 10, 11, 13) and Upsample (7, 9): nearest (every nearest_mode), linear and cubic interpolation with
// every coordinate_transformation_mode, from scales or sizes. Opset-18 additions (antialias, axes,
// keep_aspect_ratio_policy) are unsupported.
//
// Nearest is a gather of whole elements (any dtype, so int8 activations stay int8). Linear and cubic are separable:
// they run as one 1-D pass per resized axis, in double precision, on float32/float64 data.
#include <cmath>

#include "ops/movement.h"
#include "ops/op_geometry.h"

namespace qd::ops {

namespace {

// The parameter types live in op_geometry.h (the CUDA backend reads them too).
using Mode = ResizeMode;
using Coord = ResizeCoord;
using Nearest = ResizeNearest;
using AxisTaps = ResizeAxisTaps;

Expected<Mode> read_mode(const AttrMap& a) {
  const std::string m = QD_TRY(a.get_string("mode", "nearest"));
  if (m == "nearest") return Mode::kNearest;
  if (m == "linear" || m == "bilinear") return Mode::kLinear;
  if (m == "cubic") return Mode::kCubic;
  return invalid("mode must be nearest, linear or cubic; got '" + m + "'");
}

Expected<Coord> read_coord(const AttrMap& a) {
  const std::string m = QD_TRY(a.get_string("coordinate_transformation_mode", "half_pixel"));
  if (m == "half_pixel") return Coord::kHalfPixel;
  if (m == "pytorch_half_pixel") return Coord::kPytorchHalfPixel;
  if (m == "align_corners") return Coord::kAlignCorners;
  if (m == "asymmetric") return Coord::kAsymmetric;
  if (m == "tf_half_pixel_for_nn") return Coord::kTfHalfPixelForNn;
  if (m == "tf_crop_and_resize") return Coord::kTfCropAndResize;
  if (m == "half_pixel_symmetric") return unsupported("coordinate_transformation_mode half_pixel_symmetric (opset 19)");
  return invalid("unknown coordinate_transformation_mode '" + m + "'");
}

Expected<Nearest> read_nearest(const AttrMap& a) {
  const std::string m = QD_TRY(a.get_string("nearest_mode", "round_prefer_floor"));
  if (m == "round_prefer_floor") return Nearest::kRoundPreferFloor;
  if (m == "round_prefer_ceil") return Nearest::kRoundPreferCeil;
  if (m == "floor") return Nearest::kFloor;
  if (m == "ceil") return Nearest::kCeil;
  return invalid("nearest_mode must be round_prefer_floor, round_prefer_ceil, floor or ceil; got '" + m + "'");
}

// Output dims and transform scales from scales (floats) ...
Status apply_scales(const Shape& in, const std::vector<float>& s, ResizeParams* p) {
  const size_t r = in.size();
  if (s.size() != r) {
    return invalid("scales has " + std::to_string(s.size()) + " entries but the input " + shape_str(in) +
                   " has rank " + std::to_string(r));
  }
  p->out.assign(r, 0);
  p->scales.assign(r, 1.0);
  p->resized.assign(r, 0.0);
  for (size_t i = 0; i < r; ++i) {
    if (!(s[i] > 0) || !std::isfinite(s[i])) return invalid("scale " + std::to_string(s[i]) + " must be positive and finite");
    const double o = std::floor(static_cast<double>(in[i]) * static_cast<double>(s[i]));
    if (o > static_cast<double>(kMaxElements)) return invalid("scale " + std::to_string(s[i]) + " makes the output too large");
    p->out[i] = static_cast<int64_t>(o);
    p->scales[i] = s[i];
    p->resized[i] = static_cast<double>(in[i]) * static_cast<double>(s[i]);
  }
  return checked_numel(p->out).status();
}

// ... or from sizes (ints).
Status apply_sizes(const Shape& in, const std::vector<int64_t>& s, ResizeParams* p) {
  const size_t r = in.size();
  if (s.size() != r) {
    return invalid("sizes has " + std::to_string(s.size()) + " entries but the input " + shape_str(in) +
                   " has rank " + std::to_string(r));
  }
  p->out.assign(r, 0);
  p->scales.assign(r, 1.0);
  p->resized.assign(r, 0.0);
  for (size_t i = 0; i < r; ++i) {
    if (s[i] < 0) return invalid("sizes has a negative entry " + std::to_string(s[i]));
    if (in[i] == 0 && s[i] > 0) return invalid("cannot resize an empty axis to a non-empty one");
    p->out[i] = s[i];
    p->resized[i] = static_cast<double>(s[i]);
    p->scales[i] = in[i] > 0 ? static_cast<double>(s[i]) / static_cast<double>(in[i]) : 1.0;
  }
  return checked_numel(p->out).status();
}

Status read_scales_or_sizes(const InferCtx& c, int scales_in, int sizes_in, ResizeParams* p) {
  const bool has_scales = scales_in >= 0 && c.has_input(scales_in) && numel(c.shape(scales_in)) > 0;
  const bool has_sizes = sizes_in >= 0 && c.has_input(sizes_in) && numel(c.shape(sizes_in)) > 0;
  if (has_scales == has_sizes) return invalid("exactly one of scales and sizes must be given (non-empty)");
  if (has_scales) {
    if (!is_float(c.dtype(scales_in))) return invalid("scales must be a float tensor");
    if (!c.value(scales_in)) return unsupported("the scales input must be a constant (it sets the output shape)");
    return apply_scales(c.shape(0), QD_TRY(c.const_floats(scales_in)), p);
  }
  if (!c.value(sizes_in)) return unsupported("Resize's sizes must be a constant (it sets the output shape)");
  return apply_sizes(c.shape(0), QD_TRY(c.const_ints(sizes_in)), p);
}

}  // namespace

Expected<ResizeParams> resize_params(const InferCtx& c, bool upsample) {
  const AttrMap& a = c.node.attrs;
  ResizeParams p;
  p.mode = QD_TRY(read_mode(a));
  if (upsample || c.node.opset < 11) {
    if (p.mode == Mode::kCubic) return invalid("cubic mode needs Resize from opset 11");
    if (upsample && c.num_inputs() < 2) {  // opset 7: scales attribute
      QD_RETURN_IF_ERROR(apply_scales(c.shape(0), QD_TRY(a.get_floats("scales")), &p));
    } else {
      QD_RETURN_IF_ERROR(read_scales_or_sizes(c, 1, -1, &p));
    }
    return p;
  }
  if (QD_TRY(a.get_int("antialias", 0)) != 0) return unsupported("Resize with antialias (opset 18)");
  if (a.has("axes")) return unsupported("Resize's axes attribute (opset 18)");
  if (QD_TRY(a.get_string("keep_aspect_ratio_policy", "stretch")) != "stretch") {
    return unsupported("Resize's keep_aspect_ratio_policy (opset 18)");
  }
  p.coord = QD_TRY(read_coord(a));
  p.nearest = QD_TRY(read_nearest(a));
  p.cubic_a = QD_TRY(a.get_float("cubic_coeff_a", -0.75f));
  p.exclude_outside = QD_TRY(a.get_int("exclude_outside", 0)) != 0;
  p.extrapolation = QD_TRY(a.get_float("extrapolation_value", 0.f));
  QD_RETURN_IF_ERROR(read_scales_or_sizes(c, 2, 3, &p));
  const size_t r = c.rank(0);
  p.roi.assign(2 * r, 0.0);
  for (size_t i = 0; i < r; ++i) p.roi[r + i] = 1.0;
  if (p.coord == Coord::kTfCropAndResize && c.has_input(1) && numel(c.shape(1)) > 0) {
    if (!c.value(1)) return unsupported("Resize's roi must be a constant");
    const std::vector<float> roi = QD_TRY(c.const_floats(1));
    if (roi.size() != 2 * r) {
      return invalid("roi has " + std::to_string(roi.size()) + " entries; it needs 2 * rank = " + std::to_string(2 * r));
    }
    for (size_t i = 0; i < 2 * r; ++i) p.roi[i] = roi[i];
  }
  return p;
}

namespace {

// The input coordinate of output coordinate x along one axis. As in the ONNX reference, the resized length is
// scale * in_len before flooring (it equals the output size when sizes are given): with scales 0.6 on 4 pixels,
// align_corners divides by 2.4 - 1, not by 2 - 1.
double source_coord(const ResizeParams& p, size_t axis, int64_t x, int64_t in_len) {
  const double s = p.scales[axis];
  const double xd = static_cast<double>(x);
  const double out_len = p.resized[axis];
  switch (p.coord) {
    case Coord::kHalfPixel: return (xd + 0.5) / s - 0.5;
    case Coord::kPytorchHalfPixel: return out_len > 1 ? (xd + 0.5) / s - 0.5 : 0.0;
    case Coord::kAlignCorners:
      return out_len == 1 ? 0.0 : xd * static_cast<double>(in_len - 1) / (out_len - 1);
    case Coord::kAsymmetric: return xd / s;
    case Coord::kTfHalfPixelForNn: return (xd + 0.5) / s;
    case Coord::kTfCropAndResize: {
      const size_t r = p.scales.size();
      const double start = p.roi[axis], end = p.roi[r + axis];
      if (out_len > 1) {
        return start * static_cast<double>(in_len - 1) +
               xd * (end - start) * static_cast<double>(in_len - 1) / (out_len - 1);
      }
      return 0.5 * (start + end) * static_cast<double>(in_len - 1);
    }
  }
  return 0.0;
}

int64_t clamp_index(int64_t i, int64_t len) { return i < 0 ? 0 : (i >= len ? len - 1 : i); }

double cubic_weight(double d, double a) {
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0.0;
}

}  // namespace

AxisTaps resize_axis_taps(const ResizeParams& p, size_t axis, int64_t in_len, int64_t out_len) {
  AxisTaps t;
  t.n = p.mode == Mode::kNearest ? 1 : p.mode == Mode::kLinear ? 2 : 4;
  t.idx.resize(static_cast<size_t>(out_len * t.n));
  t.w.resize(t.idx.size());
  t.extrapolate.assign(static_cast<size_t>(out_len), 0);
  t.identity = in_len == out_len;
  for (int64_t i = 0; i < out_len; ++i) {
    int64_t* idx = &t.idx[i * t.n];
    double* w = &t.w[i * t.n];
    const double x = source_coord(p, axis, i, in_len);
    if (p.coord == Coord::kTfCropAndResize && (x < 0 || x > static_cast<double>(in_len - 1))) {
      t.extrapolate[i] = 1;
      t.identity = false;
      for (int k = 0; k < t.n; ++k) idx[k] = 0, w[k] = 0;
      continue;
    }
    const double fl = std::floor(x);
    const int64_t x0 = static_cast<int64_t>(fl);
    const double ratio = x - fl;
    if (p.mode == Mode::kNearest) {
      bool up = false;
      switch (p.nearest) {
        case Nearest::kRoundPreferFloor: up = ratio > 0.5; break;
        case Nearest::kRoundPreferCeil: up = ratio >= 0.5; break;
        case Nearest::kFloor: up = false; break;
        case Nearest::kCeil: up = ratio > 0; break;
        case Nearest::kLegacy: up = p.scales[axis] < 1.0 && ratio > 0; break;
      }
      idx[0] = clamp_index(x0 + (up ? 1 : 0), in_len);
      w[0] = 1.0;
    } else if (p.mode == Mode::kLinear) {
      idx[0] = clamp_index(x0, in_len);
      idx[1] = clamp_index(x0 + 1, in_len);
      w[0] = 1.0 - ratio;
      w[1] = ratio;
    } else {
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t j = x0 - 1 + k;
        w[k] = cubic_weight(ratio + 1 - k, p.cubic_a);
        if (p.exclude_outside && (j < 0 || j >= in_len)) w[k] = 0;
        idx[k] = clamp_index(j, in_len);
        sum += w[k];
      }
      if (p.exclude_outside && sum != 0) {
        for (int k = 0; k < 4; ++k) w[k] /= sum;
      }
    }
    for (int k = 0; k < t.n && t.identity; ++k) {
      if (w[k] != 0 && !(idx[k] == i && w[k] == 1.0)) t.identity = false;
    }
  }
  return t;
}

namespace {

Status run_nearest(KernelCtx& c, const ResizeParams& p) {
  const Tensor& x = *c.in[0];
  Tensor& y = *c.out[0];
  const Shape& in = x.shape();
  const Shape& out = y.shape();
  const size_t r = out.size();
  if (y.numel() == 0) return Status::ok();
  std::vector<AxisTaps> taps;
  for (size_t d = 0; d < r; ++d) taps.push_back(resize_axis_taps(p, d, in[d], out[d]));
  const std::vector<int64_t> st = strides_of(in);
  Tensor fill(x.dtype(), {});
  fill.set_f64(0, p.extrapolation);
  return dispatch_width(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U* px = x.data<U>();
    U* py = y.data<U>();
    const U ext = *fill.data<U>();
    std::vector<int64_t> pos(r, 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t off = 0;
      bool outside = false;
      for (size_t d = 0; d < r; ++d) {
        outside |= taps[d].extrapolate[pos[d]] != 0;
        off += taps[d].idx[pos[d]] * st[d];
      }
      py[i] = outside ? ext : px[off];
      for (size_t d = r; d-- > 0;) {
        if (++pos[d] < out[d]) break;
        pos[d] = 0;
      }
    }
    return Status::ok();
  });
}

Status run_interpolate(KernelCtx& c, const ResizeParams& p) {
  const Tensor& x = *c.in[0];
  Tensor& y = *c.out[0];
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64) {
    return unsupported(std::string("linear/cubic Resize on ") + dtype_name(x.dtype()) +
                       " (float32/float64 only; int8 models interpolate between DequantizeLinear and QuantizeLinear)");
  }
  Shape shape = x.shape();
  std::vector<double> cur(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) cur[i] = x.get_f64(i);
  // Shrinking axes first, then growing ones (each group last axis first), so that no intermediate buffer is larger
  // than the input or the output: [N, 1] -> [1, N] must not pass through [N, N].
  std::vector<size_t> order;
  for (int grow = 0; grow < 2; ++grow) {
    for (size_t d = shape.size(); d-- > 0;) {
      if ((y.shape()[d] > shape[d]) == (grow == 1)) order.push_back(d);
    }
  }
  for (size_t d : order) {
    const int64_t in_len = shape[d], out_len = y.shape()[d];
    const AxisTaps t = resize_axis_taps(p, d, in_len, out_len);
    if (t.identity) continue;
    const int64_t outer = dim_product(shape, 0, d), inner = dim_product(shape, d + 1, shape.size());
    std::vector<double> next(static_cast<size_t>(outer * out_len * inner));
    for (int64_t o = 0; o < outer; ++o) {
      const double* src = cur.data() + o * in_len * inner;
      for (int64_t i = 0; i < out_len; ++i) {
        double* dst = next.data() + (o * out_len + i) * inner;
        if (t.extrapolate[i]) {
          for (int64_t k = 0; k < inner; ++k) dst[k] = p.extrapolation;
          continue;
        }
        for (int64_t k = 0; k < inner; ++k) dst[k] = 0;
        for (int j = 0; j < t.n; ++j) {
          const double w = t.w[i * t.n + j];
          if (w == 0) continue;
          const double* row = src + t.idx[i * t.n + j] * inner;
          for (int64_t k = 0; k < inner; ++k) dst[k] += w * row[k];
        }
      }
    }
    cur = std::move(next);
    shape[d] = out_len;
  }
  if (static_cast<int64_t>(cur.size()) != y.numel()) return internal("Resize produced the wrong element count");
  for (int64_t i = 0; i < y.numel(); ++i) y.set_f64(i, cur[i]);
  return Status::ok();
}

Status infer_resize(InferCtx& c, bool upsample) {
  ResizeParams p = QD_TRY(resize_params(c, upsample));
  if (p.mode != Mode::kNearest && c.dtype(0) != DType::kFloat32 && c.dtype(0) != DType::kFloat64) {
    return unsupported(std::string("linear/cubic Resize on ") + dtype_name(c.dtype(0)) +
                       " (float32/float64 only; int8 models interpolate between DequantizeLinear and QuantizeLinear)");
  }
  c.set_output(0, c.dtype(0), std::move(p.out));
  return Status::ok();
}

Status run_resize(KernelCtx& c, bool upsample) {
  const InferCtx ic = infer_ctx_of(c);
  const ResizeParams p = QD_TRY(resize_params(ic, upsample));
  if (p.mode == Mode::kNearest) return run_nearest(c, p);
  return run_interpolate(c, p);
}

}  // namespace

Status infer_Resize(InferCtx& c) { return infer_resize(c, false); }
Status run_Resize(KernelCtx& c) { return run_resize(c, false); }
Status infer_Upsample(InferCtx& c) { return infer_resize(c, true); }
Status run_Upsample(KernelCtx& c) { return run_resize(c, true); }

}  // namespace qd::ops
