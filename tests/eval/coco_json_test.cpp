// Reading and writing COCO files: what is accepted, what is refused and how the errors read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/file_io.h"
#include "eval/coco_categories.h"
#include "eval/coco_json.h"
#include "test_util.h"

namespace qd {
namespace {

const char* kInstances = R"({
  "info": {"description": "tiny", "nested": [[1, 2], {"a": [3]}]},
  "licenses": [],
  "images": [{"id": 7, "width": 640, "height": 480, "file_name": "a.jpg", "extra": {"x": 1}},
             {"id": 9.0, "file_name": "b.jpg"}],
  "annotations": [
    {"id": 1, "image_id": 7, "category_id": 18, "bbox": [10.5, 20, 30, 40], "area": 1000.25, "iscrowd": 0,
     "segmentation": [[10, 20, 40, 20, 40, 60]]},
    {"id": 2, "image_id": 9, "category_id": 1, "bbox": [0, 0, 5, 6], "iscrowd": true,
     "segmentation": {"counts": [1, 2, 3], "size": [480, 640]}},
    {"id": 3, "image_id": 7, "category_id": 1, "bbox": [1, 2, 3, 4], "area": 12}
  ],
  "categories": [{"id": 1, "name": "person", "supercategory": "x"}, {"id": 18, "name": "dog"}]
})";

TEST(CocoJson, ParsesInstancesAndSkipsTheRest) {
  auto ds = parse_coco_instances(kInstances, "gt.json");
  ASSERT_TRUE(ds.has_value()) << ds.status().to_string();
  ASSERT_EQ(ds->images.size(), 2u);
  EXPECT_EQ(ds->images[0].id, 7);
  EXPECT_EQ(ds->images[0].width, 640);
  EXPECT_EQ(ds->images[0].file_name, "a.jpg");
  EXPECT_EQ(ds->images[1].id, 9);
  EXPECT_EQ(ds->images[1].width, -1);
  ASSERT_EQ(ds->annotations.size(), 3u);
  const auto& a = ds->annotations[0];
  EXPECT_EQ(a.image_id, 7);
  EXPECT_EQ(a.category_id, 18);
  EXPECT_EQ(a.bbox[0], 10.5);
  EXPECT_EQ(a.bbox[3], 40);
  EXPECT_EQ(a.area, 1000.25);
  EXPECT_FALSE(a.iscrowd);
  EXPECT_TRUE(ds->annotations[1].iscrowd);
  EXPECT_EQ(ds->annotations[1].area, 30.0);  // missing area: box area, with a warning
  ASSERT_EQ(ds->warnings.size(), 1u);
  EXPECT_NE(ds->warnings[0].find("no 'area'"), std::string::npos);
  ASSERT_EQ(ds->categories.size(), 2u);
  EXPECT_EQ(ds->categories[1].name, "dog");
}

TEST(CocoJson, ParsesResults) {
  const char* text = R"([{"image_id": 7, "category_id": 18, "bbox": [1, 2.5, 3, 4], "score": 0.25, "segmentation": [[1]]},
                         {"score": 1e-3, "bbox": [0, 0, 0, 0], "category_id": 1, "image_id": 9, "id": 5}])";
  auto dets = parse_coco_results(text, "dets.json");
  ASSERT_TRUE(dets.has_value()) << dets.status().to_string();
  ASSERT_EQ(dets->size(), 2u);
  EXPECT_EQ((*dets)[0].bbox[1], 2.5);
  EXPECT_EQ((*dets)[0].score, 0.25);
  EXPECT_EQ((*dets)[1].image_id, 9);
  EXPECT_EQ((*dets)[1].score, 1e-3);
  auto empty = parse_coco_results(" [ ] ", "dets.json");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
}

// The error for `text` as a results file (results=true) or an instances file mentions every string in `want`.
void expect_error(bool results, const std::string& text, std::vector<std::string> want) {
  Status s = results ? parse_coco_results(text, "f.json").status() : parse_coco_instances(text, "f.json").status();
  ASSERT_FALSE(s.is_ok()) << text;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  want.push_back("f.json");
  for (const auto& w : want) EXPECT_NE(s.message().find(w), std::string::npos) << "'" << w << "' not in: " << s.message();
}

TEST(CocoJson, ResultErrorsSayWhatAndWhere) {
  expect_error(true, "", {"not valid JSON"});
  expect_error(true, "[{\"image_id\": 1,", {"not valid JSON", "line 1"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": NaN}])",
               {"not valid JSON", "NaN and Infinity"});
  expect_error(true, R"({"images": []})", {"must be a JSON array", "annotations file"});
  expect_error(true, R"([1, 2])", {"[0] must be an object"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}])",
               {"results[0]", "missing required field 'score'"});
  expect_error(true, R"([{"image_id": "1", "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1}])",
               {"'image_id' must be an integer, got a string"});
  expect_error(true, R"([{"image_id": 1.5, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1}])",
               {"'image_id' must be an integer, got 1.5"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3], "score": 1}])",
               {"'bbox' must be an array of 4 numbers", "got 3 elements"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, "3", 4], "score": 1}])",
               {"non-numbers"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": {"x": 1}, "score": 1}])", {"got an object"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [10, 10, 5, -3], "score": 1}])",
               {"negative size", "not corners"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [1e12, 0, 1, 1], "score": 1}])",
               {"outside the accepted range"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1e999}])",
               {"not valid JSON", "1e999"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": "0.5"}])",
               {"'score' must be a number, got a string"});
  expect_error(true, R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1},
                         {"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1}] x)",
               {"not valid JSON"});
}

TEST(CocoJson, InstanceErrorsSayWhatAndWhere) {
  expect_error(false, "[]", {"must be a JSON object", "results file"});
  expect_error(false, R"({"images": [], "annotations": []})", {"no 'categories' array"});
  expect_error(false, R"({"images": {}, "annotations": [], "categories": []})", {"'images' must be an array"});
  expect_error(false, R"({"images": 3, "annotations": [], "categories": []})", {"'images' must be an array"});
  expect_error(false, R"({"images": [{"id": 1}], "annotations": [{"id": 1, "image_id": 1, "bbox": [0,0,1,1]}],
                          "categories": [{"id": 1}]})",
               {"annotations[0] (id 1)", "missing required field 'category_id'"});
  expect_error(false, R"({"images": [{"id": 1}, {"id": 1}], "annotations": [], "categories": []})",
               {"duplicate image id 1"});
  expect_error(false, R"({"images": [{"id": 1}], "annotations": [], "categories": [{"id": 2}, {"id": 2}]})",
               {"duplicate category id 2"});
  expect_error(false, R"({"images": [{"id": 1}], "categories": [{"id": 1}], "annotations": [
                   {"id": 4, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1]},
                   {"id": 4, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1]}]})",
               {"annotations[1] (id 4)", "duplicate annotation id"});
  expect_error(false, R"({"images": [{"id": 1}], "categories": [{"id": 1}], "annotations": [
                   {"id": 4, "image_id": 2, "category_id": 1, "bbox": [0,0,1,1]}]})",
               {"image_id 2 is not listed in 'images'"});
  expect_error(false, R"({"images": [{"id": 1}], "categories": [{"id": 1}], "annotations": [
                   {"id": 4, "image_id": 1, "category_id": 3, "bbox": [0,0,1,1]}]})",
               {"category_id 3 is not listed in 'categories'"});
  expect_error(false, R"({"images": [{"id": 1}], "categories": [{"id": 1}], "annotations": [
                   {"id": 4, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1], "area": -5}]})",
               {"'area' must not be negative"});
  expect_error(false, R"({"images": [{"id": 1}], "categories": [{"id": 1}], "annotations": [
                   {"id": 4, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1], "iscrowd": "no"}]})",
               {"'iscrowd' must be 0, 1 or a boolean"});
  expect_error(false, R"({"images": [{"id": 1, "width": -3}], "annotations": [], "categories": []})",
               {"images[0] (id 1)", "'width' is out of range"});
}

TEST(CocoJson, LimitsAreEnforced) {
  CocoLimits lim;
  lim.max_detections = 2;
  const char* three = R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1},
                          {"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1},
                          {"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1}])";
  auto r = parse_coco_results(three, "d.json", lim);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("more than 2 detections"), std::string::npos);
  // Deep nesting in skipped fields is streamed, not recursed.
  std::string deep = R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1, "x": )";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}]";
  EXPECT_TRUE(parse_coco_results(deep, "d.json").has_value());
}

TEST(CocoJson, MissingFileIsNotFound) {
  auto r = load_coco_results("/nonexistent/dets.json");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(CocoJson, WriteReadRoundTripIsExact) {
  std::vector<CocoDetection> dets(3);
  dets[0] = {42, 18, {0.1, 1e-7, 123456.789, 1.0 / 3.0}, 0.123456789012345678};
  dets[1] = {1, 1, {0, 0, 0, 0}, 0};
  dets[2] = {-5, 90, {-3.25, 5e5, 2, 3}, 1};
  const std::string dir = test::temp_dir("coco_json");
  const std::string path = dir + "/dets.json";
  ASSERT_TRUE(write_coco_results(path, dets).is_ok());
  auto back = load_coco_results(path);
  ASSERT_TRUE(back.has_value()) << back.status().to_string();
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*back)[i].image_id, dets[i].image_id);
    EXPECT_EQ((*back)[i].category_id, dets[i].category_id);
    for (int k = 0; k < 4; ++k) EXPECT_EQ((*back)[i].bbox[k], dets[i].bbox[k]);
    EXPECT_EQ((*back)[i].score, dets[i].score);
  }
  EXPECT_NE(coco_results_to_json(dets).find("\"bbox\": [0.1, 1e-07, 123456.789, 0.3333333333333333]"),
            std::string::npos)
      << coco_results_to_json(dets);
  EXPECT_EQ(coco_results_to_json({}), "[\n]\n");
}

TEST(CocoCategories, Coco80To91) {
  const auto& ids = coco80_to_coco91();
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 90);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i - 1], ids[i]);
  for (int64_t missing : {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}) {
    EXPECT_EQ(std::find(ids.begin(), ids.end(), missing), ids.end()) << missing;
  }
  EXPECT_EQ(ids[11], 13);  // stop sign
  EXPECT_EQ(ids[79], 90);  // toothbrush
}

TEST(CocoCategories, ClassToCategoryIds) {
  CocoDataset ds;
  for (int64_t id : {30, 10, 20}) ds.categories.push_back({id, ""});
  auto sorted = class_to_category_ids(ClassMapping::kSorted, ds, 2);
  ASSERT_TRUE(sorted.has_value());
  EXPECT_EQ(*sorted, (std::vector<int64_t>{10, 20}));
  EXPECT_FALSE(class_to_category_ids(ClassMapping::kSorted, ds, 4).has_value());
  EXPECT_FALSE(class_to_category_ids(ClassMapping::kCoco80To91, ds, 20).has_value());
  auto coco = class_to_category_ids(ClassMapping::kCoco80To91, ds, 80);
  ASSERT_TRUE(coco.has_value());
  EXPECT_EQ((*coco)[79], 90);
  auto identity = class_to_category_ids(ClassMapping::kIdentity, ds, 3);
  EXPECT_EQ(*identity, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(*parse_class_mapping("coco80"), ClassMapping::kCoco80To91);
  EXPECT_FALSE(parse_class_mapping("coco91").has_value());
}

TEST(CocoCategories, ToCocoDetections) {
  std::vector<Detection> dets(2);
  dets[0] = {0.1f, 2.f, 10.6f, 22.f, 0.9f, 1, 0};
  dets[1] = {5.f, 5.f, 5.f, 9.f, 0.25f, 0, 1};
  auto out = to_coco_detections(dets, {139, 285}, {1, 3});
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  EXPECT_EQ((*out)[0].image_id, 139);
  EXPECT_EQ((*out)[0].category_id, 3);
  EXPECT_EQ((*out)[0].bbox[0], 0.1);  // the float 0.1f becomes the double 0.1 (its shortest decimal)
  EXPECT_EQ((*out)[0].bbox[2], 10.5);
  EXPECT_EQ((*out)[0].score, 0.9);
  EXPECT_EQ((*out)[1].image_id, 285);
  EXPECT_EQ((*out)[1].bbox[2], 0.0);
  EXPECT_EQ((*out)[1].bbox[3], 4.0);
  dets[1].class_id = 2;
  EXPECT_FALSE(to_coco_detections(dets, {139, 285}, {1, 3}).has_value());
}

}  // namespace
}  // namespace qd
