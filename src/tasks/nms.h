// Non-maximum suppression on the CPU, with the semantics of torchvision.ops.nms and of ultralytics' class-aware use
// of it (the reference that batched GPU versions must match).
#pragma once

#include <cstddef>
#include <vector>

#include "tasks/detection.h"

namespace qd {

// IoU of two corner boxes, computed in float as torchvision does: inter / (area_a + area_b - inter), no +1 on sizes.
// 0/0 (two empty boxes) gives NaN, which suppresses nothing.
float box_iou_xyxy(const float* a, const float* b);

// Greedy NMS. boxes is [n][4] corners (x1, y1, x2, y2), scores [n]. Boxes are visited by descending score (a stable
// sort: equal scores keep index order); a box is kept unless its IoU with an already kept box is > iou_thres
// (strictly). Returns the indices kept, best first, at most max_keep of them (the first max_keep of the full result).
std::vector<size_t> nms(const float* boxes, const float* scores, size_t n, float iou_thres, size_t max_keep);

struct NmsOptions {
  float iou_thres = 0.45f;
  int max_det = 300;       // detections kept per image
  int max_nms = 30000;     // candidates (best first) that enter NMS; the rest are dropped
  bool agnostic = false;   // true: one NMS over all classes
  float max_wh = 7680.f;   // class offset: box + class_id * max_wh keeps boxes of different classes apart
};

// Class-aware NMS of one image's detections, as ultralytics' non_max_suppression: sort by score (descending,
// stable), keep the first max_nms, shift each box by class_id * max_wh (0 when agnostic), run nms() on the shifted
// boxes (in float, so the shift's rounding is reproduced too), keep the first max_det. Returns the kept detections
// (unshifted) best first.
std::vector<Detection> batched_nms(const std::vector<Detection>& dets, const NmsOptions& opts);

}  // namespace qd
