// The COCO JSON fuzz harness, shared by fuzz_coco_json and the unit test that replays tests/fuzz/regressions/coco/*
// and the seed corpus. The input is an instances (ground truth) JSON and a results JSON separated by a NUL byte
// (which JSON text cannot hold); without a NUL, the whole input is tried as either. What parses must be within the
// documented limits; results must survive coco_results_to_json -> parse bit for bit; a small pair that both parse
// is evaluated, and every summary number must be -1 or in [0, 1]. Every error is fine; a crash, a sanitizer report,
// a leak, a hang or a kInternal status is a bug.
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "eval/coco_eval.h"
#include "eval/coco_json.h"

namespace qd::fuzz {

// Evaluation is run only on pairs this small (it allocates T*R*K*A*M doubles and matches per image and category).
constexpr size_t kCocoEvalMaxImages = 64, kCocoEvalMaxCategories = 16, kCocoEvalMaxBoxes = 256;

inline Status coco_check_results(const std::vector<CocoDetection>& dets, const CocoLimits& lim) {
  for (const CocoDetection& d : dets) {
    for (double v : d.bbox) {
      if (!std::isfinite(v) || std::fabs(v) > lim.max_abs_coordinate) return internal("a bbox value out of range");
    }
    if (d.bbox[2] < 0 || d.bbox[3] < 0 || !std::isfinite(d.score)) return internal("a bad detection was accepted");
  }
  auto back = parse_coco_results(coco_results_to_json(dets), "round trip", lim);
  if (!back) return internal("written results do not parse: " + back.status().to_string());
  if (back->size() != dets.size()) return internal("the results round trip changed the count");
  for (size_t i = 0; i < dets.size(); ++i) {
    const CocoDetection& a = dets[i];
    const CocoDetection& b = (*back)[i];
    bool same = a.image_id == b.image_id && a.category_id == b.category_id && a.score == b.score;
    for (int k = 0; k < 4; ++k) same = same && a.bbox[k] == b.bbox[k];
    if (!same) return internal("the results round trip changed detection " + std::to_string(i));
  }
  return Status::ok();
}

inline Status coco_check_instances(const CocoDataset& ds, const CocoLimits& lim) {
  for (const CocoAnnotation& a : ds.annotations) {
    for (double v : a.bbox) {
      if (!std::isfinite(v) || std::fabs(v) > lim.max_abs_coordinate) return internal("a bbox value out of range");
    }
    if (a.bbox[2] < 0 || a.bbox[3] < 0 || !std::isfinite(a.area) || a.area < 0) {
      return internal("a bad annotation was accepted");
    }
  }
  return Status::ok();
}

inline Status coco_one_input(const std::string& bytes) {
  const CocoLimits lim;
  const size_t nul = bytes.find('\0');
  const std::string_view all(bytes);
  if (nul == std::string::npos) {
    auto ds = parse_coco_instances(all, "fuzz", lim);
    if (ds) QD_RETURN_IF_ERROR(coco_check_instances(*ds, lim));
    if (!ds && ds.status().code() == StatusCode::kInternal) return ds.status();
    auto dets = parse_coco_results(all, "fuzz", lim);
    if (!dets) return dets.status();
    return coco_check_results(*dets, lim);
  }
  auto ds = parse_coco_instances(all.substr(0, nul), "fuzz instances", lim);
  if (!ds) return ds.status();
  QD_RETURN_IF_ERROR(coco_check_instances(*ds, lim));
  auto dets = parse_coco_results(all.substr(nul + 1), "fuzz results", lim);
  if (!dets) return dets.status();
  QD_RETURN_IF_ERROR(coco_check_results(*dets, lim));
  if (ds->images.size() > kCocoEvalMaxImages || ds->categories.size() > kCocoEvalMaxCategories ||
      ds->annotations.size() > kCocoEvalMaxBoxes || dets->size() > kCocoEvalMaxBoxes) {
    return Status::ok();
  }
  auto r = evaluate_coco_bbox(*ds, *dets);
  if (!r) return r.status();
  for (double s : r->stats) {
    if (!(s == -1 || (s >= 0 && s <= 1))) return internal("a summary number outside [0, 1]: " + std::to_string(s));
  }
  (void)format_coco_summary(*r);
  (void)coco_summary_json(*r, &*ds);
  return Status::ok();
}

}  // namespace qd::fuzz
