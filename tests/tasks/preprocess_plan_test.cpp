// The host-side plans that the CPU letterbox and the GPU kernel share, and the value table (fp16 output included).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/half.h"
#include "tasks/preprocess.h"

namespace qd {
namespace {

Image random_image(int w, int h, uint32_t seed) {
  Image img(w, h);
  std::mt19937 rng(seed);
  for (auto& b : img.data) b = static_cast<uint8_t>(rng() & 255);
  return img;
}

TEST(ResamplePlan, PicksOpenCvsKernel) {
  EXPECT_EQ(plan_resize_linear(10, 10, 10, 10).method, ResampleMethod::kCopy);
  EXPECT_EQ(plan_resize_linear(10, 8, 20, 16).method, ResampleMethod::kLinear);
  const ResampleStep half = plan_resize_linear(20, 16, 10, 8);  // an exact 2x shrink is an area average
  EXPECT_EQ(half.method, ResampleMethod::kAreaFast);
  EXPECT_EQ(half.kx, 2);
  EXPECT_EQ(half.ky, 2);
  EXPECT_EQ(plan_resize_linear(30, 30, 10, 10).method, ResampleMethod::kLinear);  // 3x: linear only does 2x
  const ResampleStep third = plan_resize_area(30, 20, 10, 10);
  EXPECT_EQ(third.method, ResampleMethod::kAreaFast);
  EXPECT_EQ(third.kx, 3);
  EXPECT_EQ(third.ky, 2);
  EXPECT_EQ(plan_resize_area(30, 20, 11, 10).method, ResampleMethod::kArea);
  EXPECT_EQ(plan_resize_area(10, 10, 20, 5).method, ResampleMethod::kLinear);  // enlarging falls back
  EXPECT_DOUBLE_EQ(plan_resize_area(30, 20, 11, 10).scale_x, 1. / (11. / 30.));
}

TEST(LetterboxPlan, MatchesTheImage) {
  // 810x1080 into 640: resized to 480x640, 80 columns each side.
  const LetterboxPlan p = *plan_letterbox(810, 1080, LetterboxOptions{});
  EXPECT_EQ(p.steps[0].method, ResampleMethod::kCopy);
  EXPECT_EQ(p.steps[1].dst_w, 480);
  EXPECT_EQ(p.steps[1].dst_h, 640);
  EXPECT_EQ(p.left, 80);
  EXPECT_EQ(p.top, 0);
  EXPECT_FLOAT_EQ(p.info.scale, 640.f / 1080.f);
  EXPECT_FALSE(plan_letterbox(0, 10, LetterboxOptions{}));
  LetterboxOptions bad;
  bad.style = LetterboxStyle::kYoloV5Val;
  bad.height = 320;
  EXPECT_FALSE(plan_letterbox(10, 10, bad));
}

TEST(LetterboxPlan, ValStyleWithTwoResizes) {
  // load_image's ceil can overshoot the target by a pixel (147 * (640 / 147) > 640 in double); the letterbox then
  // shrinks again. Both steps run, and letterbox() is their composition.
  LetterboxOptions opt;
  opt.style = LetterboxStyle::kYoloV5Val;
  int found = 0;
  for (int w : {147, 281, 1050, 1124, 2100, 3000}) {
    const LetterboxPlan p = *plan_letterbox(w, 100, opt);
    if (p.steps[0].method == ResampleMethod::kCopy || p.steps[1].method == ResampleMethod::kCopy) continue;
    ++found;
    EXPECT_EQ(p.steps[0].dst_w, 641) << w;
    const Image img = random_image(w, 100, static_cast<uint32_t>(w));
    LetterboxInfo info;
    const Image out = *letterbox(img, opt, &info);
    const Image loaded = *resize_area(img, p.steps[0].dst_w, p.steps[0].dst_h);
    const Image want_content = w > 640 ? *resize_linear(loaded, p.steps[1].dst_w, p.steps[1].dst_h)
                                       : *resize_linear(*resize_linear(img, p.steps[0].dst_w, p.steps[0].dst_h),
                                                        p.steps[1].dst_w, p.steps[1].dst_h);
    for (int y = 0; y < want_content.height; ++y) {
      ASSERT_EQ(0, std::memcmp(out.pixel(p.left, p.top + y), want_content.pixel(0, y), want_content.row_bytes()))
          << "w " << w << " row " << y;
    }
    EXPECT_EQ(info.orig_w, w);
  }
  EXPECT_GE(found, 2);
}

TEST(TensorTable, ChannelsAndTypes) {
  TensorOptions o;
  o.order = ChannelOrder::kBGR;
  o.mean = {0.485f, 0.456f, 0.406f};
  o.stddev = {0.229f, 0.224f, 0.225f};
  const TensorValueTable t = *make_tensor_value_table(o);
  EXPECT_EQ(t.src_channel[0], 2);
  EXPECT_EQ(t.src_channel[1], 1);
  EXPECT_EQ(t.src_channel[2], 0);
  EXPECT_FLOAT_EQ(t.f32[0][255], (1.f - 0.485f) / 0.229f);
  EXPECT_EQ(t.f16[2][17], float_to_half(t.f32[2][17]));
  o.dtype = DType::kInt32;
  EXPECT_FALSE(make_tensor_value_table(o));
}

TEST(TensorTable, Float16OutputIsTheRoundedFloat32) {
  const Image img = random_image(7, 5, 3);
  TensorOptions o;
  o.mean = {0.5f, 0.25f, 0.f};
  const Tensor f32 = *image_to_tensor(img, o);
  o.dtype = DType::kFloat16;
  o.layout = TensorLayout::kNCHW;
  const Tensor f16 = *image_to_tensor(img, o);
  ASSERT_EQ(f16.dtype(), DType::kFloat16);
  ASSERT_EQ(f16.shape(), f32.shape());
  for (int64_t i = 0; i < f32.numel(); ++i) {
    ASSERT_EQ(f16.data<uint16_t>()[i], float_to_half(f32.data<float>()[i])) << i;
  }
}

}  // namespace
}  // namespace qd
