// tasks/model_input.h: the one path from an image to a model's input that calibration, sensitivity analysis and
// evaluation share. The expected images are built here from the documented steps (val.py's two resizes, the
// classifier's inner 7/8 box), not from the functions under test.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/engine.h"
#include "tasks/detector.h"
#include "tasks/fmnist.h"
#include "tasks/model_input.h"
#include "tasks/preprocess.h"
#include "test_util.h"

namespace qd {
namespace {

// `src` pasted onto a w x h canvas of `fill` at (ox, oy).
Image paste(const Image& src, int w, int h, int ox, int oy, uint8_t fill) {
  Image out(w, h, fill);
  for (int y = 0; y < src.height; ++y) {
    std::memcpy(out.pixel(ox, oy + y), src.pixel(0, y), src.row_bytes());
  }
  return out;
}

bool same_pixels(const Image& a, const Image& b) {
  return a.width == b.width && a.height == b.height && a.data == b.data;
}

TEST(ModelInput, LetterboxStyleNames) {
  auto v = letterbox_options("val", 672);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(v->style, LetterboxStyle::kYoloV5Val);
  EXPECT_EQ(v->width, 672);
  EXPECT_EQ(v->height, 672);
  auto u = letterbox_options("ultralytics");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->style, LetterboxStyle::kUltralytics);
  EXPECT_TRUE(u->scaleup);
  EXPECT_EQ(u->width, 640);
  auto c = letterbox_options("cudla", 320);  // cuDLA's geometry is fixed: 640 in 672
  ASSERT_TRUE(c);
  EXPECT_EQ(c->style, LetterboxStyle::kCuDLA);
  EXPECT_EQ(c->width, 672);
  EXPECT_EQ(c->fit_width, 640);
  auto bad = letterbox_options("yolo");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("val, ultralytics or cudla"), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("'yolo'"), std::string::npos);
  EXPECT_FALSE(letterbox_options("val", 0));
}

// The default every command uses (eval's --letterbox, calibrate's, sensitivity's, a build's --calib) is val.py's, and
// on a non-square image that shrinks it is not the same tensor as the ultralytics letterbox (calibrate's old one).
TEST(ModelInput, DefaultLetterboxIsValPyOnNonSquareImages) {
  auto engine = build_engine(test::source_dir() + "/models/yolov5n_fmnist_det.onnx", BuildOptions{});
  ASSERT_TRUE(engine) << engine.status().to_string();
  DetectorOptions opt;
  auto lb = letterbox_options(kDefaultLetterbox);
  ASSERT_TRUE(lb) << lb.status().to_string();
  opt.letterbox = *lb;
  auto det = Detector::create(engine->get(), opt);
  ASSERT_TRUE(det) << det.status().to_string();

  const Image img = test::pattern_image(1000, 600, 12345);
  std::vector<LetterboxInfo> infos;
  auto x = det->preprocess({&img}, &infos);
  ASSERT_TRUE(x) << x.status().to_string();

  // val.py by hand: load_image resizes the long side to 640 (r = 0.64, ceil(1000 r) x ceil(600 r) = 640 x 384, with
  // INTER_AREA since it shrinks); letterbox(scaleup=False) then only pads: dh = (640 - 384) / 2 = 128 rows of 114
  // above and below.
  auto area = resize_area(img, 640, 384);
  ASSERT_TRUE(area);
  const Image val = paste(*area, 640, 640, 0, 128, 114);
  auto want = image_to_tensor(val, TensorOptions{});
  ASSERT_TRUE(want);
  ASSERT_EQ(x->shape(), want->shape());
  EXPECT_EQ(test::max_abs_diff(*x, *want), 0.0);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_FLOAT_EQ(infos[0].scale, 0.64f);
  EXPECT_FLOAT_EQ(infos[0].pad_x, 0.f);
  EXPECT_FLOAT_EQ(infos[0].pad_y, 128.f);

  // The ultralytics letterbox resizes with INTER_LINEAR instead: the same geometry, other pixels. So this image tells
  // the two defaults apart (on 640x640 scenes both are the identity).
  auto lin = resize_linear(img, 640, 384);
  ASSERT_TRUE(lin);
  auto ultra = image_to_tensor(paste(*lin, 640, 640, 0, 128, 114), TensorOptions{});
  ASSERT_TRUE(ultra);
  EXPECT_GT(test::max_abs_diff(*x, *ultra), 0.1);
  auto ul = letterbox(img, *letterbox_options("ultralytics"));
  ASSERT_TRUE(ul);
  EXPECT_TRUE(same_pixels(*ul, paste(*lin, 640, 640, 0, 128, 114)));
}

TEST(ModelInput, ClassifierInputFashionMnistGlyph) {
  // A 28x28 glyph gives fmnist_image_32's image: the glyph at (2, 2) on black.
  FmnistSplit ds;
  ds.count = 1;
  ds.images.resize(28 * 28);
  for (int i = 0; i < 28 * 28; ++i) ds.images[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 37) & 255);
  ds.labels = {3};
  Image glyph(28, 28);
  for (int i = 0; i < 28 * 28; ++i) glyph.data[i * 3] = glyph.data[i * 3 + 1] = glyph.data[i * 3 + 2] = ds.images[i];
  auto x = classifier_input(glyph, 32, 32);
  ASSERT_TRUE(x) << x.status().to_string();
  EXPECT_TRUE(same_pixels(*x, fmnist_image_32(ds, 0)));
  // An image of the network's size is used as is.
  const Image same = test::pattern_image(32, 32, 12345);
  EXPECT_TRUE(same_pixels(*classifier_input(same, 32, 32), same));
}

TEST(ModelInput, ClassifierInputKeepsAspectAndCentres) {
  // Shrinking 56x28 into the 28x28 box: r = 0.5, 28x14 by INTER_AREA (an exact 2x box average), centred at
  // ((32 - 28) / 2, (32 - 14) / 2) = (2, 9). With constant 2x2 blocks the average is the block's value.
  Image wide(56, 28);
  for (int y = 0; y < 28; ++y) {
    for (int x = 0; x < 56; ++x) {
      uint8_t* p = wide.pixel(x, y);
      p[0] = static_cast<uint8_t>(x / 2 * 9);
      p[1] = static_cast<uint8_t>(y / 2 * 17);
      p[2] = 77;
    }
  }
  auto x = classifier_input(wide, 32, 32);
  ASSERT_TRUE(x) << x.status().to_string();
  Image want(32, 32, 0);
  for (int y = 0; y < 14; ++y) {
    for (int xx = 0; xx < 28; ++xx) {
      uint8_t* p = want.pixel(2 + xx, 9 + y);
      p[0] = static_cast<uint8_t>(xx * 9);
      p[1] = static_cast<uint8_t>(y * 17);
      p[2] = 77;
    }
  }
  EXPECT_TRUE(same_pixels(*x, want));
  // A plain resize to 32x32 (what calibration used to do) is another image.
  EXPECT_FALSE(same_pixels(*x, *resize_linear(wide, 32, 32)));

  // Enlarging 7x14 into the box: r = 2, 14x28 by INTER_LINEAR, at ((32 - 14) / 2, 2) = (9, 2).
  const Image tall = test::pattern_image(7, 14, 12345);
  auto t = classifier_input(tall, 32, 32);
  ASSERT_TRUE(t);
  EXPECT_TRUE(same_pixels(*t, paste(*resize_linear(tall, 14, 28), 32, 32, 9, 2, 0)));

  // A non-square network (64x32): the inner box is 56x28; a 100x100 image becomes 28x28 at ((64 - 28) / 2, 2).
  const Image sq = test::pattern_image(100, 100, 12345);
  auto n = classifier_input(sq, 64, 32);
  ASSERT_TRUE(n);
  EXPECT_TRUE(same_pixels(*n, paste(*resize_area(sq, 28, 28), 64, 32, 18, 2, 0)));

  EXPECT_FALSE(classifier_input(Image(), 32, 32));
  EXPECT_FALSE(classifier_input(sq, 0, 32));
}

}  // namespace
}  // namespace qd
