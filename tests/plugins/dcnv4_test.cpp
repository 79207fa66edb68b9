// DCNv4's reference against hand-computed values: the point order (kernel-x outer), the sampling formula, bilinear
// weights with zero padding, raw masks, offset_scale, remove_center, and its shape errors.
#include <gtest/gtest.h>

#include "ops/plugin_registry.h"
#include "plugin_cases.h"
#include "qdeploy/plugin.h"

namespace qd {
namespace {

struct Dcn {
  int64_t n = 1, h = 4, w = 5, g = 1, d = 2;
  std::vector<std::pair<std::string, AttrValue>> attrs;
  int64_t k() const {
    int64_t kh = 3, kw = 3, rc = 0;
    for (const auto& [name, v] : attrs) {
      if (name == "kernel_h") kh = std::get<int64_t>(v);
      if (name == "kernel_w") kw = std::get<int64_t>(v);
      if (name == "remove_center") rc = std::get<int64_t>(v);
    }
    return kh * kw - rc;
  }
};

// value[y][x][c] = 100*y + 10*x + c (one group of two channels unless the test says otherwise).
Tensor ramp_value(const Dcn& q) {
  Tensor t = *Tensor::make(DType::kFloat32, {q.n, q.h, q.w, q.g * q.d});
  float* p = static_cast<float*>(t.raw());
  for (int64_t y = 0; y < q.h; ++y) {
    for (int64_t x = 0; x < q.w; ++x) {
      for (int64_t c = 0; c < q.g * q.d; ++c) *p++ = static_cast<float>(100 * y + 10 * x + c);
    }
  }
  return t;
}

Expected<Tensor> run(const Dcn& q, const Tensor& value, const Tensor& om) {
  qdeploy::register_builtin_plugins();
  const PluginOp* p = find_plugin_op("ai.qdeploy::DCNv4@1");
  if (!p) return internal("DCNv4 is not registered");
  Node n;
  n.name = "dcn";
  n.op = p->id;
  n.attrs.set("group", q.g);
  n.attrs.set("group_channels", q.d);
  for (const auto& [name, v] : q.attrs) n.attrs.set(name, v);
  n.inputs = {0, 1};
  n.outputs = {2};
  InferCtx ctx(n, {DType::kFloat32, DType::kFloat32}, {value.shape(), om.shape()}, {&value, &om});
  QD_RETURN_IF_ERROR(infer_node(ctx));
  auto out = run_node(ctx, {&value, &om});
  if (!out) return out.status();
  return std::move((*out)[0]);
}

// offset_mask for output size ho x wo where every pixel's group 0 has offsets (dx, dy) at point `pt` and mask `m`
// there (other points: zero offsets, zero mask).
Tensor one_point(const Dcn& q, int64_t ho, int64_t wo, int64_t pt, float dx, float dy, float m) {
  const int64_t k = q.k(), p = (3 * q.g * k + 7) / 8 * 8;
  Tensor t = *Tensor::make(DType::kFloat32, {q.n, ho, wo, p});
  float* o = static_cast<float*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) o[i] = 0.f;
  for (int64_t pix = 0; pix < q.n * ho * wo; ++pix) {
    o[pix * p + 2 * pt] = dx;
    o[pix * p + 2 * pt + 1] = dy;
    o[pix * p + 2 * k + pt] = m;
  }
  return t;
}

float at(const Tensor& t, int64_t y, int64_t x, int64_t c) {
  const Shape& s = t.shape();
  return static_cast<const float*>(t.raw())[(y * s[2] + x) * s[3] + c];
}

TEST(Dcnv4, PointsRunKernelXOuterKernelYInner) {
  Dcn q;
  const Tensor v = ramp_value(q);
  // Point 1 is (i=0, j=1): x offset -1, y offset 0 from the centre; point 3 is (i=1, j=0): x 0, y -1.
  for (auto [pt, ddx, ddy] : {std::tuple{1, -1, 0}, std::tuple{3, 0, -1}, std::tuple{8, 1, 1}, std::tuple{0, -1, -1}}) {
    auto y = run(q, v, one_point(q, 4, 5, pt, 0.f, 0.f, 1.f));
    ASSERT_TRUE(y) << y.status().to_string();
    for (int64_t oy = 0; oy < 4; ++oy) {
      for (int64_t ox = 0; ox < 5; ++ox) {
        const int64_t sy = oy + ddy, sx = ox + ddx;
        const bool in = sy >= 0 && sy < 4 && sx >= 0 && sx < 5;
        EXPECT_EQ(at(*y, oy, ox, 1), in ? 100.f * sy + 10.f * sx + 1.f : 0.f) << pt << " " << oy << "," << ox;
      }
    }
  }
}

TEST(Dcnv4, BilinearWeightsZeroPaddingAndRawMasks) {
  Dcn q;
  const Tensor v = ramp_value(q);
  // The centre point (4) moved by (0.25, 0.5) with mask 2: 2 * (value at (y+0.5, x+0.25)), linear inside.
  auto y = run(q, v, one_point(q, 4, 5, 4, 0.25f, 0.5f, 2.f));
  ASSERT_TRUE(y);
  EXPECT_FLOAT_EQ(at(*y, 1, 1, 0), 2.f * (100.f * 1.5f + 10.f * 1.25f));
  // At the last row the lower corners are outside: they read 0 (weight 0.5 of row 3 only).
  EXPECT_FLOAT_EQ(at(*y, 3, 0, 0), 2.f * (0.75f * 0.5f * 300.f + 0.25f * 0.5f * 310.f));
  // x = -1 exactly adds nothing; x = -0.5 takes half of column 0.
  auto edge = run(q, v, one_point(q, 4, 5, 4, -1.f, 0.f, 1.f));
  ASSERT_TRUE(edge);
  EXPECT_EQ(at(*edge, 2, 0, 0), 0.f);
  EXPECT_FLOAT_EQ(at(*edge, 2, 1, 0), 200.f);
  auto half = run(q, v, one_point(q, 4, 5, 4, -0.5f, 0.f, 1.f));
  ASSERT_TRUE(half);
  EXPECT_FLOAT_EQ(at(*half, 2, 0, 0), 0.5f * 200.f);
  // Far outside: nothing.
  auto far = run(q, v, one_point(q, 4, 5, 4, 40.f, -9.f, 1.f));
  ASSERT_TRUE(far);
  EXPECT_EQ(at(*far, 1, 1, 0), 0.f);
}

TEST(Dcnv4, OffsetScaleStrideDilationAndGroups) {
  Dcn q;
  q.h = 6;
  q.w = 7;
  q.g = 2;
  q.d = 1;
  q.attrs = {{"offset_scale", 0.5f}, {"stride_h", int64_t{2}}, {"stride_w", int64_t{2}},
             {"dilation_h", int64_t{2}}, {"dilation_w", int64_t{2}}, {"pad_h", int64_t{2}}, {"pad_w", int64_t{2}}};
  const Tensor v = ramp_value(q);
  // Ho = (6 + 4 - 5) / 2 + 1 = 3, Wo = (7 + 4 - 5) / 2 + 1 = 4. Point 6 is (i=2, j=0); c = 2.
  // x = ox*2 - 2 + 2 + 0.5*(2*2 + dx - 2) = 2*ox + 1 + 0.5*dx;  y = 2*oy + 0.5*(0 + dy - 2) = 2*oy - 1 + 0.5*dy.
  Tensor om = one_point(q, 3, 4, 6, 1.f, 4.f, 1.f);  // group 0 only: x = 2*ox + 1.5, y = 2*oy + 1
  auto y = run(q, v, om);
  ASSERT_TRUE(y) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, 3, 4, 2}));
  EXPECT_FLOAT_EQ(at(*y, 1, 1, 0), 100.f * 3 + 10.f * 3.5f);
  EXPECT_EQ(at(*y, 1, 1, 1), 0.f);  // group 1 has zero masks
  EXPECT_FLOAT_EQ(at(*y, 0, 2, 0), 100.f * 1 + 10.f * 5.5f);
  EXPECT_EQ(at(*y, 0, 3, 0), 0.f);  // x = 7.5 >= W: the point adds nothing
}

TEST(Dcnv4, RemoveCenterSkipsTheCentrePoint) {
  Dcn q;
  q.attrs = {{"remove_center", int64_t{1}}};
  const Tensor v = ramp_value(q);
  // K = 8: point 4 is now (i=1, j=2), the point below the centre.
  auto y = run(q, v, one_point(q, 4, 5, 4, 0.f, 0.f, 1.f));
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(at(*y, 1, 2, 0), 100.f * 2 + 10.f * 2);
}

TEST(Dcnv4, ShapeErrorsSayWhatToFix) {
  Dcn q;
  const Tensor v = ramp_value(q);
  auto wrong_c = run(Dcn{1, 4, 5, 2, 2, {}}, v, one_point(q, 4, 5, 0, 0, 0, 0));
  ASSERT_FALSE(wrong_c);
  EXPECT_NE(wrong_c.status().message().find("value has 2 channels; group 2 x group_channels 2 = 4"), std::string::npos);
  auto wrong_hw = run(q, v, one_point(q, 3, 5, 0, 0, 0, 0));
  ASSERT_FALSE(wrong_hw);
  EXPECT_NE(wrong_hw.status().message().find("it must be [1, 4, 5, P]"), std::string::npos);
  Dcn big = q;
  big.attrs = {{"kernel_h", int64_t{9}}, {"pad_h", int64_t{0}}};
  auto too_big = run(big, v, one_point(q, 4, 5, 0, 0, 0, 0));
  ASSERT_FALSE(too_big);
  EXPECT_NE(too_big.status().message().find("larger than the padded input"), std::string::npos);
}

TEST(Dcnv4, MacsCountFourCornersPerPointAndChannel) {
  qdeploy::register_builtin_plugins();
  const PluginOp* p = find_plugin_op("ai.qdeploy::DCNv4@1");
  ASSERT_NE(p, nullptr);
  const qdeploy::Attrs a = *resolve_plugin_attrs(p->def, AttrMap());
  EXPECT_EQ(p->def.macs(a, {{2, 8, 8, 64}, {2, 8, 8, 112}}), 2 * 8 * 8 * 64 * 9 * 4);
}

}  // namespace
}  // namespace qd
