// NMS: torchvision.ops.nms semantics and ultralytics' class-aware use of it.
#include <gtest/gtest.h>

#include <cmath>

#include "tasks/nms.h"

namespace qd {
namespace {

Detection det(float x1, float y1, float x2, float y2, float score, int cls = 0) {
  Detection d;
  d.x1 = x1, d.y1 = y1, d.x2 = x2, d.y2 = y2;
  d.score = score;
  d.class_id = cls;
  return d;
}

TEST(Nms, BoxIou) {
  const float a[4] = {0, 0, 10, 10}, b[4] = {5, 0, 15, 10}, c[4] = {20, 20, 30, 30};
  EXPECT_FLOAT_EQ(box_iou_xyxy(a, b), 50.f / 150.f);
  EXPECT_EQ(box_iou_xyxy(a, c), 0.f);
  EXPECT_EQ(box_iou_xyxy(a, a), 1.f);
  const float e[4] = {3, 3, 3, 3};
  EXPECT_TRUE(std::isnan(box_iou_xyxy(e, e)));  // 0/0, as torchvision; it suppresses nothing
}

TEST(Nms, GreedyByScore) {
  // 0 and 1 overlap (IoU 0.9), 2 is apart; 1 scores highest and suppresses 0.
  const float boxes[] = {0, 0, 10, 10, 0, 0, 10, 9, 50, 50, 60, 60};
  const float scores[] = {0.8f, 0.9f, 0.7f};
  EXPECT_EQ(nms(boxes, scores, 3, 0.5f, 100), (std::vector<size_t>{1, 2}));
  // A looser threshold keeps all three, best first.
  EXPECT_EQ(nms(boxes, scores, 3, 0.95f, 100), (std::vector<size_t>{1, 0, 2}));
  // max_keep returns the first kept ones.
  EXPECT_EQ(nms(boxes, scores, 3, 0.95f, 2), (std::vector<size_t>{1, 0}));
}

TEST(Nms, IouEqualToThresholdIsKept) {
  // IoU exactly 0.5 (50 / 100 in float): suppression needs IoU > threshold.
  const float boxes[] = {0, 0, 10, 10, 0, 0, 10, 5};
  const float scores[] = {0.9f, 0.8f};
  EXPECT_EQ(nms(boxes, scores, 2, 0.5f, 10).size(), 2u);
  EXPECT_EQ(nms(boxes, scores, 2, 0.49f, 10).size(), 1u);
}

TEST(Nms, EqualScoresKeepIndexOrder) {
  const float boxes[] = {0, 0, 10, 10, 0, 0, 10, 10, 0, 0, 10, 10};
  const float scores[] = {0.5f, 0.5f, 0.5f};
  EXPECT_EQ(nms(boxes, scores, 3, 0.5f, 10), (std::vector<size_t>{0}));
}

TEST(Nms, SuppressedBoxesDoNotSuppress) {
  // A chain: 0 suppresses 1, and 1 would suppress 2, but 2 does not overlap 0 enough: 2 stays.
  const float boxes[] = {0, 0, 10, 10, 4, 0, 14, 10, 8, 0, 18, 10};
  const float scores[] = {0.9f, 0.8f, 0.7f};
  EXPECT_EQ(nms(boxes, scores, 3, 0.4f, 10), (std::vector<size_t>{0, 2}));
}

TEST(BatchedNms, ClassAware) {
  // Two heavily overlapping boxes of different classes both survive; of the same class only the best does.
  std::vector<Detection> d = {det(0, 0, 100, 100, 0.9f, 0), det(2, 2, 100, 100, 0.8f, 1),
                              det(1, 1, 100, 100, 0.7f, 0)};
  NmsOptions o;
  auto kept = batched_nms(d, o);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].score, 0.9f);
  EXPECT_EQ(kept[1].class_id, 1);
  EXPECT_EQ(kept[1].x1, 2.f);  // boxes come back unshifted
  o.agnostic = true;
  kept = batched_nms(d, o);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].score, 0.9f);
}

TEST(BatchedNms, MaxDetAndMaxNms) {
  std::vector<Detection> d;
  for (int i = 0; i < 10; ++i) d.push_back(det(20.f * i, 0, 20.f * i + 10, 10, 0.1f * static_cast<float>(i), 0));
  NmsOptions o;
  o.max_det = 3;
  auto kept = batched_nms(d, o);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_FLOAT_EQ(kept[0].score, 0.9f);
  EXPECT_FLOAT_EQ(kept[2].score, 0.7f);
  // max_nms: only the best 4 candidates enter NMS at all.
  o.max_det = 300;
  o.max_nms = 4;
  kept = batched_nms(d, o);
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_FLOAT_EQ(kept[3].score, 0.6f);
  EXPECT_TRUE(batched_nms({}, o).empty());
}

TEST(BatchedNms, ClassOffsetIsComputedInFloat) {
  // Class 79's offset is 79 * 7680 = 606720, where floats are 1/16 apart: ultralytics computes IoU on the shifted,
  // rounded boxes, and so do we. Two unit boxes 0.03 apart have IoU 0.97 / 1.03 = 0.94 at the origin (kept with
  // threshold 0.99) but coincide once shifted (IoU 1: suppressed).
  std::vector<Detection> d = {det(0.f, 0.f, 1.f, 1.f, 0.9f, 79), det(0.03f, 0.f, 1.03f, 1.f, 0.8f, 79)};
  NmsOptions o;
  o.iou_thres = 0.99f;
  EXPECT_EQ(batched_nms(d, o).size(), 1u);
  o.agnostic = true;  // no shift
  EXPECT_EQ(batched_nms(d, o).size(), 2u);
}

}  // namespace
}  // namespace qd
