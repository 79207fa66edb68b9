// From a model's contiguous class indices and batch image indices to a COCO dataset's category ids and image ids.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/coco_json.h"
#include "tasks/detection.h"

namespace qd {

// COCO-trained models (YOLOv5 and most others) predict 80 classes; COCO's files number them with 91 ids
// (1..90, with gaps). Element i is the category id of class i.
const std::array<int64_t, 80>& coco80_to_coco91();

// How class index i becomes a category id:
//   kCoco80To91: coco80_to_coco91()[i] (a COCO-trained model on COCO's own annotation files);
//   kSorted:     the i-th smallest category id of the annotations file (datasets converted to COCO format);
//   kIdentity:   i itself.
enum class ClassMapping { kCoco80To91, kSorted, kIdentity };

// "coco80", "sorted", "identity".
Expected<ClassMapping> parse_class_mapping(const std::string& name);

// The category id of each of num_classes classes. Errors when the mapping does not fit the dataset (e.g. coco80 with
// a model of 20 classes, or sorted with more classes than the file has categories).
Expected<std::vector<int64_t>> class_to_category_ids(ClassMapping mapping, const CocoDataset& ds, int num_classes);

// Detections (corners in original-image pixels, class index, image index) to COCO results ([x, y, w, h], category
// id, image id). image_ids[d.image] is the dataset id of each image; class_to_category[d.class_id] its category.
// Each float is carried to double through its shortest decimal form, so the results file stays short ("0.1", not
// "0.10000000149011612") and evaluating the file gives exactly what evaluating the returned list gives.
Expected<std::vector<CocoDetection>> to_coco_detections(const std::vector<Detection>& dets,
                                                        const std::vector<int64_t>& image_ids,
                                                        const std::vector<int64_t>& class_to_category);

}  // namespace qd
