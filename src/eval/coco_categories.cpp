#include "eval/coco_categories.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace qd {

const std::array<int64_t, 80>& coco80_to_coco91() {
  static const std::array<int64_t, 80> ids = {
      1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31,
      32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
      60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90};
  return ids;
}

Expected<ClassMapping> parse_class_mapping(const std::string& name) {
  if (name == "coco80") return ClassMapping::kCoco80To91;
  if (name == "sorted") return ClassMapping::kSorted;
  if (name == "identity") return ClassMapping::kIdentity;
  return invalid("unknown class mapping '" + name + "': use coco80, sorted or identity");
}

Expected<std::vector<int64_t>> class_to_category_ids(ClassMapping mapping, const CocoDataset& ds, int num_classes) {
  if (num_classes < 1) return invalid("a model needs at least one class, got " + std::to_string(num_classes));
  std::vector<int64_t> out;
  switch (mapping) {
    case ClassMapping::kCoco80To91: {
      if (num_classes != 80) {
        return invalid("the coco80 class mapping is for 80-class models, this one has " + std::to_string(num_classes) +
                       " classes: use --class-map sorted or identity");
      }
      const auto& ids = coco80_to_coco91();
      out.assign(ids.begin(), ids.end());
      break;
    }
    case ClassMapping::kSorted: {
      std::vector<int64_t> ids;
      for (const auto& c : ds.categories) ids.push_back(c.id);
      std::sort(ids.begin(), ids.end());
      if (static_cast<size_t>(num_classes) > ids.size()) {
        return invalid("the model has " + std::to_string(num_classes) + " classes but the annotations list only " +
                       std::to_string(ids.size()) + " categories");
      }
      out.assign(ids.begin(), ids.begin() + num_classes);
      break;
    }
    case ClassMapping::kIdentity:
      for (int i = 0; i < num_classes; ++i) out.push_back(i);
      break;
  }
  return out;
}

namespace {

// The double nearest to the shortest decimal that reads back as f.
double shortest_decimal(float f) {
  char buf[32];
  const auto w = std::to_chars(buf, buf + sizeof buf, f);
  double d = 0;
  std::from_chars(buf, w.ptr, d);
  return d;
}

}  // namespace

Expected<std::vector<CocoDetection>> to_coco_detections(const std::vector<Detection>& dets,
                                                        const std::vector<int64_t>& image_ids,
                                                        const std::vector<int64_t>& class_to_category) {
  std::vector<CocoDetection> out;
  out.reserve(dets.size());
  for (size_t i = 0; i < dets.size(); ++i) {
    const Detection& d = dets[i];
    if (d.image < 0 || static_cast<size_t>(d.image) >= image_ids.size()) {
      return internal("detection " + std::to_string(i) + " has image index " + std::to_string(d.image) + " of " +
                      std::to_string(image_ids.size()) + " images");
    }
    if (d.class_id < 0 || static_cast<size_t>(d.class_id) >= class_to_category.size()) {
      return invalid("detection " + std::to_string(i) + " has class " + std::to_string(d.class_id) +
                     " but the class mapping covers " + std::to_string(class_to_category.size()) + " classes");
    }
    if (!std::isfinite(d.x1) || !std::isfinite(d.y1) || !std::isfinite(d.x2) || !std::isfinite(d.y2) ||
        !std::isfinite(d.score)) {
      return invalid("detection " + std::to_string(i) + " has a non-finite box or score");
    }
    CocoDetection c;
    c.image_id = image_ids[static_cast<size_t>(d.image)];
    c.category_id = class_to_category[static_cast<size_t>(d.class_id)];
    c.bbox[0] = shortest_decimal(d.x1);
    c.bbox[1] = shortest_decimal(d.y1);
    c.bbox[2] = shortest_decimal(std::max(0.f, d.x2 - d.x1));
    c.bbox[3] = shortest_decimal(std::max(0.f, d.y2 - d.y1));
    c.score = shortest_decimal(d.score);
    out.push_back(c);
  }
  return out;
}

}  // namespace qd
