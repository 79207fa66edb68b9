// COCO bbox evaluation: small cases whose numbers are worked out by hand in the comments, one rule each.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "eval/coco_eval.h"

namespace qd {
namespace {

constexpr double kTol = 1e-12;

// Stat indices in summarize() order.
enum { AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl };

struct Box {
  double x, y, w, h;
};

class Case {
 public:
  Case& image(int64_t id) {
    CocoImage im;
    im.id = id;
    gt.images.push_back(im);
    return *this;
  }
  Case& category(int64_t id) {
    CocoCategory c;
    c.id = id;
    c.name = "c" + std::to_string(id);
    gt.categories.push_back(c);
    return *this;
  }
  // area < 0: the box's area.
  Case& ann(int64_t img, int64_t cat, Box b, bool crowd = false, double area = -1, int64_t id = -1) {
    CocoAnnotation a;
    a.id = id >= 0 ? id : next_id++;
    a.image_id = img;
    a.category_id = cat;
    a.bbox[0] = b.x, a.bbox[1] = b.y, a.bbox[2] = b.w, a.bbox[3] = b.h;
    a.area = area >= 0 ? area : b.w * b.h;
    a.iscrowd = crowd;
    gt.annotations.push_back(a);
    return *this;
  }
  Case& det(int64_t img, int64_t cat, Box b, double score) {
    CocoDetection d;
    d.image_id = img;
    d.category_id = cat;
    d.bbox[0] = b.x, d.bbox[1] = b.y, d.bbox[2] = b.w, d.bbox[3] = b.h;
    d.score = score;
    dets.push_back(d);
    return *this;
  }
  CocoEvalResult eval(const CocoEvalParams& p = {}) const {
    auto r = evaluate_coco_bbox(gt, dets, p);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r.has_value() ? *r : CocoEvalResult{};
  }

  CocoDataset gt;
  std::vector<CocoDetection> dets;
  int64_t next_id = 1;
};

// Large boxes (area >= 96^2) placed far apart so that they never overlap.
Box big(int i) { return {200.0 * i, 0, 100, 100}; }

TEST(CocoEval, ThresholdsAreNumpyLinspace) {
  const CocoEvalParams p;
  ASSERT_EQ(p.iou_thrs.size(), 10u);
  const double iou[10] = {0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.8999999999999999, 0.95};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.iou_thrs[i], iou[i]) << i;
  ASSERT_EQ(p.rec_thrs.size(), 101u);
  EXPECT_EQ(p.rec_thrs[0], 0.0);
  EXPECT_EQ(p.rec_thrs[29], 0.29);
  EXPECT_EQ(p.rec_thrs[57], 0.5700000000000001);  // numpy's value, not 0.57
  EXPECT_EQ(p.rec_thrs[100], 1.0);
}

TEST(CocoEval, PerfectDetectionsGiveOne) {
  Case c;
  c.image(1).image(2).category(1).category(2);
  c.ann(1, 1, big(0)).ann(1, 2, big(1)).ann(2, 1, big(0)).ann(2, 2, big(2));
  c.det(1, 1, big(0), 0.9).det(1, 2, big(1), 0.8).det(2, 1, big(0), 0.7).det(2, 2, big(2), 0.6);
  const auto r = c.eval();
  for (int s : {AP, AP50, AP75, APl, AR1, AR10, AR100, ARl}) EXPECT_NEAR(r.stats[s], 1.0, kTol) << s;
  // No small or medium ground truth anywhere: -1.
  for (int s : {APs, APm, ARs, ARm}) EXPECT_EQ(r.stats[s], -1.0) << s;
}

TEST(CocoEval, FalsePositiveAboveTruePositive) {
  // One ground truth. Detections by score: FP (0.9), TP (0.8).
  // tp = [0, 1], fp = [1, 1] -> recall [0, 1], precision [0, 0.5]; envelope [0.5, 0.5]; every recall threshold
  // (0 included: searchsorted-left finds index 0) reads 0.5. AP = 0.5 at every IoU.
  // maxDets=1 keeps only the FP: recall 0.
  Case c;
  c.image(1).category(1).ann(1, 1, big(0));
  c.det(1, 1, big(3), 0.9).det(1, 1, big(0), 0.8);
  const auto r = c.eval();
  EXPECT_NEAR(r.stats[AP], 0.5, kTol);
  EXPECT_NEAR(r.stats[AP50], 0.5, kTol);
  EXPECT_NEAR(r.stats[AR100], 1.0, kTol);
  EXPECT_NEAR(r.stats[AR10], 1.0, kTol);
  EXPECT_EQ(r.stats[AR1], 0.0);
}

TEST(CocoEval, HandComputedPrecisionRecallCurve) {
  // 4 ground truths; detections by score: TP, FP, TP, FP, TP (one ground truth missed).
  // tp = [1,1,2,2,3], fp = [0,1,1,2,2]; recall = [.25,.25,.5,.5,.75]; precision = [1,.5,2/3,.5,.6]
  // envelope = [1, 2/3, 2/3, .6, .6]. Recall thresholds: 0.00..0.25 (26) -> 1; 0.26..0.50 (25) -> 2/3;
  // 0.51..0.75 (25) -> 0.6; 0.76..1.00 (25) -> 0 (past the last recall).
  Case c;
  c.image(1).category(1);
  for (int i = 0; i < 4; ++i) c.ann(1, 1, big(i));
  c.det(1, 1, big(0), 0.9).det(1, 1, big(10), 0.8).det(1, 1, big(1), 0.7).det(1, 1, big(11), 0.6).det(1, 1, big(2), 0.5);
  const auto r = c.eval();
  const double ap = (26 * 1.0 + 25 * (2.0 / 3.0) + 25 * 0.6) / 101;
  EXPECT_NEAR(r.stats[AP], ap, 1e-12);
  EXPECT_NEAR(r.stats[AP50], ap, 1e-12);
  EXPECT_NEAR(r.stats[AR100], 0.75, kTol);
  // The interpolated curve itself (t = 0, k = 0, area all, maxDets 100).
  EXPECT_NEAR(r.precision_at(0, 25, 0, 0, 2), 1.0, kTol);
  EXPECT_NEAR(r.precision_at(0, 26, 0, 0, 2), 2.0 / 3.0, kTol);
  EXPECT_NEAR(r.precision_at(0, 50, 0, 0, 2), 2.0 / 3.0, kTol);
  EXPECT_NEAR(r.precision_at(0, 51, 0, 0, 2), 0.6, kTol);
  EXPECT_NEAR(r.precision_at(0, 75, 0, 0, 2), 0.6, kTol);
  EXPECT_EQ(r.precision_at(0, 76, 0, 0, 2), 0.0);
  EXPECT_EQ(r.precision_at(0, 100, 0, 0, 2), 0.0);
  // The first precision is 1/(1 + eps), as pycocotools' tp / (fp + tp + np.spacing(1)).
  EXPECT_EQ(r.precision_at(0, 0, 0, 0, 2), 1.0 / (1.0 + 2.220446049250313e-16));
}

TEST(CocoEval, DuplicateIsFalsePositive) {
  // 2 ground truths; detections: g1 (0.9), g1 again (0.8), g2 (0.7).
  // tp = [1,1,2], fp = [0,1,1]; recall [.5,.5,1]; precision [1,.5,2/3] -> envelope [1,2/3,2/3].
  // Thresholds 0..0.50 (51) -> 1, 0.51..1 (50) -> 2/3.
  Case c;
  c.image(1).category(1).ann(1, 1, big(0)).ann(1, 1, big(1));
  c.det(1, 1, big(0), 0.9).det(1, 1, {0, 0, 100, 99}, 0.8).det(1, 1, big(1), 0.7);
  const auto r = c.eval();
  EXPECT_NEAR(r.stats[AP50], (51 + 50 * (2.0 / 3.0)) / 101, 1e-12);
  EXPECT_NEAR(r.stats[AR100], 1.0, kTol);
}

TEST(CocoEval, CrowdAbsorbsDetectionsWhichAreIgnored) {
  // A regular ground truth and a crowd region. Two detections inside the crowd region score above the true positive.
  // Their IoU with the crowd is intersection / detection area = 1, so they match it and are ignored (neither TP nor
  // FP); without that rule they would be FPs and AP would be 1/3. The crowd does not count as ground truth.
  Case c;
  c.image(1).category(1);
  c.ann(1, 1, big(0));
  c.ann(1, 1, {1000, 0, 400, 400}, true);
  c.det(1, 1, {1010, 10, 50, 50}, 0.95).det(1, 1, {1200, 200, 60, 60}, 0.9);
  c.det(1, 1, big(0), 0.8).det(1, 1, big(3), 0.7);  // TP, then an FP
  const auto r = c.eval();
  // tp = [0,0,1,1], fp = [0,0,0,1] -> recall [0,0,1,1], precision [0,0,1,.5] -> envelope [1,1,1,.5] -> AP 1.
  EXPECT_NEAR(r.stats[AP], 1.0, kTol);
  EXPECT_NEAR(r.stats[AR100], 1.0, kTol);
  EXPECT_NEAR(r.stats[AR1], 0.0, kTol);  // maxDets=1 keeps only the first crowd detection
}

TEST(CocoEval, CrowdOnlyCategoryIsAbsent) {
  Case c;
  c.image(1).category(1).category(2);
  c.ann(1, 1, big(0)).ann(1, 2, big(1), true);
  c.det(1, 1, big(0), 0.9).det(1, 2, big(1), 0.9);
  const auto r = c.eval();
  const auto per_cat = coco_per_category_ap(r);
  EXPECT_NEAR(per_cat[0], 1.0, kTol);
  EXPECT_EQ(per_cat[1], -1.0);
  EXPECT_NEAR(r.stats[AP], 1.0, kTol);
}

TEST(CocoEval, AreaRangesIgnoreOutsideGroundTruthAndUnmatchedDetections) {
  // Small ground truth (area 100) and large one (10000), each found exactly, plus an unmatched small FP (area 25)
  // that scores highest.
  Case c;
  c.image(1).category(1);
  c.ann(1, 1, {0, 0, 10, 10}).ann(1, 1, {200, 200, 100, 100});
  c.det(1, 1, {500, 0, 5, 5}, 0.95).det(1, 1, {0, 0, 10, 10}, 0.9).det(1, 1, {200, 200, 100, 100}, 0.8);
  const auto r = c.eval();
  // all: FP, TP, TP -> precision [0, .5, 2/3] -> envelope 2/3 everywhere.
  EXPECT_NEAR(r.stats[AP], 2.0 / 3.0, 1e-12);
  // small: the large ground truth is ignored and so is the detection matched to it: FP, TP -> 0.5.
  EXPECT_NEAR(r.stats[APs], 0.5, 1e-12);
  // medium: no ground truth in range -> -1.
  EXPECT_EQ(r.stats[APm], -1.0);
  EXPECT_EQ(r.stats[ARm], -1.0);
  // large: the small detections either match the ignored small ground truth or are unmatched and outside the
  // range: both ignored. Only the TP remains -> 1.
  EXPECT_NEAR(r.stats[APl], 1.0, kTol);
  EXPECT_NEAR(r.stats[ARs], 1.0, kTol);
  EXPECT_NEAR(r.stats[ARl], 1.0, kTol);
  EXPECT_EQ(r.stats[AR1], 0.0);
}

TEST(CocoEval, AreaRangeBoundsAreInclusiveAndUseAnnotationArea) {
  // The annotation's area field decides, not the box: area exactly 32^2 is both small and medium.
  Case c;
  c.image(1).category(1);
  c.ann(1, 1, big(0), false, 1024.0);
  c.det(1, 1, big(0), 0.9);
  const auto r = c.eval();
  EXPECT_NEAR(r.stats[APs], 1.0, kTol);
  EXPECT_NEAR(r.stats[APm], 1.0, kTol);
  EXPECT_EQ(r.stats[APl], -1.0);  // the ground truth is not large; the matched detection is ignored with it
}

TEST(CocoEval, MaxDetsTruncation) {
  // 12 ground truths, 12 exact detections with distinct scores.
  Case c;
  c.image(1).category(1);
  for (int i = 0; i < 12; ++i) c.ann(1, 1, big(i)).det(1, 1, big(i), 0.9 - 0.01 * i);
  const auto r = c.eval();
  EXPECT_NEAR(r.stats[AR1], 1.0 / 12, kTol);
  EXPECT_NEAR(r.stats[AR10], 10.0 / 12, kTol);
  EXPECT_NEAR(r.stats[AR100], 1.0, kTol);
  EXPECT_NEAR(r.stats[AP], 1.0, kTol);
}

TEST(CocoEval, DetectionsPerImageCutAtHundredByScore) {
  // 100 higher-scoring FPs push the one TP out of the image's 100 detections: recall 0. With 99 FPs it stays and
  // precision is 1/100 at every recall threshold.
  for (int fps : {100, 99}) {
    Case c;
    c.image(1).category(1).ann(1, 1, big(0));
    c.det(1, 1, big(0), 0.5);
    for (int i = 0; i < fps; ++i) c.det(1, 1, big(i + 1), 0.9);
    const auto r = c.eval();
    if (fps == 100) {
      EXPECT_EQ(r.stats[AR100], 0.0);
      EXPECT_EQ(r.stats[AP], 0.0);
    } else {
      EXPECT_NEAR(r.stats[AR100], 1.0, kTol);
      EXPECT_NEAR(r.stats[AP], 0.01, 1e-12);
    }
  }
}

TEST(CocoEval, CategoryWithoutGroundTruthIsExcluded) {
  Case c;
  c.image(1).category(1).category(2);
  c.ann(1, 1, big(0)).det(1, 1, big(0), 0.9);
  c.det(1, 2, big(1), 0.99).det(1, 2, big(2), 0.98);  // detections of a category with no ground truth
  const auto r = c.eval();
  EXPECT_NEAR(r.stats[AP], 1.0, kTol);
  const auto per_cat = coco_per_category_ap(r);
  EXPECT_EQ(per_cat[1], -1.0);
  for (size_t t = 0; t < r.T; ++t) EXPECT_EQ(r.recall_at(t, 1, 0, 2), -1.0);
}

TEST(CocoEval, EmptyResults) {
  Case c;
  c.image(1).image(2).category(1).ann(1, 1, big(0));
  const auto r = c.eval();
  EXPECT_EQ(r.stats[AP], 0.0);
  EXPECT_EQ(r.stats[APl], 0.0);
  EXPECT_EQ(r.stats[APs], -1.0);
  EXPECT_EQ(r.stats[AR100], 0.0);
  EXPECT_EQ(r.stats[ARm], -1.0);
}

TEST(CocoEval, NoGroundTruthAtAll) {
  Case c;
  c.image(1).category(1).det(1, 1, big(0), 0.5);
  const auto r = c.eval();
  for (double s : r.stats) EXPECT_EQ(s, -1.0);
}

TEST(CocoEval, MultipleImagesMergeByScore) {
  // Image 1: TP 0.6. Image 2: FP 0.9, TP 0.5. Merged: FP, TP, TP -> precision [0, .5, 2/3] -> AP 2/3.
  // maxDets=1 per image keeps image 1's TP and image 2's FP: recall 1/2.
  Case c;
  c.image(1).image(2).category(1);
  c.ann(1, 1, big(0)).ann(2, 1, big(0));
  c.det(1, 1, big(0), 0.6).det(2, 1, big(5), 0.9).det(2, 1, big(0), 0.5);
  const auto r = c.eval();
  EXPECT_NEAR(r.stats[AP], 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(r.stats[AR1], 0.5, kTol);
}

TEST(CocoEval, EqualScoresAcrossImagesKeepImageIdOrder) {
  // Equal scores: the merge is stable over images sorted by id, whatever the file order. Image 1 (listed second)
  // has an FP, image 2 a TP, both 0.8: FP comes first -> precision [0, .5] -> AP 0.5 (TP first would give 1).
  Case c;
  c.image(2).image(1).category(1);
  c.ann(2, 1, big(0));
  c.det(2, 1, big(0), 0.8).det(1, 1, big(0), 0.8);
  EXPECT_NEAR(c.eval().stats[AP], 0.5, 1e-12);
}

TEST(CocoEval, EqualScoresWithinImageKeepFileOrder) {
  // Within an image, equal scores keep the results file's order (mergesort): FP listed first -> AP 0.5.
  Case a;
  a.image(1).category(1).ann(1, 1, big(0));
  a.det(1, 1, big(3), 0.8).det(1, 1, big(0), 0.8);
  EXPECT_NEAR(a.eval().stats[AP], 0.5, 1e-12);
  Case b;
  b.image(1).category(1).ann(1, 1, big(0));
  b.det(1, 1, big(0), 0.8).det(1, 1, big(3), 0.8);
  EXPECT_NEAR(b.eval().stats[AP], 1.0, 1e-12);
}

TEST(CocoEval, IouExactlyAtThresholds) {
  // Ground truth 20x20; a detection 20xh inside it has IoU h/20, exactly representable for these h.
  // A match needs IoU >= threshold: h=10 (0.5) matches at 0.50 only -> AP 1/10; h=11 (0.55, the same double as
  // the 0.55 threshold) at 0.50 and 0.55 -> 2/10; h=15 (0.75) at 0.50..0.75 -> 6/10; h=18 (0.9 >= 0.8999999999999999)
  // at all but 0.95 -> 9/10.
  struct {
    double h;
    double ap;
  } rows[] = {{10, 0.1}, {11, 0.2}, {15, 0.6}, {18, 0.9}, {20, 1.0}};
  for (const auto& row : rows) {
    Case c;
    c.image(1).category(1).ann(1, 1, {0, 0, 20, 20});
    c.det(1, 1, {0, 0, 20, row.h}, 0.9);
    const auto r = c.eval();
    EXPECT_NEAR(r.stats[AP], row.ap, 1e-12) << row.h;
    EXPECT_NEAR(r.stats[AP50], 1.0, kTol) << row.h;
  }
  Case c;
  c.image(1).category(1).ann(1, 1, {0, 0, 20, 20});
  c.det(1, 1, {0, 0, 20, 9.999}, 0.9);  // IoU just below 0.5: no match at all
  EXPECT_EQ(c.eval().stats[AP50], 0.0);
}

TEST(CocoEval, GreedyMatchPrefersBestIouAndRegularOverIgnored) {
  // One detection overlapping two ground truths: it takes the one with the higher IoU; the other stays unmatched.
  Case c;
  c.image(1).category(1);
  c.ann(1, 1, {0, 0, 100, 100}).ann(1, 1, {10, 0, 100, 100});
  c.det(1, 1, {9, 0, 100, 100}, 0.9);
  const auto r = c.eval();
  EXPECT_NEAR(r.stats[AR100], 0.5, kTol);
  EXPECT_NEAR(r.stats[AP], 51.0 / 101, 1e-12);  // recall stops at 0.5 with precision 1: 51 of 101 thresholds

  // A regular ground truth wins over a crowd one (the crowd is sorted last and the search stops at it).
  Case d;
  d.image(1).category(1);
  d.ann(1, 1, {0, 0, 100, 100}, true).ann(1, 1, {0, 0, 100, 100});
  d.det(1, 1, {0, 0, 100, 100}, 0.9).det(1, 1, {0, 0, 100, 100}, 0.8);
  const auto rd = d.eval();
  // First detection -> regular (TP); second -> regular is taken, the crowd takes it (ignored).
  EXPECT_NEAR(rd.stats[AP], 1.0, kTol);
}

TEST(CocoEval, AnnotationIdZeroCountsAsUnmatched) {
  // pycocotools stores the matched ground truth's id and tests it for != 0: a match to id 0 is a false positive.
  Case c;
  c.image(1).category(1).ann(1, 1, big(0), false, -1, 0);
  c.det(1, 1, big(0), 0.9);
  const auto r = c.eval();
  EXPECT_EQ(r.stats[AP], 0.0);
  EXPECT_EQ(r.stats[AR100], 0.0);
}

TEST(CocoEval, ImageSubset) {
  Case c;
  c.image(1).image(2).category(1);
  c.ann(1, 1, big(0)).ann(2, 1, big(0));
  c.det(1, 1, big(0), 0.9).det(2, 1, big(4), 0.95);
  CocoEvalParams p;
  p.img_ids = {1};
  const auto r = c.eval(p);
  EXPECT_NEAR(r.stats[AP], 1.0, kTol);
  EXPECT_EQ(r.num_outside_img_ids, 1u);
  // All images: FP (0.95), TP (0.9), one ground truth missed -> precision 0.5 up to recall 0.5 (51 thresholds).
  EXPECT_NEAR(c.eval().stats[AP], 0.5 * 51 / 101, 1e-12);

  p.img_ids = {3};
  EXPECT_FALSE(evaluate_coco_bbox(c.gt, c.dets, p).has_value());
}

TEST(CocoEval, UnknownImageIsAnErrorUnknownCategoryIsSkipped) {
  Case c;
  c.image(1).category(1).ann(1, 1, big(0)).det(1, 1, big(0), 0.9).det(1, 7, big(1), 0.99).det(1, 7, big(2), 0.98);
  const auto r = c.eval();
  EXPECT_NEAR(r.stats[AP], 1.0, kTol);
  EXPECT_EQ(r.num_unknown_category, 2u);
  ASSERT_EQ(r.unknown_category_examples.size(), 1u);
  EXPECT_EQ(r.unknown_category_examples[0], 7);

  c.det(5, 1, big(0), 0.5);
  auto bad = evaluate_coco_bbox(c.gt, c.dets);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("image_id 5"), std::string::npos) << bad.status().message();
}

TEST(CocoEval, InvalidParams) {
  Case c;
  c.image(1).category(1);
  CocoEvalParams p;
  p.max_dets = {100, 10, 1};
  EXPECT_FALSE(evaluate_coco_bbox(c.gt, c.dets, p).has_value());
  p = CocoEvalParams();
  p.area_labels.pop_back();
  EXPECT_FALSE(evaluate_coco_bbox(c.gt, c.dets, p).has_value());
}

TEST(CocoEval, SummaryTextMatchesPycocotoolsLayout) {
  Case c;
  c.image(1).category(1);
  c.ann(1, 1, {0, 0, 10, 10}).ann(1, 1, {200, 200, 100, 100});
  c.det(1, 1, {500, 0, 5, 5}, 0.95).det(1, 1, {0, 0, 10, 10}, 0.9).det(1, 1, {200, 200, 100, 100}, 0.8);
  const std::string text = format_coco_summary(c.eval());
  const std::string expected =
      " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.667\n"
      " Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 0.667\n"
      " Average Precision  (AP) @[ IoU=0.75      | area=   all | maxDets=100 ] = 0.667\n"
      " Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 0.500\n"
      " Average Precision  (AP) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = -1.000\n"
      " Average Precision  (AP) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = 1.000\n"
      " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.000\n"
      " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets= 10 ] = 1.000\n"
      " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000\n"
      " Average Recall     (AR) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 1.000\n"
      " Average Recall     (AR) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = -1.000\n"
      " Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = 1.000\n";
  EXPECT_EQ(text, expected);
}

TEST(CocoEval, SummaryJson) {
  Case c;
  c.image(1).category(3).category(1).ann(1, 1, big(0)).det(1, 1, big(0), 0.9);
  const auto r = c.eval();
  const auto j = nlohmann::json::parse(coco_summary_json(r, &c.gt));
  EXPECT_NEAR(j["stats"]["AP"].get<double>(), 1.0, kTol);
  EXPECT_EQ(j["stats"]["APs"].get<double>(), -1.0);
  ASSERT_EQ(j["stats_list"].size(), 12u);
  ASSERT_EQ(j["per_category"].size(), 2u);
  EXPECT_EQ(j["per_category"][0]["id"].get<int64_t>(), 1);  // sorted by id
  EXPECT_EQ(j["per_category"][0]["name"].get<std::string>(), "c1");
  EXPECT_EQ(j["per_category"][1]["ap"].get<double>(), -1.0);
}

}  // namespace
}  // namespace qd
