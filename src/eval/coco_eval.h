// COCO bbox evaluation that gives pycocotools' COCOeval numbers (evaluate + accumulate + summarize, iouType 'bbox').
// docs/coco-eval.md lists the rules it follows and the few places where it refuses input pycocotools would accept.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/coco_json.h"

namespace qd {

// numpy.linspace(start, stop, num) computed the way numpy does (i * step + start, last = stop), so that the
// thresholds are bit-identical to pycocotools' (e.g. its 0.9 IoU threshold is 0.8999999999999999).
std::vector<double> numpy_linspace(double start, double stop, int num);

struct CocoEvalParams {
  std::vector<double> iou_thrs = numpy_linspace(0.5, 0.95, 10);
  std::vector<double> rec_thrs = numpy_linspace(0.0, 1.0, 101);
  std::vector<int> max_dets = {1, 10, 100};  // ascending; summarize() uses the three of them
  std::vector<std::array<double, 2>> area_rngs = {{0, 1e10}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, 1e10}};
  std::vector<std::string> area_labels = {"all", "small", "medium", "large"};
  // Images to evaluate (pycocotools' params.imgIds). Empty: every image of the annotations file.
  std::vector<int64_t> img_ids;
};

// The 12 numbers of summarize(), in its order.
constexpr int kCocoNumStats = 12;
extern const std::array<const char*, kCocoNumStats> kCocoStatNames;  // "AP", "AP50", ..., "ARl"

struct CocoEvalResult {
  CocoEvalParams params;          // with img_ids = the images evaluated (sorted, unique)
  std::vector<int64_t> cat_ids;   // sorted
  size_t T = 0, R = 0, K = 0, A = 0, M = 0;
  // pycocotools' eval['precision'] [T][R][K][A][M] and eval['recall'] [T][K][A][M], row-major; -1 where a category
  // has no (non-ignored) ground truth.
  std::vector<double> precision;
  std::vector<double> recall;
  std::array<double, kCocoNumStats> stats{};

  size_t num_detections = 0;              // detections in the results
  size_t num_unknown_category = 0;        // of those, with a category id the annotations do not list (ignored)
  std::vector<int64_t> unknown_category_examples;  // up to 8 such ids
  size_t num_outside_img_ids = 0;         // detections on images outside params.img_ids (ignored)

  double precision_at(size_t t, size_t r, size_t k, size_t a, size_t m) const {
    return precision[(((t * R + r) * K + k) * A + a) * M + m];
  }
  double recall_at(size_t t, size_t k, size_t a, size_t m) const { return recall[((t * K + k) * A + a) * M + m]; }
};

// Progress of a long evaluation: stage name, units done, units total.
using CocoProgressFn = std::function<void(const char* stage, size_t done, size_t total)>;

// Evaluates detections against ground truth. Errors: detections on images that the annotations do not list
// (pycocotools refuses these too), invalid params. Detections whose category is not in the annotations are skipped
// and counted, as pycocotools skips them.
Expected<CocoEvalResult> evaluate_coco_bbox(const CocoDataset& gt, const std::vector<CocoDetection>& dets,
                                            const CocoEvalParams& params = {},
                                            const CocoProgressFn& progress = nullptr);

// One line of summarize(): mean of precision (ap) or recall over the entries > -1, -1 when there are none.
// iou_thr < 0 means every threshold; otherwise the threshold equal to iou_thr (none equal: -1, as pycocotools).
double coco_summarize_entry(const CocoEvalResult& r, bool ap, double iou_thr, const std::string& area_label,
                            int max_dets);

// AP@[.50:.95] (area all, the largest maxDets) of each category, in cat_ids order; -1 for categories without ground
// truth. Also AP50 when iou_thr = 0.5.
std::vector<double> coco_per_category_ap(const CocoEvalResult& r, double iou_thr = -1);

// The 12 lines pycocotools' summarize() prints, byte for byte (each ends with '\n').
std::string format_coco_summary(const CocoEvalResult& r);
// {"stats": {"AP": .., ...}, "stats_list": [12 numbers], "per_category": [{"id", "name", "ap", "ap50"}], ...}
// names come from ds when given.
std::string coco_summary_json(const CocoEvalResult& r, const CocoDataset* ds = nullptr);

}  // namespace qd
