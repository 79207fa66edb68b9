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


TEST(PreprocessSpec, Parse) {
  auto s = parse_preprocess_spec("size=224,resize=center-crop,mean=0.485,0.456,0.406,std=0.229,0.224,0.225,order=bgr,"
                                 "layout=nhwc,pad=0");
  ASSERT_TRUE(s) << s.status().to_string();
  EXPECT_TRUE(s->given);
  EXPECT_EQ(s->width, 224);
  EXPECT_EQ(s->height, 224);
  EXPECT_EQ(s->resize, ResizeMode::kCenterCrop);
  EXPECT_FLOAT_EQ(s->tensor.mean[1], 0.456f);
  EXPECT_FLOAT_EQ(s->tensor.stddev[2], 0.225f);
  EXPECT_EQ(s->tensor.order, ChannelOrder::kBGR);
  EXPECT_EQ(s->tensor.layout, TensorLayout::kNHWC);
  EXPECT_EQ(s->pad, 0);
  EXPECT_EQ(preprocess_spec_str(*s),
            "size=224x224,resize=center-crop,mean=0.485,0.456,0.406,std=0.229,0.224,0.225,order=bgr,layout=nhwc,pad=0");
  auto t = parse_preprocess_spec("size=480x800, mean=0.5, std=0.5");
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_EQ(t->height, 480);
  EXPECT_EQ(t->width, 800);
  EXPECT_EQ(t->resize, ResizeMode::kDefault);
  EXPECT_FLOAT_EQ(t->tensor.mean[2], 0.5f);
  EXPECT_EQ(preprocess_spec_str(*t), "size=480x800,mean=0.5,0.5,0.5,std=0.5,0.5,0.5");
  // The imagenet preset, and keys after it overriding it.
  auto in = parse_preprocess_spec("imagenet");
  ASSERT_TRUE(in) << in.status().to_string();
  EXPECT_EQ(in->resize, ResizeMode::kCenterCrop);
  EXPECT_FLOAT_EQ(in->crop, 0.875f);
  EXPECT_EQ(preprocess_spec_str(*in), "resize=center-crop,crop=0.875,mean=0.485,0.456,0.406,std=0.229,0.224,0.225");
  auto in384 = parse_preprocess_spec("imagenet,size=384,crop=1,order=bgr");
  ASSERT_TRUE(in384) << in384.status().to_string();
  EXPECT_EQ(preprocess_spec_str(*in384),
            "size=384x384,resize=center-crop,mean=0.485,0.456,0.406,std=0.229,0.224,0.225,order=bgr");
  for (const auto& [text, phrase] : std::vector<std::pair<std::string, std::string>>{
           {"", "is empty"}, {"0.5", "is not KEY=VALUE"}, {"size=0", "outside 1..16384"}, {"size=a", "whole number"},
           {"size=3x", "whole number"}, {"resize=squash", "resize must be fit"}, {"mean=1,2", "one number or three"},
           {"std=0", "std must be > 0"}, {"mean=x", "'x' is not a number"}, {"order=gbr", "order must be rgb or bgr"},
           {"layout=chw", "layout must be nchw or nhwc"}, {"pad=300", "outside 0..255"}, {"size=1,size=2", "twice"},
           {"scale=0.9", "unknown key 'scale'"}, {"order=rgb,,size=2", "empty item"}, {"size=2,3", "takes one value"},
           {"resize=center-crop,crop=0", "fraction in (0, 1]"}, {"resize=center-crop,crop=1.5", "fraction in (0, 1]"},
           {"crop=0.875", "crop goes with resize=center-crop"}, {"imagenet,resize=fit", "crop goes with"},
           {"size=2,imagenet", "takes one value"}}) {
    auto r = parse_preprocess_spec(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.status().message().find(phrase), std::string::npos) << text << ": " << r.status().message();
  }
}

TEST(PreprocessSpec, InputSize) {
  PreprocessSpec s;
  int w = 0, h = 0;
  ASSERT_TRUE(resolve_input_size(s, {1, 3, 48, 192}, &w, &h).is_ok());
  EXPECT_EQ(w, 192);
  EXPECT_EQ(h, 48);
  EXPECT_FALSE(resolve_input_size(s, {-1, 3, -1, -1}, &w, &h).is_ok());  // dynamic, no size
  s.width = 128;
  s.height = 96;
  ASSERT_TRUE(resolve_input_size(s, {-1, 3, -1, -1}, &w, &h).is_ok());
  EXPECT_EQ(w, 128);
  EXPECT_EQ(h, 96);
  EXPECT_FALSE(resolve_input_size(s, {1, 3, 48, 192}, &w, &h).is_ok());  // disagrees
  Status nhwc = resolve_input_size(PreprocessSpec{}, {1, 32, 32, 3}, &w, &h);
  ASSERT_FALSE(nhwc.is_ok());
  EXPECT_NE(nhwc.message().find("try --preprocess layout=nhwc"), std::string::npos) << nhwc.message();
  s = PreprocessSpec{};
  s.tensor.layout = TensorLayout::kNHWC;
  ASSERT_TRUE(resolve_input_size(s, {1, 32, 24, 3}, &w, &h).is_ok());
  EXPECT_EQ(w, 24);
  EXPECT_EQ(h, 32);
}

// Each resize mode against the steps it documents, built here from the resampling primitives.
TEST(PreprocessSpec, ResizeModes) {
  const Image img = test::pattern_image(60, 40, 777);
  PreprocessSpec s;
  s.resize = ResizeMode::kStretch;
  auto st = resize_for_model(img, s, 30, 30);
  ASSERT_TRUE(st);
  EXPECT_TRUE(same_pixels(*st, *resize_area(img, 30, 30)));  // shrinking both ways: INTER_AREA
  auto up = resize_for_model(img, s, 90, 30);
  ASSERT_TRUE(up);
  EXPECT_TRUE(same_pixels(*up, *resize_linear(img, 90, 30)));
  // center-crop to 20x20: the short side (40) to 20, i.e. 30x20, then the centre 20 columns from x = 5.
  s.resize = ResizeMode::kCenterCrop;
  auto cc = resize_for_model(img, s, 20, 20);
  ASSERT_TRUE(cc);
  const Image scaled = *resize_area(img, 30, 20);
  Image want(20, 20);
  for (int y = 0; y < 20; ++y) std::memcpy(want.pixel(0, y), scaled.pixel(5, y), 60);
  EXPECT_TRUE(same_pixels(*cc, want));
  // crop=0.5: the short side to 20 / 0.5 = 40 (60x40, the image itself), then the centre 20x20 from (20, 10).
  s.crop = 0.5f;
  auto half = resize_for_model(img, s, 20, 20);
  ASSERT_TRUE(half);
  for (int y = 0; y < 20; ++y) std::memcpy(want.pixel(0, y), img.pixel(20, 10 + y), 60);
  EXPECT_TRUE(same_pixels(*half, want));
  s.crop = 1.f;
  // letterbox: ultralytics' with the spec's pad.
  s.resize = ResizeMode::kLetterbox;
  s.pad = 7;
  LetterboxInfo info;
  auto lb = resize_for_model(img, s, 32, 32, ResizeMode::kFit, &info);
  ASSERT_TRUE(lb);
  LetterboxOptions o;
  o.width = o.height = 32;
  o.pad_value = 7;
  EXPECT_TRUE(same_pixels(*lb, *letterbox(img, o)));
  EXPECT_EQ(lb->pixel(0, 0)[0], 7);
  // fit (the default here): classifier_input.
  s = PreprocessSpec{};
  auto fit = resize_for_model(img, s, 32, 32);
  ASSERT_TRUE(fit);
  EXPECT_TRUE(same_pixels(*fit, *classifier_input(img, 32, 32)));
  s.resize = ResizeMode::kNone;
  EXPECT_FALSE(resize_for_model(img, s, 32, 32));
  EXPECT_TRUE(resize_for_model(img, s, 60, 40));
}

// Values and layout: (x / 255 - mean) / std per tensor channel after the order.
TEST(PreprocessSpec, TensorValues) {
  Image img(2, 1);
  const uint8_t px[6] = {10, 20, 30, 40, 50, 60};
  std::memcpy(img.data.data(), px, 6);
  auto s = parse_preprocess_spec("resize=none,mean=0.1,0.2,0.3,std=0.5,0.25,0.125,order=bgr,layout=nhwc");
  ASSERT_TRUE(s);
  auto t = images_to_model_input({&img}, *s, 2, 1);
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_EQ(t->shape(), (Shape{1, 1, 2, 3}));
  const float* v = t->data<float>();
  // Pixel 0 in BGR order: 30, 20, 10.
  EXPECT_FLOAT_EQ(v[0], (30.f / 255.f - 0.1f) / 0.5f);
  EXPECT_FLOAT_EQ(v[1], (20.f / 255.f - 0.2f) / 0.25f);
  EXPECT_FLOAT_EQ(v[2], (10.f / 255.f - 0.3f) / 0.125f);
  EXPECT_FLOAT_EQ(v[3], (60.f / 255.f - 0.1f) / 0.5f);
}

}  // namespace
}  // namespace qd
