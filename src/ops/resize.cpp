// Resize (opsets 10-19) and Upsample (7, 9): nearest (every nearest_mode), linear and cubic interpolation with
// every coordinate_transformation_mode (half_pixel_symmetric from 19), from scales or sizes; from opset 18 the
// antialias filter, the axes the scales/sizes/roi refer to, and keep_aspect_ratio_policy.
//
// Nearest is a gather of whole elements (any dtype, so int8 activations stay int8). Linear and cubic are separable:
// they run as one 1-D pass per resized axis, in double precision, on float32/float64 data.
#include <algorithm>
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
  if (m == "half_pixel_symmetric") return Coord::kHalfPixelSymmetric;
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

// Scales or sizes of the listed axes (all axes when `axes` is empty) spread over the input's rank; the other axes
// keep their size. `policy` (opset 18) fits sizes into the box they describe keeping the aspect ratio.
Status read_scales_or_sizes(const InferCtx& c, int scales_in, int sizes_in, const std::vector<int64_t>& axes,
                            const std::string& policy, ResizeParams* p) {
  const bool has_scales = scales_in >= 0 && c.has_input(scales_in) && numel(c.shape(scales_in)) > 0;
  const bool has_sizes = sizes_in >= 0 && c.has_input(sizes_in) && numel(c.shape(sizes_in)) > 0;
  if (has_scales == has_sizes) return invalid("exactly one of scales and sizes must be given (non-empty)");
  const Shape& in = c.shape(0);
  auto spread = [&](auto given, auto fill) -> Expected<decltype(given)> {
    if (axes.empty()) return given;
    if (given.size() != axes.size()) {
      return invalid(std::string(has_scales ? "scales" : "sizes") + " has " + std::to_string(given.size()) +
                     " entries but axes lists " + std::to_string(axes.size()));
    }
    decltype(given) full(in.size(), fill);
    for (size_t i = 0; i < axes.size(); ++i) full[axes[i]] = given[i];
    return full;
  };
  if (has_scales) {
    if (!is_float(c.dtype(scales_in))) return invalid("scales must be a float tensor");
    if (!c.value(scales_in)) return unsupported("the scales input must be a constant (it sets the output shape)");
    return apply_scales(in, QD_TRY(spread(QD_TRY(c.const_floats(scales_in)), 1.f)), p);
  }
  if (!c.value(sizes_in)) return unsupported("Resize's sizes must be a constant (it sets the output shape)");
  std::vector<int64_t> sizes = QD_TRY(spread(QD_TRY(c.const_ints(sizes_in)), int64_t{0}));
  if (axes.empty() || policy == "stretch") {
    if (!axes.empty()) {
      for (size_t d = 0; d < in.size(); ++d) {
        if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end()) sizes[d] = in[d];
      }
    }
    if (policy == "stretch") return apply_sizes(in, sizes, p);
  }
  // not_larger / not_smaller: one scale for the resized axes, the smallest (largest) of sizes / input.
  std::vector<int64_t> resized = axes;
  if (resized.empty()) {
    for (size_t d = 0; d < in.size(); ++d) resized.push_back(static_cast<int64_t>(d));
  }
  double scale = policy == "not_larger" ? INFINITY : 0.0;
  for (int64_t d : resized) {
    if (in[d] == 0) return invalid("keep_aspect_ratio_policy cannot resize an empty axis");
    const double s = static_cast<double>(sizes[d]) / static_cast<double>(in[d]);
    scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
  }
  p->out.assign(in.begin(), in.end());
  p->scales.assign(in.size(), 1.0);
  p->resized.assign(in.size(), 0.0);
  for (size_t d = 0; d < in.size(); ++d) p->resized[d] = static_cast<double>(in[d]);
  for (int64_t d : resized) {
    const double o = std::nearbyint(scale * static_cast<double>(in[d]));  // rounds half to even, as numpy does
    if (o > static_cast<double>(kMaxElements)) return invalid("keep_aspect_ratio_policy makes the output too large");
    p->out[d] = static_cast<int64_t>(o);
    p->scales[d] = scale;
    p->resized[d] = scale * static_cast<double>(in[d]);
  }
  return checked_numel(p->out).status();
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
      QD_RETURN_IF_ERROR(read_scales_or_sizes(c, 1, -1, {}, "stretch", &p));
    }
    return p;
  }
  const int64_t antialias = QD_TRY(a.get_int("antialias", 0));
  if (antialias != 0 && antialias != 1) return invalid("antialias must be 0 or 1, got " + std::to_string(antialias));
  p.antialias = antialias == 1 && p.mode != Mode::kNearest;
  std::vector<int64_t> axes;
  if (a.has("axes")) {
    const size_t r = c.rank(0);
    std::vector<char> seen(r, 0);
    for (int64_t ax : QD_TRY(a.get_ints("axes"))) {
      auto n = normalize_axis(ax, r);
      if (!n) return invalid("axes lists " + std::to_string(ax) + ", out of range for rank " + std::to_string(r));
      if (seen[*n]++) return invalid("axes lists axis " + std::to_string(ax) + " twice");
      axes.push_back(*n);
    }
  }
  const std::string policy = QD_TRY(a.get_string("keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
    return invalid("keep_aspect_ratio_policy must be stretch, not_larger or not_smaller; got '" + policy + "'");
  }
  p.coord = QD_TRY(read_coord(a));
  p.nearest = QD_TRY(read_nearest(a));
  p.cubic_a = QD_TRY(a.get_float("cubic_coeff_a", -0.75f));
  p.exclude_outside = QD_TRY(a.get_int("exclude_outside", 0)) != 0;
  p.extrapolation = QD_TRY(a.get_float("extrapolation_value", 0.f));
  QD_RETURN_IF_ERROR(read_scales_or_sizes(c, 2, 3, axes, policy, &p));
  const size_t r = c.rank(0);
  p.roi.assign(2 * r, 0.0);
  for (size_t i = 0; i < r; ++i) p.roi[r + i] = 1.0;
  if (p.coord == Coord::kTfCropAndResize && c.has_input(1) && numel(c.shape(1)) > 0) {
    if (!c.value(1)) return unsupported("Resize's roi must be a constant");
    const std::vector<float> roi = QD_TRY(c.const_floats(1));
    const size_t k = axes.empty() ? r : axes.size();
    if (roi.size() != 2 * k) {
      return invalid("roi has " + std::to_string(roi.size()) + " entries; it needs 2 * " +
                     (axes.empty() ? "rank" : "len(axes)") + " = " + std::to_string(2 * k));
    }
    for (size_t i = 0; i < k; ++i) {
      const size_t d = axes.empty() ? i : static_cast<size_t>(axes[i]);
      p.roi[d] = roi[i];
      p.roi[r + d] = roi[k + i];
    }
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
    case Coord::kHalfPixelSymmetric: {
      // half_pixel about the centre of the input, so that a size rounded down does not shift the image.
      const double adjustment = static_cast<double>(p.out[axis]) / out_len;
      const double offset = static_cast<double>(in_len) / 2 * (1 - adjustment);
      return offset + (xd + 0.5) / s - 0.5;
    }
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

namespace {

// Antialiased linear / cubic taps (opset 18): the filter's support grows by 1 / scale when the axis shrinks, and the
// weights are normalized. As in ONNX's reference, the taps sit around L = ceil(x) - 1 with ratio x - L in (0, 1]
// (the left neighbour preferred), from L + start to L + 1 - start, clamped to the axis (edge padding).
int antialias_start(const ResizeParams& p, double scale) {
  const double s = std::min(scale, 1.0);
  return static_cast<int>(std::floor((p.mode == Mode::kLinear ? -1.0 : -2.0) / s)) + 1;
}

void antialias_taps(const ResizeParams& p, double scale, double x, int64_t in_len, int n, int64_t* idx, double* w) {
  const double s = std::min(scale, 1.0);
  const double left = std::ceil(x) - 1;
  const double ratio = x - left;
  const int start = antialias_start(p, scale);
  double sum = 0;
  for (int k = 0; k < n; ++k) {
    const double d = s * (start + k - ratio);
    const double v = p.mode == Mode::kLinear ? std::max(0.0, 1 - std::fabs(d)) : cubic_weight(d, p.cubic_a);
    const int64_t j = static_cast<int64_t>(left) + start + k;
    w[k] = p.exclude_outside && (j < 0 || j >= in_len) ? 0.0 : v;
    idx[k] = clamp_index(j, in_len);
    sum += w[k];
  }
  if (sum != 0) {
    for (int k = 0; k < n; ++k) w[k] /= sum;
  }
}

}  // namespace

AxisTaps resize_axis_taps(const ResizeParams& p, size_t axis, int64_t in_len, int64_t out_len) {
  AxisTaps t;
  t.n = p.mode == Mode::kNearest ? 1 : p.mode == Mode::kLinear ? 2 : 4;
  if (p.antialias) t.n = 2 - 2 * antialias_start(p, p.scales[axis]);
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
    if (p.antialias) {
      antialias_taps(p, p.scales[axis], x, in_len, t.n, idx, w);
    } else if (p.mode == Mode::kNearest) {
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
