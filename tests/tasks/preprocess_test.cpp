// Letterbox geometry and pixels (hand-checked), OpenCV-compatible resampling, tensor packing and int8 rounding.
#include <gtest/gtest.h>

#include "tasks/preprocess.h"
#include "tasks/yolo_decode.h"

namespace qd {
namespace {

Image solid(int w, int h, uint8_t v) { return Image(w, h, v); }

uint8_t px(const Image& img, int x, int y, int c = 0) { return img.pixel(x, y)[c]; }

TEST(Letterbox, PortraitTo640) {
  LetterboxInfo info;
  const auto out = letterbox(solid(810, 1080, 50), LetterboxOptions{}, &info);
  ASSERT_TRUE(out) << out.status().to_string();
  EXPECT_EQ(out->width, 640);
  EXPECT_EQ(out->height, 640);
  // r = min(640/1080, 640/810) = 0.5926; unpadded 480x640; dw = 80 each side.
  EXPECT_FLOAT_EQ(info.scale, 640.f / 1080.f);
  EXPECT_FLOAT_EQ(info.pad_x, 80.f);
  EXPECT_FLOAT_EQ(info.pad_y, 0.f);
  EXPECT_EQ(px(*out, 79, 300), 114);
  EXPECT_EQ(px(*out, 80, 300), 50);
  EXPECT_EQ(px(*out, 559, 0), 50);
  EXPECT_EQ(px(*out, 560, 639), 114);
  // Mapping back: the right edge of the content is the right edge of the original.
  EXPECT_NEAR((560.f - info.pad_x) / info.scale, 810.f, 1e-3);
  EXPECT_NEAR((640.f - info.pad_y) / info.scale, 1080.f, 1e-3);
  EXPECT_EQ(info.orig_w, 810);
  EXPECT_EQ(info.orig_h, 1080);
}

TEST(Letterbox, LandscapeAndOddPadding) {
  LetterboxInfo info;
  auto out = letterbox(solid(1080, 810, 50), LetterboxOptions{}, &info);
  ASSERT_TRUE(out);
  EXPECT_FLOAT_EQ(info.pad_x, 0.f);
  EXPECT_FLOAT_EQ(info.pad_y, 80.f);
  // 640x427: no resize, dh = 213 / 2 = 106.5 -> top = round(106.4) = 106, bottom = round(106.6) = 107.
  Image img(640, 427, 0);
  for (int y = 0; y < 427; ++y) img.pixel(0, y)[0] = static_cast<uint8_t>(y % 200);
  out = letterbox(img, LetterboxOptions{}, &info);
  ASSERT_TRUE(out);
  EXPECT_FLOAT_EQ(info.scale, 1.f);
  EXPECT_FLOAT_EQ(info.pad_y, 106.5f);
  EXPECT_EQ(px(*out, 0, 105), 114);
  EXPECT_EQ(px(*out, 0, 106), 0);     // image row 0
  EXPECT_EQ(px(*out, 0, 106 + 5), 5);  // image row 5, copied unchanged
  EXPECT_EQ(px(*out, 0, 532), 426 % 200);
  EXPECT_EQ(px(*out, 0, 533), 114);
}

TEST(Letterbox, ScaleupFalseOnlyPads) {
  LetterboxOptions opt;
  opt.scaleup = false;
  LetterboxInfo info;
  const auto out = letterbox(solid(320, 240, 9), opt, &info);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->width, 640);
  EXPECT_FLOAT_EQ(info.scale, 1.f);
  EXPECT_FLOAT_EQ(info.pad_x, 160.f);
  EXPECT_FLOAT_EQ(info.pad_y, 200.f);
  EXPECT_EQ(px(*out, 160, 200), 9);
  EXPECT_EQ(px(*out, 159, 200), 114);
  // With scaleup (the default) the same image is enlarged 2x.
  ASSERT_TRUE(letterbox(solid(320, 240, 9), LetterboxOptions{}, &info));
  EXPECT_FLOAT_EQ(info.scale, 2.f);
  EXPECT_FLOAT_EQ(info.pad_y, 80.f);
}

TEST(Letterbox, PixelsOfATinyImage) {
  // 2x2 -> 4x4 (r = 2, no padding). INTER_LINEAR by hand: columns sample at -0.25 (clamped), 0.25, 0.75, 1.25
  // (clamped), rows alike; every weight is a multiple of 1/4 so the fixed-point result is exact.
  Image img(2, 2);
  img.pixel(0, 0)[0] = 0, img.pixel(1, 0)[0] = 80, img.pixel(0, 1)[0] = 160, img.pixel(1, 1)[0] = 240;
  LetterboxOptions opt;
  opt.width = opt.height = 4;
  const auto out = letterbox(img, opt);
  ASSERT_TRUE(out);
  const int want[4][4] = {{0, 20, 60, 80}, {40, 60, 100, 120}, {120, 140, 180, 200}, {160, 180, 220, 240}};
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) EXPECT_EQ(px(*out, x, y), want[y][x]) << "at " << x << "," << y;
  }
  // 4x2 into 8x8: resized to 8x4 and padded 2 rows top and bottom.
  Image wide(4, 2);
  const uint8_t row[4] = {0, 40, 80, 120};
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 4; ++x) wide.pixel(x, y)[1] = row[x];
  }
  opt.width = opt.height = 8;
  LetterboxInfo info;
  const auto out2 = letterbox(wide, opt, &info);
  ASSERT_TRUE(out2);
  EXPECT_FLOAT_EQ(info.pad_y, 2.f);
  const int want_row[8] = {0, 10, 30, 50, 70, 90, 110, 120};
  for (int x = 0; x < 8; ++x) {
    EXPECT_EQ(px(*out2, x, 1, 1), 114);
    EXPECT_EQ(px(*out2, x, 2, 1), want_row[x]);
    EXPECT_EQ(px(*out2, x, 5, 1), want_row[x]);
    EXPECT_EQ(px(*out2, x, 6, 1), 114);
  }
}

TEST(Letterbox, CuDla672) {
  LetterboxInfo info;
  const auto out = letterbox(solid(810, 1080, 50), cudla_letterbox_options(), &info);
  ASSERT_TRUE(out) << out.status().to_string();
  EXPECT_EQ(out->width, 672);
  EXPECT_EQ(out->height, 672);
  EXPECT_FLOAT_EQ(info.scale, 640.f / 1080.f);
  // The 480x640 image is centred: x in [96, 576), y in [16, 656).
  EXPECT_NEAR(info.pad_x, 96.f, 1e-3);
  EXPECT_NEAR(info.pad_y, 16.f, 1e-3);
  EXPECT_EQ(px(*out, 0, 0), 114);
  EXPECT_EQ(px(*out, 94, 336), 114);
  EXPECT_EQ(px(*out, 98, 336), 50);
  EXPECT_EQ(px(*out, 336, 18), 50);
  EXPECT_EQ(px(*out, 573, 336), 50);
  EXPECT_EQ(px(*out, 578, 336), 114);
  EXPECT_EQ(px(*out, 336, 14), 114);
  // Edge pixels blend the image with the pad value, as cv::warpAffine does.
  const int edge = px(*out, 96, 336);
  EXPECT_GE(edge, 50);
  EXPECT_LE(edge, 114);
}

TEST(Letterbox, YoloV5ValStyle) {
  LetterboxOptions opt;
  opt.style = LetterboxStyle::kYoloV5Val;
  LetterboxInfo info;
  // 1280x720 -> load_image to 640x360 (an exact 2x INTER_AREA shrink) -> letterbox pads 140 rows each side.
  const auto out = letterbox(solid(1280, 720, 77), opt, &info);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->height, 640);
  EXPECT_FLOAT_EQ(info.scale, 0.5f);
  EXPECT_FLOAT_EQ(info.pad_y, 140.f);
  EXPECT_EQ(px(*out, 10, 139), 114);
  EXPECT_EQ(px(*out, 10, 140), 77);
  opt.height = 320;
  EXPECT_FALSE(letterbox(solid(10, 10, 0), opt));
}

TEST(Letterbox, BoxesMapBackThroughUnletterbox) {
  for (const LetterboxOptions& opt : {LetterboxOptions{}, cudla_letterbox_options()}) {
    LetterboxInfo info;
    ASSERT_TRUE(letterbox(solid(810, 1080, 1), opt, &info));
    // The content's corners in the network input map to the original image's corners.
    Detection d;
    d.x1 = info.pad_x, d.y1 = info.pad_y;
    d.x2 = info.pad_x + 810 * info.scale, d.y2 = info.pad_y + 1080 * info.scale;
    std::vector<Detection> v = {d};
    ASSERT_TRUE(unletterbox_detections(v, info).is_ok());
    EXPECT_NEAR(v[0].x1, 0.f, 1e-3);
    EXPECT_NEAR(v[0].y1, 0.f, 1e-3);
    EXPECT_NEAR(v[0].x2, 810.f, 1e-2);
    EXPECT_NEAR(v[0].y2, 1080.f, 1e-2);
  }
}

TEST(Letterbox, RejectsBadInput) {
  EXPECT_FALSE(letterbox(Image(), LetterboxOptions{}));
  LetterboxOptions opt;
  opt.width = 0;
  EXPECT_FALSE(letterbox(solid(4, 4, 0), opt));
  EXPECT_FALSE(resize_linear(solid(4, 4, 0), 100000, 4));
}

TEST(Resize, ExactHalvingAveragesAndRoundsHalfUp) {
  Image img(2, 2);
  img.pixel(0, 0)[0] = 0, img.pixel(1, 0)[0] = 1, img.pixel(0, 1)[0] = 2, img.pixel(1, 1)[0] = 3;
  // (0 + 1 + 2 + 3 + 2) >> 2 = 2 for both filters (OpenCV turns an exact 2x INTER_LINEAR shrink into INTER_AREA).
  EXPECT_EQ(px(*resize_linear(img, 1, 1), 0, 0), 2);
  EXPECT_EQ(px(*resize_area(img, 1, 1), 0, 0), 2);
  // 3x1 -> 2x1 area: weights 2/3, 1/3 and 1/3, 2/3 of (0, 30, 90): 10 and 70.
  Image row(3, 1);
  row.pixel(0, 0)[0] = 0, row.pixel(1, 0)[0] = 30, row.pixel(2, 0)[0] = 90;
  const auto a = resize_area(row, 2, 1);
  ASSERT_TRUE(a);
  EXPECT_EQ(px(*a, 0, 0), 10);
  EXPECT_EQ(px(*a, 1, 0), 70);
}

TEST(Tensor, LayoutsOrderAndNormalization) {
  Image img(2, 1);
  img.pixel(0, 0)[0] = 10, img.pixel(0, 0)[1] = 20, img.pixel(0, 0)[2] = 30;
  img.pixel(1, 0)[0] = 40, img.pixel(1, 0)[1] = 50, img.pixel(1, 0)[2] = 255;
  auto t = image_to_tensor(img, TensorOptions{});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shape(), (Shape{1, 3, 1, 2}));
  const float* f = t->data<float>();
  EXPECT_FLOAT_EQ(f[0], 10.f / 255.f);  // R plane
  EXPECT_FLOAT_EQ(f[1], 40.f / 255.f);
  EXPECT_FLOAT_EQ(f[5], 1.f);           // B plane, pixel 1
  TensorOptions o;
  o.layout = TensorLayout::kNHWC;
  o.order = ChannelOrder::kBGR;
  o.divisor = 1.f;
  o.mean = {1.f, 2.f, 3.f};
  o.stddev = {2.f, 2.f, 2.f};
  t = image_to_tensor(img, o);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shape(), (Shape{1, 1, 2, 3}));
  f = t->data<float>();
  EXPECT_FLOAT_EQ(f[0], (30.f - 1.f) / 2.f);  // B first, with channel 0's mean
  EXPECT_FLOAT_EQ(f[2], (10.f - 3.f) / 2.f);
  EXPECT_FLOAT_EQ(f[3], (255.f - 1.f) / 2.f);
}

TEST(Tensor, BatchPacking) {
  const Image a = solid(3, 2, 10), b = solid(3, 2, 20);
  auto t = images_to_tensor({&a, &b}, TensorOptions{});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shape(), (Shape{2, 3, 2, 3}));
  EXPECT_FLOAT_EQ(t->data<float>()[17], 10.f / 255.f);
  EXPECT_FLOAT_EQ(t->data<float>()[18], 20.f / 255.f);
  const Image c = solid(2, 3, 0);
  const auto bad = images_to_tensor({&a, &c}, TensorOptions{});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("image 1"), std::string::npos);
  EXPECT_FALSE(images_to_tensor({}, TensorOptions{}));
}

TEST(Tensor, Int8RoundsHalfToEven) {
  EXPECT_EQ(quantize_int8(0.5f, 1.f), 0);
  EXPECT_EQ(quantize_int8(1.5f, 1.f), 2);
  EXPECT_EQ(quantize_int8(2.5f, 1.f), 2);
  EXPECT_EQ(quantize_int8(-0.5f, 1.f), 0);
  EXPECT_EQ(quantize_int8(-1.5f, 1.f), -2);
  EXPECT_EQ(quantize_int8(-2.5f, 1.f), -2);
  EXPECT_EQ(quantize_int8(127.5f, 1.f), 127);
  EXPECT_EQ(quantize_int8(1000.f, 1.f), 127);
  EXPECT_EQ(quantize_int8(-1000.f, 1.f), -128);
  EXPECT_EQ(quantize_int8(0.75f, 0.5f), 2);  // 1.5 -> 2
  // Through the packer: v = x - 128 (divisor 1), q = round_half_even(v / 2).
  Image img(5, 1);
  const uint8_t xs[5] = {127, 125, 131, 0, 255};
  for (int i = 0; i < 5; ++i) img.pixel(i, 0)[0] = xs[i];
  TensorOptions o;
  o.divisor = 1.f;
  o.mean = {128.f, 128.f, 128.f};
  o.dtype = DType::kInt8;
  o.int8_scale = 2.f;
  const auto t = image_to_tensor(img, o);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->dtype(), DType::kInt8);
  const int8_t* q = t->data<int8_t>();
  EXPECT_EQ(q[0], 0);    // -0.5 -> 0
  EXPECT_EQ(q[1], -2);   // -1.5 -> -2
  EXPECT_EQ(q[2], 2);    // 1.5 -> 2
  EXPECT_EQ(q[3], -64);
  EXPECT_EQ(q[4], 64);   // 63.5 -> 64
  o.int8_scale = 0.f;
  EXPECT_FALSE(image_to_tensor(img, o));
}

}  // namespace
}  // namespace qd
