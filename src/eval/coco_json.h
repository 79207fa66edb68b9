// COCO files: the instances (ground truth) JSON and the results (detections) JSON, read with bounds checks and
// written atomically. Only what bbox evaluation needs is kept; everything else (segmentation, info, licenses, ...)
// is skipped while streaming, so large files do not become large DOMs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace qd {

struct CocoImage {
  int64_t id = 0;
  int64_t width = -1, height = -1;  // -1 when the file does not say
  std::string file_name;
};

struct CocoCategory {
  int64_t id = 0;
  std::string name;
};

struct CocoAnnotation {
  int64_t id = 0;
  int64_t image_id = 0;
  int64_t category_id = 0;
  double bbox[4] = {0, 0, 0, 0};  // x, y, width, height in pixels
  double area = 0;                // the file's "area" (segment area for COCO); bbox w*h when the file has none
  bool iscrowd = false;
};

struct CocoDataset {
  std::vector<CocoImage> images;
  std::vector<CocoAnnotation> annotations;
  std::vector<CocoCategory> categories;
  // Things that are legal but surprising (e.g. a missing "area" that was filled in); the CLI prints them.
  std::vector<std::string> warnings;
};

// One line of a results file: {"image_id", "category_id", "bbox": [x, y, w, h], "score"}.
struct CocoDetection {
  int64_t image_id = 0;
  int64_t category_id = 0;
  double bbox[4] = {0, 0, 0, 0};
  double score = 0;
};

// Limits on what a file may hold (the defaults are far above COCO's, far below what would exhaust memory).
struct CocoLimits {
  uint64_t max_file_bytes = uint64_t{4} << 30;
  size_t max_images = 10'000'000;
  size_t max_annotations = 100'000'000;
  size_t max_categories = 1'000'000;
  size_t max_detections = 200'000'000;
  double max_abs_coordinate = 1e9;  // |x|, |y|, w, h, area
};

// Parses an instances JSON: an object with "images", "annotations" and "categories" arrays.
// source names the input in error messages (usually the path).
// Required: images[].id; annotations[].{id, image_id, category_id, bbox}; categories[].id. Ids are integers
// (an integral number like 7.0 is accepted). Optional: annotations[].area (default: bbox w*h, with a warning),
// annotations[].iscrowd (default 0; a bool or an integer), images[].{width, height, file_name}, categories[].name.
// Errors: duplicate image/annotation/category ids, annotations that name an image or category the file does not
// list, negative or non-finite boxes and areas.
Expected<CocoDataset> parse_coco_instances(std::string_view json, const std::string& source,
                                           const CocoLimits& limits = {});
Expected<CocoDataset> load_coco_instances(const std::string& path, const CocoLimits& limits = {});

// Parses a results JSON: an array of {"image_id", "category_id", "bbox", "score"} objects (other keys are skipped).
// Image ids are checked against the dataset by the evaluator, not here.
Expected<std::vector<CocoDetection>> parse_coco_results(std::string_view json, const std::string& source,
                                                        const CocoLimits& limits = {});
Expected<std::vector<CocoDetection>> load_coco_results(const std::string& path, const CocoLimits& limits = {});

// Serializes detections in COCO's results format, one detection per line. Numbers are written in the shortest
// form that reads back to the same double, so evaluating the file and the in-memory list give the same numbers.
std::string coco_results_to_json(const std::vector<CocoDetection>& dets);
// Writes coco_results_to_json() atomically.
Status write_coco_results(const std::string& path, const std::vector<CocoDetection>& dets);

}  // namespace qd
