// DCNv4's declaration: attribute schema, shape inference, the CPU reference and the harness's test cases. Calls
// nothing in qdeploy (only the header-only types of qdeploy/plugin.h), so it builds into qdeploy or into a plugin
// library alike.
#include "dcnv4.h"

#include <cmath>
#include <string>

namespace qd_dcnv4 {

using qdeploy::Attrs;
using qdeploy::AttrSpec;
using qdeploy::DataType;
using qdeploy::Dims;
using qdeploy::Status;
using qdeploy::StatusCode;
using qdeploy::TensorView;

namespace {

Status bad(const std::string& m) { return Status(StatusCode::kInvalidArgument, m); }

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

Status infer(const Attrs& attrs, const std::vector<Dims>& in, std::vector<Dims>* out) {
  Geometry geo;
  Status st = resolve_geometry(attrs, in[0], in[1], &geo);
  if (!st.is_ok()) return st;
  *out = {{geo.n, geo.ho, geo.wo, geo.channels()}};
  return Status::ok();
}

// One output pixel of one group: out[0..D) = sum over the K points of mask * bilinear(value).
void pixel_group(const Geometry& q, const float* value, const float* om, int64_t ox, int64_t oy, int grp, float* out) {
  const int cw = (q.dw * (q.kw - 1)) >> 1, ch = (q.dh * (q.kh - 1)) >> 1;
  // The official kernel's operation order (base minus centre times scale, then plus the scaled term), so that fp32
  // results agree to rounding.
  const float x0 = static_cast<float>(ox * q.sw - q.pw + cw) - static_cast<float>(cw) * q.offset_scale;
  const float y0 = static_cast<float>(oy * q.sh - q.ph + ch) - static_cast<float>(ch) * q.offset_scale;
  const int64_t c = q.channels();
  const float* offsets = om + int64_t{grp} * 3 * q.k;
  const float* masks = offsets + 2 * q.k;
  for (int e = 0; e < q.d; ++e) out[e] = 0.f;
  int point = 0;
  for (int i = 0; i < q.kw; ++i) {
    for (int j = 0; j < q.kh; ++j) {
      if (q.remove_center && i == q.kw / 2 && j == q.kh / 2) continue;
      const float x = x0 + (static_cast<float>(i * q.dw) + offsets[2 * point]) * q.offset_scale;
      const float y = y0 + (static_cast<float>(j * q.dh) + offsets[2 * point + 1]) * q.offset_scale;
      const float m = masks[point];
      ++point;
      if (!(x > -1.f && y > -1.f && x < static_cast<float>(q.w) && y < static_cast<float>(q.h))) continue;
      const int64_t xl = static_cast<int64_t>(std::floor(x)), yl = static_cast<int64_t>(std::floor(y));
      const float lx = x - static_cast<float>(xl), ly = y - static_cast<float>(yl);
      const float hx = 1.f - lx, hy = 1.f - ly;
      const float wts[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
      const int64_t ys[4] = {yl, yl, yl + 1, yl + 1}, xs[4] = {xl, xl + 1, xl, xl + 1};
      const float* corner[4];
      for (int t = 0; t < 4; ++t) {
        const bool in = ys[t] >= 0 && ys[t] < q.h && xs[t] >= 0 && xs[t] < q.w;
        corner[t] = in ? value + (ys[t] * q.w + xs[t]) * c + int64_t{grp} * q.d : nullptr;
      }
      for (int e = 0; e < q.d; ++e) {
        float s = 0.f;
        for (int t = 0; t < 4; ++t) s += wts[t] * (corner[t] ? corner[t][e] : 0.f);
        out[e] += m * s;
      }
    }
  }
}

Status reference(const Attrs& attrs, const std::vector<TensorView>& in, const std::vector<TensorView>& out) {
  Geometry q;
  Status st = resolve_geometry(attrs, in[0].shape, in[1].shape, &q);
  if (!st.is_ok()) return st;
  const float* value = in[0].as<const float>();
  const float* om = in[1].as<const float>();
  float* y = out[0].as<float>();
  const int64_t c = q.channels();
  for (int64_t b = 0; b < q.n; ++b) {
    const float* vb = value + b * q.h * q.w * c;
    for (int64_t oy = 0; oy < q.ho; ++oy) {
      for (int64_t ox = 0; ox < q.wo; ++ox) {
        const int64_t pix = (b * q.ho + oy) * q.wo + ox;
        for (int grp = 0; grp < q.g; ++grp) pixel_group(q, vb, om + pix * q.p, ox, oy, grp, y + pix * c + grp * q.d);
      }
    }
  }
  return Status::ok();
}

int64_t macs(const Attrs& attrs, const std::vector<Dims>& in) {
  Geometry q;
  if (in.size() < 2 || !resolve_geometry(attrs, in[0], in[1], &q).is_ok()) return 0;
  return q.n * q.ho * q.wo * q.channels() * q.k * 4;  // four bilinear corners per point and channel
}

int64_t padded(int64_t v) { return (v + 7) / 8 * 8; }

qdeploy::TestCase test(std::string name, std::vector<std::pair<std::string, qdeploy::AttrVal>> attrs, Dims value,
                       Dims offset_mask, float offset_range) {
  qdeploy::TestCase t;
  t.name = std::move(name);
  t.attrs = std::move(attrs);
  t.inputs = {std::move(value), std::move(offset_mask)};
  t.ranges = {{-1.f, 1.f}, {-offset_range, offset_range}};
  return t;
}

}  // namespace

Status resolve_geometry(const Attrs& a, const Dims& value, const Dims& offset_mask, Geometry* q) {
  q->kh = static_cast<int>(a.get_int("kernel_h"));
  q->kw = static_cast<int>(a.get_int("kernel_w"));
  q->sh = static_cast<int>(a.get_int("stride_h"));
  q->sw = static_cast<int>(a.get_int("stride_w"));
  q->ph = static_cast<int>(a.get_int("pad_h"));
  q->pw = static_cast<int>(a.get_int("pad_w"));
  q->dh = static_cast<int>(a.get_int("dilation_h"));
  q->dw = static_cast<int>(a.get_int("dilation_w"));
  q->g = static_cast<int>(a.get_int("group"));
  q->d = static_cast<int>(a.get_int("group_channels"));
  q->offset_scale = a.get_float("offset_scale");
  q->remove_center = a.get_int("remove_center") != 0;
  q->k = q->kh * q->kw - (q->remove_center ? 1 : 0);
  if (q->k < 1) return bad("remove_center with a 1x1 kernel leaves no sampling point");
  if (value.size() != 4) return bad("value must be [N, H, W, group*group_channels] (channels last), got " + dims_str(value));
  if (offset_mask.size() != 4) return bad("offset_mask must be [N, Ho, Wo, P], got " + dims_str(offset_mask));
  q->n = value[0];
  q->h = value[1];
  q->w = value[2];
  if (value[3] != q->channels()) {
    return bad("value has " + std::to_string(value[3]) + " channels; group " + std::to_string(q->g) +
               " x group_channels " + std::to_string(q->d) + " = " + std::to_string(q->channels()));
  }
  q->ho = (q->h + 2 * q->ph - (q->dh * (q->kh - 1) + 1)) / q->sh + 1;
  q->wo = (q->w + 2 * q->pw - (q->dw * (q->kw - 1) + 1)) / q->sw + 1;
  if (q->h + 2 * q->ph < q->dh * (q->kh - 1) + 1 || q->w + 2 * q->pw < q->dw * (q->kw - 1) + 1) {
    return bad("the dilated kernel is larger than the padded input " + dims_str(value));
  }
  if (offset_mask[0] != q->n || offset_mask[1] != q->ho || offset_mask[2] != q->wo) {
    return bad("offset_mask is " + dims_str(offset_mask) + "; with value " + dims_str(value) + " it must be [" +
               std::to_string(q->n) + ", " + std::to_string(q->ho) + ", " + std::to_string(q->wo) + ", P]");
  }
  const int64_t need = int64_t{3} * q->g * q->k;
  if (offset_mask[3] < need || offset_mask[3] > (int64_t{1} << 30)) {
    return bad("offset_mask has " + std::to_string(offset_mask[3]) + " channels; group " + std::to_string(q->g) +
               " with " + std::to_string(q->k) + " sampling points needs " + std::to_string(need) +
               " (the official op pads it to " + std::to_string(padded(need)) + ")");
  }
  q->p = static_cast<int>(offset_mask[3]);
  return Status::ok();
}

qdeploy::OpDef op_def() {
  qdeploy::OpDef d;
  d.domain = kDomain;
  d.name = kName;
  d.version = kVersion;
  d.doc = "Deformable convolution v4 (OpenGVLab/DCNv4's forward op): per group, K points sampled bilinearly at "
          "learned offsets and summed with unnormalized masks. Channels last.";
  const std::vector<DataType> floats = {DataType::kFloat32, DataType::kFloat16};
  d.inputs = {{"value", floats, false, "[N, H, W, group*group_channels]"},
              {"offset_mask", floats, false, "[N, Ho, Wo, P]: per group 2K offsets (dx, dy) then K masks"}};
  d.outputs = {{"output", floats, false, "[N, Ho, Wo, group*group_channels]"}};
  d.output_dtype_from = {0};
  d.attrs = {
      AttrSpec::integer("kernel_h", 3, 1, 15, "kernel height"),
      AttrSpec::integer("kernel_w", 3, 1, 15, "kernel width"),
      AttrSpec::integer("stride_h", 1, 1, 16, "vertical stride"),
      AttrSpec::integer("stride_w", 1, 1, 16, "horizontal stride"),
      AttrSpec::integer("pad_h", 1, 0, 64, "rows of zero padding above and below"),
      AttrSpec::integer("pad_w", 1, 0, 64, "columns of zero padding left and right"),
      AttrSpec::integer("dilation_h", 1, 1, 16, "vertical dilation"),
      AttrSpec::integer("dilation_w", 1, 1, 16, "horizontal dilation"),
      AttrSpec::integer("group", 4, 1, 1024, "groups G"),
      AttrSpec::integer("group_channels", 16, 1, 4096, "channels per group D"),
      AttrSpec::real("offset_scale", 1.f, -1e6, 1e6, "scale of the learned offsets"),
      AttrSpec::integer("im2col_step", 256, 1, 1 << 30, "the official op's batch chunk (no effect on the result)"),
      AttrSpec::integer("remove_center", 0, 0, 1, "1: skip the kernel's centre point (K = kh*kw - 1)"),
  };
  d.infer_shapes = &infer;
  d.reference = &reference;
  d.macs = &macs;
  using V = qdeploy::AttrVal;
  d.tests = {
      test("3x3_g4x16", {}, {2, 7, 9, 64}, {2, 7, 9, padded(4 * 27)}, 2.f),
      test("3x3_g2x32_far_offsets", {{"group", V(int64_t{2})}, {"group_channels", V(int64_t{32})}}, {1, 6, 5, 64},
           {1, 6, 5, padded(2 * 27)}, 8.f),
      test("stride2_pad0_dilation2_scale0.5",
           {{"stride_h", V(int64_t{2})}, {"stride_w", V(int64_t{2})}, {"pad_h", V(int64_t{0})}, {"pad_w", V(int64_t{0})},
            {"dilation_h", V(int64_t{2})}, {"dilation_w", V(int64_t{2})}, {"offset_scale", V(0.5f)},
            {"group", V(int64_t{2})}, {"group_channels", V(int64_t{8})}},
           {2, 21, 19, 16}, {2, 9, 8, padded(2 * 27)}, 3.f),
      test("5x3_remove_center",
           {{"kernel_h", V(int64_t{5})}, {"pad_h", V(int64_t{2})}, {"remove_center", V(int64_t{1})},
            {"group", V(int64_t{1})}, {"group_channels", V(int64_t{16})}},
           {1, 5, 6, 16}, {1, 5, 6, padded(3 * 14)}, 2.f),
      test("3x3_remove_center_g8x8", {{"remove_center", V(int64_t{1})}, {"group", V(int64_t{8})},
                                       {"group_channels", V(int64_t{8})}},
           {1, 4, 4, 64}, {1, 4, 4, padded(8 * 24)}, 2.f),
  };
  d.cuda_kernels = cuda_kernels();
  return d;
}

}  // namespace qd_dcnv4
