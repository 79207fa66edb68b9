#include "tasks/preprocess.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/half.h"

namespace qd {

namespace {

constexpr int kCoefBits = 11;  // OpenCV's INTER_RESIZE_COEF_BITS
constexpr int kCoefScale = 1 << kCoefBits;

// cvRound / saturate_cast<int>: round half to even (the default FP rounding mode).
inline int round_even(double v) { return static_cast<int>(std::nearbyint(v)); }
inline uint8_t clamp_u8(int v) { return static_cast<uint8_t>(std::min(255, std::max(0, v))); }

Status check_resize(const Image& src, int width, int height) {
  if (src.empty() || src.channels != 3 || src.data.size() != src.row_bytes() * static_cast<size_t>(src.height)) {
    return invalid("resize: the source image is empty or malformed");
  }
  if (width <= 0 || height <= 0 || width > kMaxImageSide || height > kMaxImageSide) {
    return invalid("resize: bad target size " + std::to_string(width) + "x" + std::to_string(height) + " (1.." +
                   std::to_string(kMaxImageSide) + " a side)");
  }
  return Status::ok();
}

// Exact integer kx x ky area average (OpenCV's resizeAreaFast). 2x2 rounds half up ((sum + 2) >> 2) like its SIMD
// path; other factors multiply by the float reciprocal of the area and round half to even.
Image resize_area_fast(const Image& src, const ResampleStep& st) {
  const int kx = st.kx, ky = st.ky;
  Image dst(st.dst_w, st.dst_h);
  const float inv_area = 1.f / static_cast<float>(kx * ky);
  const bool two = kx == 2 && ky == 2;
  for (int dy = 0; dy < st.dst_h; ++dy) {
    uint8_t* d = dst.pixel(0, dy);
    for (int dx = 0; dx < st.dst_w; ++dx) {
      for (int c = 0; c < 3; ++c) {
        int sum = 0;
        for (int j = 0; j < ky; ++j) {
          const uint8_t* s = src.pixel(dx * kx, dy * ky + j) + c;
          for (int i = 0; i < kx; ++i) sum += s[i * 3];
        }
        d[dx * 3 + c] = two ? static_cast<uint8_t>((sum + 2) >> 2)
                            : clamp_u8(round_even(static_cast<float>(sum) * inv_area));
      }
    }
  }
  return dst;
}

// The kLinear step (see resize_linear in the header for the formula).
Image resize_linear_impl(const Image& src, const ResampleStep& st) {
  const int sw = src.width, sh = src.height, width = st.dst_w, height = st.dst_h;
  const double scale_x = st.scale_x, scale_y = st.scale_y;
  // Column table.
  std::vector<int> xofs(static_cast<size_t>(width));
  std::vector<int> xw0(static_cast<size_t>(width)), xw1(static_cast<size_t>(width));
  std::vector<bool> xedge(static_cast<size_t>(width));
  for (int dx = 0; dx < width; ++dx) {
    float f = static_cast<float>((dx + 0.5) * scale_x - 0.5);
    int sx = static_cast<int>(std::floor(f));
    f -= static_cast<float>(sx);
    if (sx < 0) f = 0.f, sx = 0;
    const bool edge = sx + 1 >= sw;
    if (sx >= sw - 1) f = 0.f, sx = sw - 1;
    xofs[dx] = sx;
    xedge[dx] = edge;
    xw0[dx] = round_even((1.f - f) * static_cast<float>(kCoefScale));
    xw1[dx] = round_even(f * static_cast<float>(kCoefScale));
  }
  // Horizontal pass of one source row into int32 (value * 2048).
  auto hpass = [&](int sy, std::vector<int>& out) {
    const uint8_t* s = src.pixel(0, sy);
    for (int dx = 0; dx < width; ++dx) {
      const uint8_t* p = s + xofs[dx] * 3;
      for (int c = 0; c < 3; ++c) {
        out[dx * 3 + c] = xedge[dx] ? p[c] * kCoefScale : p[c] * xw0[dx] + p[c + 3] * xw1[dx];
      }
    }
  };
  Image dst(width, height);
  const int n = width * 3;
  std::vector<int> h0(static_cast<size_t>(n)), h1(static_cast<size_t>(n));
  int row0 = -1, row1 = -1;  // source rows currently in h0 / h1
  for (int dy = 0; dy < height; ++dy) {
    float f = static_cast<float>((dy + 0.5) * scale_y - 0.5);
    const int sy = static_cast<int>(std::floor(f));
    f -= static_cast<float>(sy);
    const int b0 = round_even((1.f - f) * static_cast<float>(kCoefScale));
    const int b1 = round_even(f * static_cast<float>(kCoefScale));
    const int r0 = std::min(std::max(sy, 0), sh - 1), r1 = std::min(std::max(sy + 1, 0), sh - 1);
    if (r0 != row0) {
      if (r0 == row1) {
        std::swap(h0, h1);
        std::swap(row0, row1);
      } else {
        hpass(r0, h0);
        row0 = r0;
      }
    }
    if (r1 != row1) {
      if (r1 == row0) {
        h1 = h0;
      } else {
        hpass(r1, h1);
      }
      row1 = r1;
    }
    uint8_t* d = dst.pixel(0, dy);
    // OpenCV's 8-bit vertical pass (its SIMD and scalar code agree): drop 4 bits, 16x16->high-16 products, round.
    for (int i = 0; i < n; ++i) {
      const int v = (((h0[i] >> 4) * b0) >> 16) + (((h1[i] >> 4) * b1) >> 16);
      d[i] = clamp_u8((v + 2) >> 2);
    }
  }
  return dst;
}

// OpenCV's computeResizeAreaTab: which source pixels (and with what weight) make up each output pixel.
struct AreaTap {
  int d, s;
  float w;
};
std::vector<AreaTap> area_taps(int ssize, int dsize, double scale) {
  std::vector<AreaTap> tab;
  for (int dx = 0; dx < dsize; ++dx) {
    const double fsx1 = dx * scale;
    const double fsx2 = fsx1 + scale;
    const double cell = std::min(scale, ssize - fsx1);
    int sx1 = static_cast<int>(std::ceil(fsx1)), sx2 = static_cast<int>(std::floor(fsx2));
    sx2 = std::min(sx2, ssize - 1);
    sx1 = std::min(sx1, sx2);
    if (sx1 - fsx1 > 1e-3) tab.push_back({dx, sx1 - 1, static_cast<float>((sx1 - fsx1) / cell)});
    for (int sx = sx1; sx < sx2; ++sx) tab.push_back({dx, sx, static_cast<float>(1.0 / cell)});
    if (fsx2 - sx2 > 1e-3) {
      tab.push_back({dx, sx2, static_cast<float>(std::min(std::min(fsx2 - sx2, 1.), cell) / cell)});
    }
  }
  return tab;
}

// The kArea step.
Image resize_area_impl(const Image& src, const ResampleStep& st) {
  const int sw = src.width, sh = src.height, width = st.dst_w, height = st.dst_h;
  const double scale_x = st.scale_x, scale_y = st.scale_y;
  const std::vector<AreaTap> xtab = area_taps(sw, width, scale_x);
  const std::vector<AreaTap> ytab = area_taps(sh, height, scale_y);
  Image dst(width, height);
  const size_t n = static_cast<size_t>(width) * 3;
  std::vector<float> buf(n), sum(n, 0.f);
  int prev_dy = ytab.empty() ? 0 : ytab[0].d;
  // Same accumulation order as OpenCV's ResizeArea_Invoker, so float sums (and .5 ties) agree.
  for (const AreaTap& yt : ytab) {
    const uint8_t* s = src.pixel(0, yt.s);
    std::fill(buf.begin(), buf.end(), 0.f);
    for (const AreaTap& xt : xtab) {
      for (int c = 0; c < 3; ++c) buf[xt.d * 3 + c] = buf[xt.d * 3 + c] + s[xt.s * 3 + c] * xt.w;
    }
    if (yt.d != prev_dy) {
      uint8_t* d = dst.pixel(0, prev_dy);
      for (size_t i = 0; i < n; ++i) {
        d[i] = clamp_u8(round_even(sum[i]));
        sum[i] = yt.w * buf[i];
      }
      prev_dy = yt.d;
    } else {
      for (size_t i = 0; i < n; ++i) sum[i] = sum[i] + yt.w * buf[i];
    }
  }
  uint8_t* d = dst.pixel(0, prev_dy);
  for (size_t i = 0; i < n; ++i) d[i] = clamp_u8(round_even(sum[i]));
  return dst;
}

Image resample(const Image& src, const ResampleStep& st) {
  switch (st.method) {
    case ResampleMethod::kCopy: return src;
    case ResampleMethod::kLinear: return resize_linear_impl(src, st);
    case ResampleMethod::kAreaFast: return resize_area_fast(src, st);
    case ResampleMethod::kArea: return resize_area_impl(src, st);
  }
  return src;
}

// Constant-border padding (cv::copyMakeBorder with BORDER_CONSTANT).
Image pad_image(const Image& img, int top, int bottom, int left, int right, uint8_t value) {
  Image out(img.width + left + right, img.height + top + bottom, value);
  for (int y = 0; y < img.height; ++y) {
    std::memcpy(out.pixel(left, y + top), img.pixel(0, y), img.row_bytes());
  }
  return out;
}

// The geometry of ultralytics' letterbox(auto=False) for a w x h image, in Python's arithmetic (double precision,
// round half to even): fills plan->steps[1], left, top and returns r, dw, dh.
void plan_ultralytics(int w_in, int h_in, int out_w, int out_h, bool scaleup, LetterboxPlan* plan, double* r_out,
                      double* dw_out, double* dh_out) {
  const double w = w_in, h = h_in;
  double r = std::min(out_h / h, out_w / w);
  if (!scaleup) r = std::min(r, 1.0);
  const int unpad_w = round_even(w * r), unpad_h = round_even(h * r);
  const double dw = (out_w - unpad_w) / 2.0, dh = (out_h - unpad_h) / 2.0;
  plan->steps[1] = plan_resize_linear(w_in, h_in, unpad_w, unpad_h);
  plan->top = round_even(dh - 0.1);
  plan->left = round_even(dw - 0.1);
  *r_out = r;
  *dw_out = dw;
  *dh_out = dh;
}

// The inverse of M = [s 0 tx; 0 s ty] (given in float) as cv::warpAffine computes it (invertAffineTransform, double).
void invert_scale_map(float s, float tx, float ty, double m[6]) {
  m[0] = s, m[1] = 0.0, m[2] = tx, m[3] = 0.0, m[4] = s, m[5] = ty;
  double det = m[0] * m[4] - m[1] * m[3];
  det = det != 0 ? 1. / det : 0;
  const double a11 = m[4] * det, a22 = m[0] * det;
  m[0] = a11;
  m[1] *= -det;
  m[3] *= -det;
  m[4] = a22;
  const double b1 = -m[0] * m[2] - m[1] * m[5];
  const double b2 = -m[3] * m[2] - m[4] * m[5];
  m[2] = b1;
  m[5] = b2;
}

// cv::warpAffine(src, M, size, INTER_LINEAR, BORDER_CONSTANT, pad) given the inverse map m, as OpenCV 4 computes it:
// source positions in fixed point with 1/32-pixel steps (INTER_BITS = 5, AB_BITS = 10), bilinear weights in 1/32768
// units, taps outside the image replaced by `pad`.
Image warp_affine(const Image& src, const double m[6], int out_w, int out_h, uint8_t pad) {
  constexpr int kAbBits = 10, kAbScale = 1 << kAbBits, kInterBits = 5, kTab = 1 << kInterBits;
  constexpr int kRoundDelta = kAbScale / kTab / 2;
  std::vector<int> adelta(static_cast<size_t>(out_w)), bdelta(static_cast<size_t>(out_w));
  for (int x = 0; x < out_w; ++x) {
    adelta[x] = round_even(m[0] * x * kAbScale);
    bdelta[x] = round_even(m[3] * x * kAbScale);
  }
  Image dst(out_w, out_h);
  const int sw = src.width, sh = src.height;
  for (int y = 0; y < out_h; ++y) {
    const int x0 = round_even((m[1] * y + m[2]) * kAbScale) + kRoundDelta;
    const int y0 = round_even((m[4] * y + m[5]) * kAbScale) + kRoundDelta;
    uint8_t* d = dst.pixel(0, y);
    for (int x = 0; x < out_w; ++x) {
      const int X = (x0 + adelta[x]) >> (kAbBits - kInterBits);
      const int Y = (y0 + bdelta[x]) >> (kAbBits - kInterBits);
      const int sx = X >> kInterBits, sy = Y >> kInterBits;
      const int fx = X & (kTab - 1), fy = Y & (kTab - 1);
      const int w[4] = {(kTab - fy) * (kTab - fx) * 32, (kTab - fy) * fx * 32, fy * (kTab - fx) * 32, fy * fx * 32};
      const bool in_x0 = sx >= 0 && sx < sw, in_x1 = sx + 1 >= 0 && sx + 1 < sw;
      const bool in_y0 = sy >= 0 && sy < sh, in_y1 = sy + 1 >= 0 && sy + 1 < sh;
      for (int c = 0; c < 3; ++c) {
        const int v0 = in_x0 && in_y0 ? src.pixel(sx, sy)[c] : pad;
        const int v1 = in_x1 && in_y0 ? src.pixel(sx + 1, sy)[c] : pad;
        const int v2 = in_x0 && in_y1 ? src.pixel(sx, sy + 1)[c] : pad;
        const int v3 = in_x1 && in_y1 ? src.pixel(sx + 1, sy + 1)[c] : pad;
        d[x * 3 + c] = clamp_u8((v0 * w[0] + v1 * w[1] + v2 * w[2] + v3 * w[3] + (1 << 14)) >> 15);
      }
    }
  }
  return dst;
}

}  // namespace

ResampleStep plan_resize_linear(int src_w, int src_h, int dst_w, int dst_h) {
  ResampleStep st;
  st.src_w = src_w, st.src_h = src_h, st.dst_w = dst_w, st.dst_h = dst_h;
  if (src_w == dst_w && src_h == dst_h) return st;  // kCopy
  st.scale_x = 1. / (static_cast<double>(dst_w) / src_w);
  st.scale_y = 1. / (static_cast<double>(dst_h) / src_h);
  const int iscale_x = round_even(st.scale_x), iscale_y = round_even(st.scale_y);
  // OpenCV turns an exact 2x INTER_LINEAR shrink into its area average.
  if (iscale_x == 2 && iscale_y == 2 && std::fabs(st.scale_x - iscale_x) < DBL_EPSILON &&
      std::fabs(st.scale_y - iscale_y) < DBL_EPSILON) {
    st.method = ResampleMethod::kAreaFast;
    st.kx = st.ky = 2;
  } else {
    st.method = ResampleMethod::kLinear;
  }
  return st;
}

ResampleStep plan_resize_area(int src_w, int src_h, int dst_w, int dst_h) {
  // INTER_AREA enlarging is a different kernel in OpenCV; nothing here needs it, so it falls back to linear.
  if (dst_w > src_w || dst_h > src_h) return plan_resize_linear(src_w, src_h, dst_w, dst_h);
  ResampleStep st;
  st.src_w = src_w, st.src_h = src_h, st.dst_w = dst_w, st.dst_h = dst_h;
  if (src_w == dst_w && src_h == dst_h) return st;  // kCopy
  st.scale_x = 1. / (static_cast<double>(dst_w) / src_w);
  st.scale_y = 1. / (static_cast<double>(dst_h) / src_h);
  const int iscale_x = round_even(st.scale_x), iscale_y = round_even(st.scale_y);
  if (std::fabs(st.scale_x - iscale_x) < DBL_EPSILON && std::fabs(st.scale_y - iscale_y) < DBL_EPSILON) {
    st.method = ResampleMethod::kAreaFast;
    st.kx = iscale_x;
    st.ky = iscale_y;
  } else {
    st.method = ResampleMethod::kArea;
  }
  return st;
}

Expected<Image> resize_linear(const Image& src, int width, int height) {
  QD_RETURN_IF_ERROR(check_resize(src, width, height));
  return resample(src, plan_resize_linear(src.width, src.height, width, height));
}

Expected<Image> resize_area(const Image& src, int width, int height) {
  QD_RETURN_IF_ERROR(check_resize(src, width, height));
  return resample(src, plan_resize_area(src.width, src.height, width, height));
}

LetterboxOptions cudla_letterbox_options() {
  LetterboxOptions o;
  o.style = LetterboxStyle::kCuDLA;
  o.width = o.height = 672;
  o.fit_width = o.fit_height = 640;
  return o;
}

Expected<LetterboxPlan> plan_letterbox(int src_w, int src_h, const LetterboxOptions& opt) {
  if (src_w <= 0 || src_h <= 0 || src_w > kMaxImageSide || src_h > kMaxImageSide) {
    return invalid("letterbox: bad image size " + std::to_string(src_w) + "x" + std::to_string(src_h));
  }
  if (opt.width <= 0 || opt.height <= 0 || opt.width > kMaxImageSide || opt.height > kMaxImageSide) {
    return invalid("letterbox: bad target size " + std::to_string(opt.width) + "x" + std::to_string(opt.height) +
                   " (1.." + std::to_string(kMaxImageSide) + " a side)");
  }
  LetterboxPlan p;
  p.style = opt.style;
  p.out_w = opt.width;
  p.out_h = opt.height;
  p.pad_value = opt.pad_value;
  p.steps[0] = plan_resize_linear(src_w, src_h, src_w, src_h);  // kCopy unless the val style loads first
  p.info.orig_w = src_w;
  p.info.orig_h = src_h;
  LetterboxInfo& li = p.info;
  switch (opt.style) {
    case LetterboxStyle::kUltralytics: {
      double r, dw, dh;
      plan_ultralytics(src_w, src_h, opt.width, opt.height, opt.scaleup, &p, &r, &dw, &dh);
      li.scale = static_cast<float>(r);
      li.pad_x = static_cast<float>(dw);
      li.pad_y = static_cast<float>(dh);
      break;
    }
    case LetterboxStyle::kYoloV5Val: {
      if (opt.width != opt.height) {
        return invalid("letterbox: the YOLOv5 val style needs a square input, got " + std::to_string(opt.width) +
                       "x" + std::to_string(opt.height));
      }
      // load_image(): r = img_size / max(h0, w0); resize to (ceil(w0 * r), ceil(h0 * r)) when r != 1.
      const double r0 = static_cast<double>(opt.width) / std::max(src_w, src_h);
      if (r0 != 1.0) {
        const int w = static_cast<int>(std::ceil(src_w * r0)), h = static_cast<int>(std::ceil(src_h * r0));
        p.steps[0] = r0 > 1 ? plan_resize_linear(src_w, src_h, w, h) : plan_resize_area(src_w, src_h, w, h);
      }
      const int loaded_w = p.steps[0].dst_w, loaded_h = p.steps[0].dst_h;
      double r, dw, dh;
      plan_ultralytics(loaded_w, loaded_h, opt.width, opt.height, false, &p, &r, &dw, &dh);
      // val.py passes ratio_pad = ((h / h0, w / w0), (dw, dh)) and scale_boxes uses the height ratio.
      li.scale = static_cast<float>(static_cast<double>(loaded_h) / src_h * r);
      li.pad_x = static_cast<float>(dw);
      li.pad_y = static_cast<float>(dh);
      break;
    }
    case LetterboxStyle::kCuDLA: {
      if (opt.fit_width <= 0 || opt.fit_height <= 0 || opt.fit_width > opt.width || opt.fit_height > opt.height) {
        return invalid("letterbox: the fit size must lie within the output size");
      }
      // The arithmetic of cuDLA-samples' preProcess4Validate, types included.
      const float from_w = static_cast<float>(src_w), from_h = static_cast<float>(src_h);
      const float to_w = static_cast<float>(opt.fit_width), to_h = static_cast<float>(opt.fit_height);
      const float s = to_w / from_w < to_h / from_h ? to_w / from_w : to_h / from_h;
      const float off_x = static_cast<float>(opt.width - opt.fit_width) / 2.f;
      const float off_y = static_cast<float>(opt.height - opt.fit_height) / 2.f;
      const float tx = static_cast<float>(-s * from_w * 0.5 + to_w * 0.5 + s * 0.5 - 0.5 + off_x);
      const float ty = static_cast<float>(-s * from_h * 0.5 + to_h * 0.5 + s * 0.5 - 0.5 + off_y);
      invert_scale_map(s, tx, ty, p.inv_map);
      li.scale = s;
      li.pad_x = static_cast<float>(opt.width * 0.5 - s * from_w * 0.5);
      li.pad_y = static_cast<float>(opt.height * 0.5 - s * from_h * 0.5);
      break;
    }
  }
  return p;
}

Expected<Image> letterbox(const Image& img, const LetterboxOptions& opt, LetterboxInfo* info) {
  QD_RETURN_IF_ERROR(check_resize(img, opt.width, opt.height));
  const LetterboxPlan p = QD_TRY(plan_letterbox(img.width, img.height, opt));
  Image out;
  if (p.style == LetterboxStyle::kCuDLA) {
    out = warp_affine(img, p.inv_map, p.out_w, p.out_h, p.pad_value);
  } else {
    const Image content = resample(resample(img, p.steps[0]), p.steps[1]);
    out = pad_image(content, p.top, p.out_h - content.height - p.top, p.left, p.out_w - content.width - p.left,
                    p.pad_value);
  }
  if (info) *info = p.info;
  return out;
}

int8_t quantize_int8(float v, float scale) {
  const float q = std::nearbyint(v / scale);
  if (!(q >= -128.f)) return -128;  // also NaN
  if (q > 127.f) return 127;
  return static_cast<int8_t>(q);
}

Expected<TensorValueTable> make_tensor_value_table(const TensorOptions& opt) {
  if (opt.dtype != DType::kFloat32 && opt.dtype != DType::kFloat16 && opt.dtype != DType::kInt8) {
    return unsupported(std::string("images_to_tensor: output type ") + dtype_name(opt.dtype) +
                       " (use float32, float16 or int8; Tensor::cast converts further)");
  }
  if (opt.dtype == DType::kInt8 && !(opt.int8_scale > 0.f && std::isfinite(opt.int8_scale))) {
    return invalid("images_to_tensor: int8 output needs a positive input scale");
  }
  if (!(opt.divisor != 0.f) || !std::isfinite(opt.divisor)) return invalid("images_to_tensor: divisor must be non-zero");
  for (float s : opt.stddev) {
    if (!(s != 0.f) || !std::isfinite(s)) return invalid("images_to_tensor: stddev must be non-zero");
  }
  TensorValueTable t{};
  const bool rgb = opt.order == ChannelOrder::kRGB;
  t.src_channel[0] = rgb ? 0 : 2;
  t.src_channel[1] = 1;
  t.src_channel[2] = rgb ? 2 : 0;
  for (int c = 0; c < 3; ++c) {
    for (int x = 0; x < 256; ++x) {
      const float v = (static_cast<float>(x) / opt.divisor - opt.mean[c]) / opt.stddev[c];
      t.f32[c][x] = v;
      t.f16[c][x] = float_to_half(v);
      if (opt.dtype == DType::kInt8) t.i8[c][x] = quantize_int8(v, opt.int8_scale);
    }
  }
  return t;
}

Expected<Tensor> images_to_tensor(const std::vector<const Image*>& batch, const TensorOptions& opt) {
  if (batch.empty()) return invalid("images_to_tensor: empty batch");
  // The table is ~5 KiB; built per call, it costs less than one 640x640 image's packing.
  const TensorValueTable table = QD_TRY(make_tensor_value_table(opt));
  const int w = batch[0]->width, h = batch[0]->height;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Image& im = *batch[i];
    if (im.empty() || im.data.size() != im.row_bytes() * static_cast<size_t>(im.height)) {
      return invalid("images_to_tensor: image " + std::to_string(i) + " is empty or malformed");
    }
    if (im.width != w || im.height != h) {
      return invalid("images_to_tensor: image " + std::to_string(i) + " is " + std::to_string(im.width) + "x" +
                     std::to_string(im.height) + " but image 0 is " + std::to_string(w) + "x" + std::to_string(h) +
                     "; letterbox or resize them to one size first");
    }
  }
  const int64_t n = static_cast<int64_t>(batch.size());
  const Shape shape = opt.layout == TensorLayout::kNCHW ? Shape{n, 3, h, w} : Shape{n, h, w, 3};
  Tensor t = QD_TRY(Tensor::make(opt.dtype, shape));
  const size_t plane = static_cast<size_t>(w) * h;
  for (int64_t b = 0; b < n; ++b) {
    const uint8_t* px = batch[b]->data.data();
    for (int c = 0; c < 3; ++c) {
      const int sc = table.src_channel[c];
      for (size_t i = 0; i < plane; ++i) {
        const size_t o = opt.layout == TensorLayout::kNCHW ? (static_cast<size_t>(b) * 3 + c) * plane + i
                                                           : (static_cast<size_t>(b) * plane + i) * 3 + c;
        const uint8_t x = px[i * 3 + sc];
        switch (opt.dtype) {
          case DType::kInt8: t.data<int8_t>()[o] = table.i8[c][x]; break;
          case DType::kFloat16: t.data<uint16_t>()[o] = table.f16[c][x]; break;
          default: t.data<float>()[o] = table.f32[c][x]; break;
        }
      }
    }
  }
  return t;
}

Expected<Tensor> image_to_tensor(const Image& img, const TensorOptions& opt) {
  return images_to_tensor({&img}, opt);
}

}  // namespace qd
