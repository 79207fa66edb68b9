#include "tasks/nms.h"

#include <algorithm>
#include <numeric>

namespace qd {

float box_iou_xyxy(const float* a, const float* b) {
  const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
  const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
  const float w = std::max(0.f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  const float h = std::max(0.f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  const float inter = w * h;
  return inter / (area_a + area_b - inter);
}

std::vector<size_t> nms(const float* boxes, const float* scores, size_t n, float iou_thres, size_t max_keep) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return scores[x] > scores[y]; });
  std::vector<float> area(n);
  for (size_t i = 0; i < n; ++i) {
    const float* b = boxes + 4 * i;
    area[i] = (b[2] - b[0]) * (b[3] - b[1]);
  }
  std::vector<char> suppressed(n, 0);
  std::vector<size_t> keep;
  for (size_t oi = 0; oi < n && keep.size() < max_keep; ++oi) {
    const size_t i = order[oi];
    if (suppressed[i]) continue;
    keep.push_back(i);
    const float* bi = boxes + 4 * i;
    for (size_t oj = oi + 1; oj < n; ++oj) {
      const size_t j = order[oj];
      if (suppressed[j]) continue;
      const float* bj = boxes + 4 * j;
      // Same expression order as torchvision's CPU kernel, so ties at the threshold resolve the same way.
      const float w = std::max(0.f, std::min(bi[2], bj[2]) - std::max(bi[0], bj[0]));
      const float h = std::max(0.f, std::min(bi[3], bj[3]) - std::max(bi[1], bj[1]));
      const float inter = w * h;
      const float ovr = inter / (area[i] + area[j] - inter);
      if (ovr > iou_thres) suppressed[j] = 1;
    }
  }
  return keep;
}

std::vector<Detection> batched_nms(const std::vector<Detection>& dets, const NmsOptions& opts) {
  if (dets.empty() || opts.max_det <= 0) return {};
  std::vector<size_t> order(dets.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return dets[x].score > dets[y].score; });
  if (opts.max_nms >= 0 && order.size() > static_cast<size_t>(opts.max_nms)) order.resize(static_cast<size_t>(opts.max_nms));

  const size_t n = order.size();
  std::vector<float> boxes(4 * n), scores(n);
  for (size_t i = 0; i < n; ++i) {
    const Detection& d = dets[order[i]];
    const float c = opts.agnostic ? 0.f : static_cast<float>(d.class_id) * opts.max_wh;
    boxes[4 * i + 0] = d.x1 + c;
    boxes[4 * i + 1] = d.y1 + c;
    boxes[4 * i + 2] = d.x2 + c;
    boxes[4 * i + 3] = d.y2 + c;
    scores[i] = d.score;
  }
  const std::vector<size_t> keep = nms(boxes.data(), scores.data(), n, opts.iou_thres, static_cast<size_t>(opts.max_det));
  std::vector<Detection> out;
  out.reserve(keep.size());
  for (size_t k : keep) out.push_back(dets[order[k]]);
  return out;
}

}  // namespace qd
