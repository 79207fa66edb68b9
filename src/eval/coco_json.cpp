#include "eval/coco_json.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace qd {
namespace {

// ---- a streaming reader for "arrays of flat records" -------------------------------------------------------------
// COCO files are arrays of small objects. The reader walks the SAX events, keeps the few fields the caller asked for
// from each record, skips everything else (however deeply nested), and hands each finished record to a sink.

enum class Section { kNone, kImages, kAnnotations, kCategories, kResults };

const char* section_name(Section s) {
  switch (s) {
    case Section::kImages: return "images";
    case Section::kAnnotations: return "annotations";
    case Section::kCategories: return "categories";
    case Section::kResults: return "results";
    default: return "?";
  }
}

struct FieldValue {
  enum class Kind : uint8_t { kMissing, kNull, kBool, kInt, kFloat, kString, kArray, kObject };
  Kind kind = Kind::kMissing;
  bool b = false;
  int64_t i = 0;  // kInt
  double f = 0;   // kInt and kFloat (kInt as the nearest double)
  std::string s;
  // kArray: the leading numbers (up to kMaxArray), the element count, and whether every element was a number.
  static constexpr size_t kMaxArray = 8;
  std::array<double, kMaxArray> arr{};
  size_t arr_len = 0;
  bool arr_all_numbers = true;
};

constexpr size_t kMaxFields = 6;
using Record = std::array<FieldValue, kMaxFields>;

const char* kind_name(FieldValue::Kind k) {
  switch (k) {
    case FieldValue::Kind::kMissing: return "nothing";
    case FieldValue::Kind::kNull: return "null";
    case FieldValue::Kind::kBool: return "a boolean";
    case FieldValue::Kind::kInt: return "an integer";
    case FieldValue::Kind::kFloat: return "a number";
    case FieldValue::Kind::kString: return "a string";
    case FieldValue::Kind::kArray: return "an array";
    case FieldValue::Kind::kObject: return "an object";
  }
  return "?";
}

struct SectionSpec {
  Section section;
  std::vector<const char*> fields;  // index in this list = index in Record
};

class RecordReader {
 public:
  using Sink = std::function<Status(Section, size_t index, const Record&)>;

  // top_is_array: a results file (one section at the top level); otherwise an object whose keys name sections.
  RecordReader(std::string_view input, bool top_is_array, std::vector<SectionSpec> specs, Sink sink)
      : input_(input), top_is_array_(top_is_array), specs_(std::move(specs)), sink_(std::move(sink)) {}

  Status status() const { return status_; }
  bool top_seen() const { return top_seen_; }
  size_t count(Section s) const {
    auto it = counts_.find(static_cast<int>(s));
    return it == counts_.end() ? 0 : it->second;
  }
  bool seen(Section s) const { return counts_.count(static_cast<int>(s)) > 0; }

  // ---- nlohmann SAX interface ----
  bool null() { return scalar([](FieldValue& v) { v.kind = FieldValue::Kind::kNull; }, false, 0); }
  bool boolean(bool b) {
    return scalar([b](FieldValue& v) { v.kind = FieldValue::Kind::kBool; v.b = b; }, false, 0);
  }
  bool number_integer(int64_t x) {
    return scalar([x](FieldValue& v) { v.kind = FieldValue::Kind::kInt; v.i = x; v.f = static_cast<double>(x); },
                  true, static_cast<double>(x));
  }
  bool number_unsigned(uint64_t x) {
    if (x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return number_integer(static_cast<int64_t>(x));
    }
    return number_float(static_cast<double>(x), std::string());
  }
  bool number_float(double x, const std::string&) {
    return scalar([x](FieldValue& v) { v.kind = FieldValue::Kind::kFloat; v.f = x; }, true, x);
  }
  bool string(std::string& s) {
    return scalar([&s](FieldValue& v) { v.kind = FieldValue::Kind::kString; v.s = std::move(s); }, false, 0);
  }
  bool binary(nlohmann::json::binary_t&) { return scalar([](FieldValue& v) { v.kind = FieldValue::Kind::kNull; }, false, 0); }

  bool start_object(size_t) { return start(false); }
  bool start_array(size_t) { return start(true); }
  bool end_object() { return end(false); }
  bool end_array() { return end(true); }

  bool key(std::string& k) {
    if (skip_ > 0) return true;
    if (in_record_ && depth_ == record_depth_) {
      field_ = -1;
      const auto& f = spec_->fields;
      for (size_t i = 0; i < f.size(); ++i) {
        if (k == f[i]) field_ = static_cast<int>(i);
      }
      return true;
    }
    if (!top_is_array_ && depth_ == 1) top_key_ = std::move(k);
    return true;
  }

  bool parse_error(size_t position, const std::string& last_token, const nlohmann::json::exception& ex) {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 7: ..." -> "parse error at line 3, ..."
    if (const auto p = what.find("] "); p != std::string::npos && what.rfind("[json.exception", 0) == 0) {
      what = what.substr(p + 2);
    }
    std::string msg = "not valid JSON: " + what;
    // Python's json.dump writes NaN / Infinity, which JSON does not have: say so.
    const size_t from = position > 16 ? position - 16 : 0;
    const std::string_view around = input_.substr(std::min(from, input_.size()), 32);
    for (const char* bad : {"NaN", "nan", "Infinity", "inf"}) {
      if (last_token.find(bad) != std::string::npos || around.find(bad) != std::string_view::npos) {
        msg += " (NaN and Infinity are not JSON numbers: drop or fix the non-finite values before writing the file)";
        break;
      }
    }
    status_ = invalid(msg);
    return false;
  }

 private:
  template <typename SetFn>
  bool scalar(SetFn set, bool is_number, double number) {
    if (skip_ > 0) return true;
    if (depth_ == 0) return fail(top_shape_error());
    if (in_array_field_) {  // an element of an array field (bbox)
      FieldValue& v = record_[field_];
      if (is_number) {
        if (v.arr_len < FieldValue::kMaxArray) v.arr[v.arr_len] = number;
      } else {
        v.arr_all_numbers = false;
      }
      ++v.arr_len;
      return true;
    }
    if (in_record_ && depth_ == record_depth_) {
      if (field_ >= 0) {
        FieldValue& v = record_[field_];
        v = FieldValue();
        set(v);
      }
      return true;
    }
    if (section_ != Section::kNone && depth_ == section_depth_) {
      return fail(std::string("'") + section_name(section_) + "'[" + std::to_string(index_) +
                  "] must be an object, got a scalar");
    }
    if (!top_is_array_ && depth_ == 1) return section_value_not_array();
    return true;
  }

  bool start(bool is_array) {
    if (skip_ > 0) {
      ++depth_;
      return true;
    }
    if (depth_ == 0) {
      top_seen_ = true;
      if (is_array != top_is_array_) return fail(top_shape_error());
      ++depth_;
      if (top_is_array_) begin_section(Section::kResults);
      return true;
    }
    if (in_array_field_) {  // nested container inside bbox: not a number
      record_[field_].arr_all_numbers = false;
      ++record_[field_].arr_len;
      return skip_container();
    }
    if (in_record_ && depth_ == record_depth_) {
      if (field_ < 0) return skip_container();
      FieldValue& v = record_[field_];
      v = FieldValue();
      if (!is_array) {
        v.kind = FieldValue::Kind::kObject;
        return skip_container();
      }
      v.kind = FieldValue::Kind::kArray;
      in_array_field_ = true;
      ++depth_;
      return true;
    }
    if (section_ != Section::kNone && depth_ == section_depth_) {
      if (is_array) {
        return fail(std::string("'") + section_name(section_) + "'[" + std::to_string(index_) +
                    "] must be an object, got an array");
      }
      in_record_ = true;
      ++depth_;
      record_depth_ = depth_;
      field_ = -1;
      for (auto& v : record_) v.kind = FieldValue::Kind::kMissing;
      return true;
    }
    if (!top_is_array_ && depth_ == 1) {
      const SectionSpec* s = spec_for_key(top_key_);
      if (s == nullptr) return skip_container();
      if (!is_array) return section_value_not_array();
      ++depth_;
      begin_section(s->section);
      return true;
    }
    return skip_container();
  }

  bool end(bool is_array) {
    --depth_;
    if (skip_ > 0) {
      if (depth_ < skip_) skip_ = 0;
      return true;
    }
    if (in_array_field_ && depth_ == record_depth_) {
      in_array_field_ = false;
      return true;
    }
    if (in_record_ && depth_ == record_depth_ - 1) {
      in_record_ = false;
      Status st = sink_(section_, index_, record_);
      if (!st.is_ok()) {
        status_ = std::move(st);
        return false;
      }
      ++index_;
      return true;
    }
    if (section_ != Section::kNone && depth_ == section_depth_ - 1) {
      counts_[static_cast<int>(section_)] = index_;
      section_ = Section::kNone;
      return true;
    }
    return true;
  }

  void begin_section(Section s) {
    section_ = s;
    section_depth_ = depth_;
    index_ = 0;
    counts_[static_cast<int>(s)] = 0;
    for (const auto& sp : specs_) {
      if (sp.section == s) spec_ = &sp;
    }
  }
  const SectionSpec* spec_for_key(const std::string& k) const {
    for (const auto& sp : specs_) {
      if (k == section_name(sp.section)) return &sp;
    }
    return nullptr;
  }
  bool skip_container() {
    ++depth_;
    skip_ = depth_;
    return true;
  }
  bool section_value_not_array() {
    if (spec_for_key(top_key_) == nullptr) return true;
    return fail("'" + top_key_ + "' must be an array");
  }
  std::string top_shape_error() const {
    return top_is_array_ ? "a results file must be a JSON array of {image_id, category_id, bbox, score} objects, "
                           "but this file is not an array (is it an annotations file?)"
                         : "an annotations file must be a JSON object with 'images', 'annotations' and 'categories', "
                           "but this file is not an object (is it a results file?)";
  }
  bool fail(std::string msg) {
    status_ = invalid(std::move(msg));
    return false;
  }

  const std::string_view input_;
  const bool top_is_array_;
  const std::vector<SectionSpec> specs_;
  Sink sink_;
  Status status_;
  bool top_seen_ = false;
  int depth_ = 0;
  int skip_ = 0;  // > 0: skipping a container opened at this depth
  std::string top_key_;
  Section section_ = Section::kNone;
  const SectionSpec* spec_ = nullptr;
  int section_depth_ = 0;
  size_t index_ = 0;
  bool in_record_ = false;
  int record_depth_ = 0;
  int field_ = -1;
  bool in_array_field_ = false;
  Record record_;
  std::unordered_map<int, size_t> counts_;
};

Status run_reader(std::string_view json, RecordReader& reader) {
  const bool ok = nlohmann::json::sax_parse(json.begin(), json.end(), &reader);
  if (!reader.status().is_ok()) return reader.status();
  if (!ok) return invalid("not valid JSON");
  if (!reader.top_seen()) return invalid("the file is empty");
  return Status::ok();
}

// ---- field checks ----------------------------------------------------------------------------------------------

std::string fmt_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

class RecordChecker {
 public:
  RecordChecker(Section s, size_t index, const Record& r, const std::vector<const char*>& names)
      : section_(s), index_(index), r_(r), names_(names) {}

  void set_id(int64_t id) {
    id_ = id;
    has_id_ = true;
  }

  std::string where() const {
    std::string w = std::string(section_name(section_)) + "[" + std::to_string(index_) + "]";
    if (has_id_) w += " (id " + std::to_string(id_) + ")";
    return w;
  }
  Status error(std::string msg) const { return invalid(where() + ": " + msg); }

  bool present(int f) const { return r_[f].kind != FieldValue::Kind::kMissing; }

  Expected<int64_t> integer(int f) const {
    const FieldValue& v = r_[f];
    if (v.kind == FieldValue::Kind::kMissing) return error(std::string("missing required field '") + names_[f] + "'");
    if (v.kind == FieldValue::Kind::kInt) return v.i;
    if (v.kind == FieldValue::Kind::kFloat && std::isfinite(v.f) && v.f == std::floor(v.f) &&
        std::fabs(v.f) <= 9007199254740992.0) {
      return static_cast<int64_t>(v.f);
    }
    if (v.kind == FieldValue::Kind::kFloat) {
      return error(std::string("'") + names_[f] + "' must be an integer, got " + fmt_num(v.f));
    }
    return error(std::string("'") + names_[f] + "' must be an integer, got " + kind_name(v.kind));
  }

  Expected<double> number(int f, double max_abs, bool non_negative) const {
    const FieldValue& v = r_[f];
    if (v.kind == FieldValue::Kind::kMissing) return error(std::string("missing required field '") + names_[f] + "'");
    if (v.kind != FieldValue::Kind::kInt && v.kind != FieldValue::Kind::kFloat) {
      return error(std::string("'") + names_[f] + "' must be a number, got " + kind_name(v.kind));
    }
    if (!std::isfinite(v.f) || std::fabs(v.f) > max_abs) {
      return error(std::string("'") + names_[f] + "' is " + fmt_num(v.f) + ", outside the accepted range [-" +
                   fmt_num(max_abs) + ", " + fmt_num(max_abs) + "]");
    }
    if (non_negative && v.f < 0) return error(std::string("'") + names_[f] + "' must not be negative, got " + fmt_num(v.f));
    return v.f;
  }

  Status bbox(int f, double max_abs, double out[4]) const {
    const FieldValue& v = r_[f];
    if (v.kind == FieldValue::Kind::kMissing) return error(std::string("missing required field '") + names_[f] + "'");
    const char* expect = "an array of 4 numbers [x, y, width, height]";
    if (v.kind != FieldValue::Kind::kArray) {
      return error(std::string("'") + names_[f] + "' must be " + expect + ", got " + kind_name(v.kind));
    }
    if (!v.arr_all_numbers) return error(std::string("'") + names_[f] + "' must be " + expect + ", got non-numbers");
    if (v.arr_len != 4) {
      return error(std::string("'") + names_[f] + "' must be " + expect + ", got " + std::to_string(v.arr_len) +
                   " elements");
    }
    for (int i = 0; i < 4; ++i) {
      if (!std::isfinite(v.arr[i]) || std::fabs(v.arr[i]) > max_abs) {
        return error(std::string("'") + names_[f] + "' value " + fmt_num(v.arr[i]) + " is outside the accepted range [-" +
                     fmt_num(max_abs) + ", " + fmt_num(max_abs) + "]");
      }
      out[i] = v.arr[i];
    }
    if (out[2] < 0 || out[3] < 0) {
      return error(std::string("'") + names_[f] + "' has a negative size (width " + fmt_num(out[2]) + ", height " +
                   fmt_num(out[3]) + "); COCO boxes are [x, y, width, height], not corners [x1, y1, x2, y2]");
    }
    return Status::ok();
  }

  Expected<bool> flag(int f) const {
    const FieldValue& v = r_[f];
    if (v.kind == FieldValue::Kind::kBool) return v.b;
    if (v.kind == FieldValue::Kind::kInt) return v.i != 0;
    return error(std::string("'") + names_[f] + "' must be 0, 1 or a boolean, got " + kind_name(v.kind));
  }

  Expected<std::string> text(int f) const {
    const FieldValue& v = r_[f];
    if (v.kind == FieldValue::Kind::kString) return v.s;
    return error(std::string("'") + names_[f] + "' must be a string, got " + kind_name(v.kind));
  }

 private:
  Section section_;
  size_t index_;
  const Record& r_;
  const std::vector<const char*>& names_;
  int64_t id_ = 0;
  bool has_id_ = false;
};

Status with_source(Status s, const std::string& source) {
  if (!s.is_ok()) s.prefix(source);
  return s;
}

// Field order of each section (indices into Record).
enum ImageField { kImgId, kImgWidth, kImgHeight, kImgFileName };
enum AnnField { kAnnId, kAnnImageId, kAnnCategoryId, kAnnBbox, kAnnArea, kAnnIscrowd };
enum CatField { kCatId, kCatName };
enum ResField { kResImageId, kResCategoryId, kResBbox, kResScore };

const std::vector<const char*> kImageFields = {"id", "width", "height", "file_name"};
const std::vector<const char*> kAnnFields = {"id", "image_id", "category_id", "bbox", "area", "iscrowd"};
const std::vector<const char*> kCatFields = {"id", "name"};
const std::vector<const char*> kResFields = {"image_id", "category_id", "bbox", "score"};

Status check_count(size_t n, size_t limit, const char* what) {
  if (n >= limit) {
    return invalid(std::string("more than ") + std::to_string(limit) + " " + what +
                   " (the limit guards against corrupt files)");
  }
  return Status::ok();
}

Status add_image(const Record& r, size_t index, const CocoLimits& lim, CocoDataset& ds) {
  QD_RETURN_IF_ERROR(check_count(ds.images.size(), lim.max_images, "images"));
  RecordChecker c(Section::kImages, index, r, kImageFields);
  CocoImage im;
  im.id = QD_TRY(c.integer(kImgId));
  c.set_id(im.id);
  if (c.present(kImgWidth)) {
    im.width = QD_TRY(c.integer(kImgWidth));
    if (im.width < 0 || im.width > lim.max_abs_coordinate) return c.error("'width' is out of range");
  }
  if (c.present(kImgHeight)) {
    im.height = QD_TRY(c.integer(kImgHeight));
    if (im.height < 0 || im.height > lim.max_abs_coordinate) return c.error("'height' is out of range");
  }
  if (c.present(kImgFileName)) im.file_name = QD_TRY(c.text(kImgFileName));
  ds.images.push_back(std::move(im));
  return Status::ok();
}

Status add_annotation(const Record& r, size_t index, const CocoLimits& lim, CocoDataset& ds, size_t* filled_area) {
  QD_RETURN_IF_ERROR(check_count(ds.annotations.size(), lim.max_annotations, "annotations"));
  RecordChecker c(Section::kAnnotations, index, r, kAnnFields);
  CocoAnnotation a;
  a.id = QD_TRY(c.integer(kAnnId));
  c.set_id(a.id);
  a.image_id = QD_TRY(c.integer(kAnnImageId));
  a.category_id = QD_TRY(c.integer(kAnnCategoryId));
  QD_RETURN_IF_ERROR(c.bbox(kAnnBbox, lim.max_abs_coordinate, a.bbox));
  if (c.present(kAnnArea)) {
    a.area = QD_TRY(c.number(kAnnArea, lim.max_abs_coordinate * lim.max_abs_coordinate, true));
  } else {
    a.area = a.bbox[2] * a.bbox[3];
    ++*filled_area;
  }
  if (c.present(kAnnIscrowd)) a.iscrowd = QD_TRY(c.flag(kAnnIscrowd));
  ds.annotations.push_back(a);
  return Status::ok();
}

Status add_category(const Record& r, size_t index, const CocoLimits& lim, CocoDataset& ds) {
  QD_RETURN_IF_ERROR(check_count(ds.categories.size(), lim.max_categories, "categories"));
  RecordChecker c(Section::kCategories, index, r, kCatFields);
  CocoCategory cat;
  cat.id = QD_TRY(c.integer(kCatId));
  c.set_id(cat.id);
  if (c.present(kCatName)) cat.name = QD_TRY(c.text(kCatName));
  ds.categories.push_back(std::move(cat));
  return Status::ok();
}

Status add_result(const Record& r, size_t index, const CocoLimits& lim, std::vector<CocoDetection>& out) {
  QD_RETURN_IF_ERROR(check_count(out.size(), lim.max_detections, "detections"));
  RecordChecker c(Section::kResults, index, r, kResFields);
  CocoDetection d;
  d.image_id = QD_TRY(c.integer(kResImageId));
  d.category_id = QD_TRY(c.integer(kResCategoryId));
  QD_RETURN_IF_ERROR(c.bbox(kResBbox, lim.max_abs_coordinate, d.bbox));
  d.score = QD_TRY(c.number(kResScore, std::numeric_limits<double>::max(), false));
  out.push_back(d);
  return Status::ok();
}

// Cross-record checks of an instances file: unique ids, annotations that point at listed images and categories.
Status check_dataset(const CocoDataset& ds) {
  std::unordered_set<int64_t> images, categories, anns;
  images.reserve(ds.images.size() * 2);
  for (size_t i = 0; i < ds.images.size(); ++i) {
    if (!images.insert(ds.images[i].id).second) {
      return invalid("images[" + std::to_string(i) + "]: duplicate image id " + std::to_string(ds.images[i].id));
    }
  }
  for (size_t i = 0; i < ds.categories.size(); ++i) {
    if (!categories.insert(ds.categories[i].id).second) {
      return invalid("categories[" + std::to_string(i) + "]: duplicate category id " +
                     std::to_string(ds.categories[i].id));
    }
  }
  anns.reserve(ds.annotations.size() * 2);
  for (size_t i = 0; i < ds.annotations.size(); ++i) {
    const CocoAnnotation& a = ds.annotations[i];
    const std::string w = "annotations[" + std::to_string(i) + "] (id " + std::to_string(a.id) + ")";
    if (!anns.insert(a.id).second) return invalid(w + ": duplicate annotation id; annotation ids must be unique");
    if (!images.count(a.image_id)) {
      return invalid(w + ": image_id " + std::to_string(a.image_id) + " is not listed in 'images'");
    }
    if (!categories.count(a.category_id)) {
      return invalid(w + ": category_id " + std::to_string(a.category_id) + " is not listed in 'categories'");
    }
  }
  return Status::ok();
}

void append_double(std::string& out, double v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

}  // namespace

Expected<CocoDataset> parse_coco_instances(std::string_view json, const std::string& source,
                                           const CocoLimits& limits) {
  CocoDataset ds;
  size_t filled_area = 0;
  RecordReader reader(
      json, false,
      {{Section::kImages, kImageFields}, {Section::kAnnotations, kAnnFields}, {Section::kCategories, kCatFields}},
      [&](Section s, size_t index, const Record& r) -> Status {
        switch (s) {
          case Section::kImages: return add_image(r, index, limits, ds);
          case Section::kAnnotations: return add_annotation(r, index, limits, ds, &filled_area);
          case Section::kCategories: return add_category(r, index, limits, ds);
          default: return internal("unexpected section");
        }
      });
  QD_RETURN_IF_ERROR(with_source(run_reader(json, reader), source));
  for (Section s : {Section::kImages, Section::kAnnotations, Section::kCategories}) {
    if (!reader.seen(s)) {
      return invalid(source + ": no '" + section_name(s) +
                     "' array; an annotations file is a JSON object with 'images', 'annotations' and 'categories' "
                     "arrays (COCO instances format)");
    }
  }
  QD_RETURN_IF_ERROR(with_source(check_dataset(ds), source));
  if (filled_area > 0) {
    ds.warnings.push_back(source + ": " + std::to_string(filled_area) +
                          " annotations have no 'area'; their box area (w*h) is used for the small/medium/large split");
  }
  for (const auto& a : ds.annotations) {
    if (a.id == 0) {
      ds.warnings.push_back(source + ": an annotation has id 0; pycocotools (and so qdeploy, to give the same numbers) "
                                     "counts a detection matched to it as a false positive. Number annotations from 1.");
      break;
    }
  }
  return ds;
}

Expected<CocoDataset> load_coco_instances(const std::string& path, const CocoLimits& limits) {
  std::string text = QD_TRY(read_file(path, limits.max_file_bytes));
  return parse_coco_instances(text, path, limits);
}

Expected<std::vector<CocoDetection>> parse_coco_results(std::string_view json, const std::string& source,
                                                        const CocoLimits& limits) {
  std::vector<CocoDetection> out;
  // A detection is ~90 bytes of JSON: reserve to avoid regrowing a large vector.
  out.reserve(std::min<size_t>(json.size() / 96 + 16, limits.max_detections));
  RecordReader reader(json, true, {{Section::kResults, kResFields}},
                      [&](Section, size_t index, const Record& r) { return add_result(r, index, limits, out); });
  QD_RETURN_IF_ERROR(with_source(run_reader(json, reader), source));
  out.shrink_to_fit();
  return out;
}

Expected<std::vector<CocoDetection>> load_coco_results(const std::string& path, const CocoLimits& limits) {
  std::string text = QD_TRY(read_file(path, limits.max_file_bytes));
  return parse_coco_results(text, path, limits);
}

std::string coco_results_to_json(const std::vector<CocoDetection>& dets) {
  std::string out;
  out.reserve(dets.size() * 100 + 4);
  out += "[";
  for (size_t i = 0; i < dets.size(); ++i) {
    const CocoDetection& d = dets[i];
    out += i == 0 ? "\n" : ",\n";
    out += "{\"image_id\": ";
    out += std::to_string(d.image_id);
    out += ", \"category_id\": ";
    out += std::to_string(d.category_id);
    out += ", \"bbox\": [";
    for (int k = 0; k < 4; ++k) {
      if (k) out += ", ";
      append_double(out, d.bbox[k]);
    }
    out += "], \"score\": ";
    append_double(out, d.score);
    out += "}";
  }
  out += "\n]\n";
  return out;
}

Status write_coco_results(const std::string& path, const std::vector<CocoDetection>& dets) {
  return write_file_atomic(path, coco_results_to_json(dets));
}

}  // namespace qd
