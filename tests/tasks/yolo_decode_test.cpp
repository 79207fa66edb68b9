// YOLOv5 post-processing: candidates (confidence rules), head decoding, the whole postprocess, letterbox mapping.
#include <gtest/gtest.h>

#include "tasks/yolo_decode.h"

namespace qd {
namespace {

// Rows: cx, cy, w, h, obj, cls0, cls1, cls2.
const std::vector<float> kRows = {
    50, 40, 20, 10, 0.9f,  0.1f, 0.8f, 0.5f,  // best class 1 (0.72); multi-label: 1 (0.72) and 2 (0.45)
    10, 10, 4,  4,  0.25f, 1.f,  1.f,  1.f,   // obj == conf_thres: dropped (needs obj > conf)
    80, 80, 8,  6,  0.5f,  0.6f, 0.6f, 0.2f,  // tie: class 0 (first) 0.3; multi-label: 0 and 1
    30, 30, 8,  6,  0.9f,  0.2f, 0.1f, 0.1f,  // obj passes, obj*cls = 0.18 does not
};

TEST(YoloCandidates, BestClass) {
  YoloPostprocessOptions o;
  const auto d = yolo_candidates(kRows.data(), 4, 8, 3, o);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].x1, 40.f);
  EXPECT_EQ(d[0].y1, 35.f);
  EXPECT_EQ(d[0].x2, 60.f);
  EXPECT_EQ(d[0].y2, 45.f);
  EXPECT_EQ(d[0].class_id, 1);
  EXPECT_EQ(d[0].score, 0.8f * 0.9f);  // obj * cls in float
  EXPECT_EQ(d[0].image, 3);
  EXPECT_EQ(d[1].class_id, 0);
  EXPECT_EQ(d[1].score, 0.6f * 0.5f);
}

TEST(YoloCandidates, MultiLabel) {
  YoloPostprocessOptions o;
  o.multi_label = true;
  const auto d = yolo_candidates(kRows.data(), 4, 8, 0, o);
  ASSERT_EQ(d.size(), 4u);  // row by row, class by class
  EXPECT_EQ(d[0].class_id, 1);
  EXPECT_EQ(d[1].class_id, 2);
  EXPECT_EQ(d[1].score, 0.5f * 0.9f);
  EXPECT_EQ(d[2].class_id, 0);
  EXPECT_EQ(d[3].class_id, 1);
  EXPECT_EQ(d[3].x1, 76.f);
}

TEST(YoloCandidates, MultiLabelNeedsTwoClasses) {
  const std::vector<float> rows = {10, 10, 2, 2, 0.9f, 0.9f};  // nc = 1
  YoloPostprocessOptions o;
  o.multi_label = true;
  const auto d = yolo_candidates(rows.data(), 1, 6, 0, o);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].score, 0.9f * 0.9f);
}

Tensor pred_tensor(int64_t n, int64_t boxes, int64_t row, const std::vector<float>& v) {
  return Tensor::from_f32({n, boxes, row}, v);
}

TEST(YoloPostprocess, ClassAwareNmsPerImage) {
  // Image 0: two overlapping boxes of different classes (both kept) and a same-class duplicate (suppressed).
  // Image 1: one box.
  const std::vector<float> v = {
      50, 50, 40, 40, 0.9f, 0.9f, 0.1f,  // class 0, 0.81
      51, 50, 40, 40, 0.9f, 0.1f, 0.8f,  // class 1, 0.72: overlaps the first, other class
      50, 51, 40, 40, 0.8f, 0.9f, 0.1f,  // class 0, 0.72: duplicate of the first
      //
      20, 20, 10, 10, 0.6f, 0.2f, 0.7f,  //
      0,  0,  0,  0,  0.f,  0.f,  0.f,   //
      0,  0,  0,  0,  0.f,  0.f,  0.f,
  };
  YoloPostprocessOptions o;
  auto out = yolov5_postprocess(pred_tensor(2, 3, 7, v), o);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  ASSERT_EQ(out->size(), 2u);
  const auto& a = (*out)[0];
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].class_id, 0);
  EXPECT_EQ(a[0].score, 0.9f * 0.9f);
  EXPECT_EQ(a[1].class_id, 1);
  EXPECT_EQ(a[1].x1, 31.f);
  ASSERT_EQ((*out)[1].size(), 1u);
  EXPECT_EQ((*out)[1][0].image, 1);
  EXPECT_EQ((*out)[1][0].class_id, 1);

  o.agnostic = true;
  out = yolov5_postprocess(pred_tensor(2, 3, 7, v), o);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ((*out)[0].size(), 1u);

  o.agnostic = false;
  o.max_det = 1;
  out = yolov5_postprocess(pred_tensor(2, 3, 7, v), o);
  ASSERT_TRUE(out.has_value());
  ASSERT_EQ((*out)[0].size(), 1u);
  EXPECT_EQ((*out)[0][0].score, 0.9f * 0.9f);
}

TEST(YoloPostprocess, RejectsBadInput) {
  YoloPostprocessOptions o;
  EXPECT_FALSE(yolov5_postprocess(Tensor::from_f32({2, 7}, std::vector<float>(14)), o).has_value());
  EXPECT_FALSE(yolov5_postprocess(Tensor::from_f32({1, 2, 5}, std::vector<float>(10)), o).has_value());
  EXPECT_FALSE(yolov5_postprocess(Tensor(DType::kFloat16, {1, 2, 7}), o).has_value());
  o.conf_thres = 1.5f;
  EXPECT_FALSE(yolov5_postprocess(Tensor::from_f32({1, 1, 7}, std::vector<float>(7)), o).has_value());
}

// A head output [n, na*no, h, w] with every logit 0 (sigmoid 0.5).
Tensor zero_head(int64_t n, int64_t na, int64_t no, int64_t h, int64_t w) {
  return Tensor(DType::kFloat32, {n, na * no, h, w});
}

void set_logit(Tensor& t, int64_t b, int64_t channel, int64_t y, int64_t x, float v) {
  const auto& s = t.shape();
  t.data<float>()[((b * s[1] + channel) * s[2] + y) * s[3] + x] = v;
}

TEST(YoloHeads, LayoutAndFormulas) {
  // One level, stride 8, two anchors, one class (no = 6), H = 2, W = 3.
  YoloHeadSpec spec;
  spec.strides = {8};
  spec.anchors = {{10, 13, 20, 26}};
  Tensor head = zero_head(1, 2, 6, 2, 3);
  set_logit(head, 0, 1 * 6 + 4, 0, 1, 20.f);  // anchor 1, obj, y 0, x 1 -> sigmoid 1
  set_logit(head, 0, 0 * 6 + 0, 0, 0, 20.f);  // anchor 0, x, y 0, x 0
  set_logit(head, 0, 0 * 6 + 2, 0, 0, 20.f);  // anchor 0, w, y 0, x 0
  auto out = decode_yolov5_heads({head}, spec);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  ASSERT_EQ(out->shape(), (Shape{1, 12, 6}));
  const float* o = out->data<float>();
  auto row = [&](int64_t a, int64_t y, int64_t x) { return o + (a * 6 + y * 3 + x) * 6; };
  // All-zero logits: x = (0.5*2 - 0.5 + gx) * 8, w = (0.5*2)^2 * anchor_w.
  const float* r = row(1, 1, 2);
  EXPECT_EQ(r[0], 20.f);
  EXPECT_EQ(r[1], 12.f);
  EXPECT_EQ(r[2], 20.f);
  EXPECT_EQ(r[3], 26.f);
  EXPECT_EQ(r[4], 0.5f);
  EXPECT_EQ(r[5], 0.5f);
  EXPECT_EQ(row(1, 0, 1)[4], 1.f);   // the obj logit landed on (anchor 1, y 0, x 1)
  EXPECT_EQ(row(0, 0, 1)[4], 0.5f);
  EXPECT_EQ(row(0, 0, 0)[0], 12.f);  // s = 1: (2 - 0.5 + 0) * 8
  EXPECT_EQ(row(0, 0, 0)[2], 40.f);  // s = 1: (2)^2 * 10
}

TEST(YoloHeads, DefaultThreeLevelsAndBatch) {
  // nc = 2 (no = 7); 32x32 input: levels 4x4 (stride 8), 2x2 (16), 1x1 (32).
  std::vector<Tensor> heads = {zero_head(2, 3, 7, 4, 4), zero_head(2, 3, 7, 2, 2), zero_head(2, 3, 7, 1, 1)};
  set_logit(heads[2], 1, 2 * 7 + 5, 0, 0, 20.f);  // image 1, level 2, anchor 2, class 0
  auto out = decode_yolov5_heads(heads);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  ASSERT_EQ(out->shape(), (Shape{2, 63, 7}));
  const float* o = out->data<float>();
  const float* l1 = o + 48 * 7;  // first row of level 1: stride 16, anchor (30, 61)
  EXPECT_EQ(l1[0], 8.f);
  EXPECT_EQ(l1[2], 30.f);
  EXPECT_EQ(l1[3], 61.f);
  const float* l2 = o + 60 * 7;  // first row of level 2: stride 32, anchor (116, 90)
  EXPECT_EQ(l2[0], 16.f);
  EXPECT_EQ(l2[2], 116.f);
  EXPECT_EQ(l2[3], 90.f);
  EXPECT_EQ(o[62 * 7 + 5], 0.5f);                    // image 0 untouched
  EXPECT_EQ(o[(63 + 62) * 7 + 5], 1.f);               // image 1, last row (level 2, anchor 2)
  EXPECT_EQ(o[(63 + 62) * 7 + 2], 373.f);
}

TEST(YoloHeads, RejectsBadShapes) {
  EXPECT_FALSE(decode_yolov5_heads({}).has_value());
  // Two heads for a three-level spec.
  EXPECT_FALSE(decode_yolov5_heads({zero_head(1, 3, 7, 2, 2), zero_head(1, 3, 7, 1, 1)}).has_value());
  // 20 channels are not 3 x (5 + nc).
  std::vector<Tensor> bad = {Tensor(DType::kFloat32, {1, 20, 2, 2}), zero_head(1, 3, 7, 1, 1), zero_head(1, 3, 7, 1, 1)};
  EXPECT_FALSE(decode_yolov5_heads(bad).has_value());
  // Class counts differ between levels.
  bad = {zero_head(1, 3, 7, 2, 2), zero_head(1, 3, 8, 1, 1), zero_head(1, 3, 7, 1, 1)};
  EXPECT_FALSE(decode_yolov5_heads(bad).has_value());
  bad = {Tensor(DType::kFloat32, {1, 21, 2}), zero_head(1, 3, 7, 1, 1), zero_head(1, 3, 7, 1, 1)};
  EXPECT_FALSE(decode_yolov5_heads(bad).has_value());
}

TEST(Unletterbox, MapsBackAndClips) {
  // A 200x150 image scaled by 0.5 and padded 80 px on top.
  LetterboxInfo lb;
  lb.scale = 0.5f;
  lb.pad_x = 0;
  lb.pad_y = 80;
  lb.orig_w = 200;
  lb.orig_h = 150;
  Detection d;
  d.x1 = 10, d.y1 = 90, d.x2 = 110, d.y2 = 190;
  Detection e;
  e.x1 = -4, e.y1 = 70, e.x2 = 20, e.y2 = 100;
  std::vector<Detection> v = {d, e};
  ASSERT_TRUE(unletterbox_detections(v, lb).is_ok());
  EXPECT_EQ(v[0].x1, 20.f);
  EXPECT_EQ(v[0].y1, 20.f);
  EXPECT_EQ(v[0].x2, 200.f);  // 220 clipped to the width
  EXPECT_EQ(v[0].y2, 150.f);  // 220 clipped to the height
  EXPECT_EQ(v[1].x1, 0.f);
  EXPECT_EQ(v[1].y1, 0.f);
  EXPECT_EQ(v[1].x2, 40.f);
  EXPECT_EQ(v[1].y2, 40.f);
}

TEST(Unletterbox, RoundTripOfAYoloV5Letterbox) {
  // 1280x720 into 640x640: scale 0.5, 640x360 content, (640 - 360) / 2 = 140 px of padding above and below.
  LetterboxInfo lb{0.5f, 0.f, 140.f, 1280, 720};
  Detection d;
  d.x1 = 100 * 0.5f + lb.pad_x, d.y1 = 200 * 0.5f + lb.pad_y, d.x2 = 300 * 0.5f, d.y2 = 400 * 0.5f + lb.pad_y;
  std::vector<Detection> v = {d};
  ASSERT_TRUE(unletterbox_detections(v, lb).is_ok());
  EXPECT_EQ(v[0].x1, 100.f);
  EXPECT_EQ(v[0].y1, 200.f);
  EXPECT_EQ(v[0].x2, 300.f);
  EXPECT_EQ(v[0].y2, 400.f);
}

TEST(Unletterbox, RejectsInvalidLetterbox) {
  std::vector<Detection> v(1);
  EXPECT_FALSE(unletterbox_detections(v, LetterboxInfo{0.f, 0, 0, 10, 10}).is_ok());
  EXPECT_FALSE(unletterbox_detections(v, LetterboxInfo{1.f, 0, 0, 0, 10}).is_ok());
}

}  // namespace
}  // namespace qd
