// FMNIST-Det generator: byte-identical output for a seed, valid boxes, every class and every COCO area range.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/file_io.h"
#include "tasks/fmnist_det.h"
#include "tasks/parallel.h"
#include "test_util.h"

namespace qd {
namespace {

const FmnistSplit* test_split() {
  static const Expected<FmnistSplit> ds = load_fmnist(kFmnistDefaultDir, "test");
  return ds ? &*ds : nullptr;
}

#define REQUIRE_FMNIST()                                                                                    \
  const FmnistSplit* ds = test_split();                                                                     \
  if (!ds) {                                                                                                \
    FAIL() << "Fashion-MNIST is missing from " << kFmnistDefaultDir                                          \
           << ": run scripts/setup.sh (it installs the Debian package dataset-fashion-mnist)";              \
  }

std::map<std::string, std::string> read_tree(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      files[std::filesystem::relative(e.path(), dir).string()] = *read_file(e.path().string());
    }
  }
  return files;
}

TEST(FmnistDet, SameSeedGivesIdenticalFiles) {
  REQUIRE_FMNIST();
  FmnistDetGenerateOptions opt;
  opt.split = "val";
  opt.count = 5;
  opt.seed = 42;
  opt.yolo_labels = true;
  opt.out_dir = test::temp_dir("fdet_a");
  opt.threads = 1;
  ASSERT_TRUE(generate_fmnist_det(*ds, opt, nullptr).is_ok());
  const std::string first = opt.out_dir;
  opt.out_dir = test::temp_dir("fdet_b");
  opt.threads = 3;  // the thread count must not matter
  FmnistDetStats stats;
  ASSERT_TRUE(generate_fmnist_det(*ds, opt, &stats).is_ok());
  const auto a = read_tree(first), b = read_tree(opt.out_dir);
  EXPECT_EQ(a.size(), 5u + 5u + 1u);  // images, YOLO labels, annotations
  EXPECT_TRUE(a == b);
  EXPECT_EQ(stats.images, 5);

  // The COCO file has what evaluators need.
  const auto j = nlohmann::json::parse(a.at("annotations/instances_val.json"));
  ASSERT_EQ(j["images"].size(), 5u);
  EXPECT_EQ(j["images"][0]["file_name"], "000001.jpg");
  EXPECT_EQ(j["images"][0]["width"], 640);
  EXPECT_EQ(j["categories"].size(), 10u);
  EXPECT_EQ(j["categories"][9]["name"], "Ankle boot");
  EXPECT_EQ(static_cast<int>(j["annotations"].size()), stats.objects);
  for (const auto& ann : j["annotations"]) {
    for (const char* key : {"id", "image_id", "category_id", "bbox", "area", "iscrowd"}) EXPECT_TRUE(ann.contains(key));
  }
  // Another seed gives other scenes.
  const DetScene s0 = render_fmnist_det_scene(*ds, fmnist_index_by_class(*ds), 42, 1, 0, FmnistDetOptions{});
  const DetScene s1 = render_fmnist_det_scene(*ds, fmnist_index_by_class(*ds), 43, 1, 0, FmnistDetOptions{});
  const DetScene s2 = render_fmnist_det_scene(*ds, fmnist_index_by_class(*ds), 42, 0, 0, FmnistDetOptions{});
  EXPECT_NE(s0.image.data, s1.image.data);
  EXPECT_NE(s0.image.data, s2.image.data);
}

TEST(FmnistDet, BoxesClassesAndAreaRanges) {
  REQUIRE_FMNIST();
  const auto by_class = fmnist_index_by_class(*ds);
  const FmnistDetOptions opt;
  FmnistDetStats stats;
  for (int i = 0; i < 50; ++i) {
    const DetScene s = render_fmnist_det_scene(*ds, by_class, 0, 1, i, opt);
    ASSERT_EQ(s.image.width, 640);
    ASSERT_EQ(s.image.height, 640);
    EXPECT_GE(s.objects.size(), 1u);
    EXPECT_LE(s.objects.size(), 12u);
    for (const DetObject& o : s.objects) {
      EXPECT_GE(o.category_id, 1);
      EXPECT_LE(o.category_id, 10);
      EXPECT_GE(o.x, 0);
      EXPECT_GE(o.y, 0);
      EXPECT_GT(o.w, 2);
      EXPECT_GT(o.h, 2);
      EXPECT_LE(o.x + o.w, 640);
      EXPECT_LE(o.y + o.h, 640);
      EXPECT_GT(o.area, 0);
      EXPECT_LE(o.area, o.w * o.h);
      EXPECT_EQ(ds->labels[static_cast<size_t>(o.source_index)] + 1, o.category_id);
    }
    stats.add(s.objects);
  }
  for (int c = 0; c < 10; ++c) EXPECT_GT(stats.per_class[c], 0) << fmnist_class_names()[c];
  for (int r = 0; r < 3; ++r) EXPECT_GT(stats.by_area[r], stats.objects / 10) << "area range " << r;
  EXPECT_NE(format_stats(stats).find("| small (< 32^2) |"), std::string::npos);
}

TEST(FmnistDet, RejectsBadOptions) {
  REQUIRE_FMNIST();
  FmnistDetGenerateOptions opt;
  opt.out_dir = test::temp_dir("fdet_bad");
  opt.split = "test";
  EXPECT_FALSE(generate_fmnist_det(*ds, opt, nullptr).is_ok());
  opt.split = "val";
  opt.count = 0;
  EXPECT_FALSE(generate_fmnist_det(*ds, opt, nullptr).is_ok());
}

TEST(ParallelFor, ReturnsTheFirstErrorByIndex) {
  std::vector<int> seen(100, 0);
  const Status s = parallel_for(100, 4, "", [&](int i) -> Status {
    seen[static_cast<size_t>(i)] = 1;
    return i == 30 || i == 70 ? invalid("bad " + std::to_string(i)) : Status::ok();
  });
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "bad 30");
  EXPECT_TRUE(parallel_for(10, 0, "", [&](int) { return Status::ok(); }).is_ok());
}

}  // namespace
}  // namespace qd
