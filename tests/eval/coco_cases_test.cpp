// The C++ evaluator against tests/eval/coco_reference.py (an independent numpy re-implementation of pycocotools'
// COCOeval) on the seeded random cases that tests/eval/make_coco_cases.py wrote to tests/eval/data/.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "eval/coco_eval.h"
#include "test_util.h"

namespace qd {
namespace {

class CocoReferenceCase : public ::testing::TestWithParam<const char*> {};

TEST_P(CocoReferenceCase, MatchesReference) {
  const std::string base = test::source_dir() + "/tests/eval/data/" + GetParam();
  auto gt = load_coco_instances(base + "_gt.json");
  ASSERT_TRUE(gt.has_value()) << gt.status().to_string();
  auto dets = load_coco_results(base + "_dets.json");
  ASSERT_TRUE(dets.has_value()) << dets.status().to_string();
  auto text = read_file(base + "_expected.json");
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  const auto expected = nlohmann::json::parse(*text);

  auto r = evaluate_coco_bbox(*gt, *dets);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  const auto& stats = expected["stats"];
  ASSERT_EQ(stats.size(), 12u);
  double max_diff = 0;
  for (size_t i = 0; i < 12; ++i) {
    const double want = stats[i].get<double>();
    EXPECT_NEAR(r->stats[i], want, 1e-9) << kCocoStatNames[i];
    max_diff = std::max(max_diff, std::fabs(r->stats[i] - want));
  }
  // Same algorithm, same float64 operations, same numpy summation: the numbers agree to the last bit.
  EXPECT_EQ(max_diff, 0.0);
  const auto per_cat = coco_per_category_ap(*r);
  const auto& want_cat = expected["per_category_ap"];
  ASSERT_EQ(per_cat.size(), want_cat.size());
  for (size_t k = 0; k < per_cat.size(); ++k) EXPECT_EQ(per_cat[k], want_cat[k].get<double>()) << k;
}

INSTANTIATE_TEST_SUITE_P(Cases, CocoReferenceCase, ::testing::Values("random", "dense", "grid", "ids"),
                         [](const auto& info) { return std::string(info.param); });

TEST(CocoReferenceCases, DenseCaseExercisesTheHundredCut) {
  // The dense case only tests the per-image cut if some image has more than 100 detections of one category.
  auto dets = load_coco_results(test::source_dir() + "/tests/eval/data/dense_dets.json");
  ASSERT_TRUE(dets.has_value());
  std::map<std::pair<int64_t, int64_t>, int> count;
  int most = 0;
  for (const auto& d : *dets) most = std::max(most, ++count[{d.image_id, d.category_id}]);
  EXPECT_GT(most, 100);
}

TEST(CocoReferenceCases, FileAndMemoryAgree) {
  // Writing the results and reading them back changes nothing.
  const std::string base = test::source_dir() + "/tests/eval/data/random";
  auto gt = load_coco_instances(base + "_gt.json");
  auto dets = load_coco_results(base + "_dets.json");
  ASSERT_TRUE(gt.has_value() && dets.has_value());
  const std::string path = test::temp_dir("coco_cases") + "/dets.json";
  ASSERT_TRUE(write_coco_results(path, *dets).is_ok());
  auto back = load_coco_results(path);
  ASSERT_TRUE(back.has_value());
  auto a = evaluate_coco_bbox(*gt, *dets);
  auto b = evaluate_coco_bbox(*gt, *back);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->stats, b->stats);
  EXPECT_EQ(a->precision, b->precision);
}

}  // namespace
}  // namespace qd
