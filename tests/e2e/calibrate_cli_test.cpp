// qdeploy calibrate preprocesses its images as qdeploy eval does: minmax caches from images the command has to
// letterbox (or fit into a classifier's input) equal the caches from the same images already preprocessed by hand
// into the model's input size, where every preprocessing is the identity. Covers calibrate's --letterbox (default val,
// as eval's), eval's --calib (its images letterboxed as eval's --letterbox says) and classifier image folders (eval
// --classes' aspect-keeping fit, not a plain resize).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "e2e/cli_util.h"
#include "tasks/image_io.h"
#include "tasks/model_input.h"
#include "tasks/preprocess.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

class CalibrateCli : public CliTest {
 protected:
  CalibrateCli() : CliTest("calibrate_cli_") {}
};

// "" when the two caches are equal, else their first differing lines (a whole cache is 250 lines).
std::string cache_diff(const std::string& a, const std::string& b) {
  if (a == b) return "";
  size_t i = 0, line = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) {
    if (a[i] == '\n') line = i + 1;
    ++i;
  }
  auto line_at = [&](const std::string& s) { return s.substr(line, s.find('\n', line) - line); };
  return "'" + line_at(a) + "' vs '" + line_at(b) + "'";
}

void write_png(const std::string& path, const Image& img) {
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_TRUE(write_image(path, img).is_ok()) << path;
}

TEST_F(CalibrateCli, DetectorImagesLetterboxedAsEval) {
  const std::string model = quote(source_dir() + "/models/yolov5n_fmnist_det.onnx");
  // A 1000x600 scene: val.py shrinks it with INTER_AREA, the ultralytics letterbox with INTER_LINEAR.
  const Image img = test::pattern_image(1000, 600, 7);
  write_png(dir_ + "/wide/scene.png", img);
  for (const char* style : {"val", "ultralytics"}) {
    auto boxed = letterbox(img, *letterbox_options(style));
    ASSERT_TRUE(boxed) << boxed.status().to_string();
    write_png(dir_ + "/" + style + "/scene.png", *boxed);  // 640x640: letterboxed again, it stays as it is
  }
  auto calibrate = [&](const std::string& data, const std::string& extra, const std::string& cache) {
    const CliResult r = cli("calibrate " + model + " --data " + quote(dir_ + "/" + data) + " --algo minmax --cache " +
                            quote(dir_ + "/" + cache) + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return slurp(dir_ + "/" + cache);
  };
  const std::string by_hand_val = calibrate("val", "", "hand_val.cache");
  const std::string by_hand_ultra = calibrate("ultralytics", "", "hand_ultra.cache");
  ASSERT_FALSE(by_hand_val.empty());
  ASSERT_NE(cache_diff(by_hand_val, by_hand_ultra), "");  // the two styles give other scales on this scene
  EXPECT_EQ(cache_diff(calibrate("wide", "", "default.cache"), by_hand_val), "");
  EXPECT_EQ(cache_diff(calibrate("wide", " --letterbox val", "val.cache"), by_hand_val), "");
  EXPECT_EQ(cache_diff(calibrate("wide", " --letterbox ultralytics", "ultra.cache"), by_hand_ultra), "");

  // eval --calib calibrates on its images letterboxed as it evaluates: by default val, else its --letterbox.
  const std::string cats = R"([{"id": 1, "name": "c1"}, {"id": 2, "name": "c2"}, {"id": 3, "name": "c3"},
    {"id": 4, "name": "c4"}, {"id": 5, "name": "c5"}, {"id": 6, "name": "c6"}, {"id": 7, "name": "c7"},
    {"id": 8, "name": "c8"}, {"id": 9, "name": "c9"}, {"id": 10, "name": "c10"}])";
  ASSERT_TRUE(write_file_atomic(dir_ + "/gt.json", R"({"images": [{"id": 1, "file_name": "scene.png", "width": 1000,
    "height": 600}], "annotations": [], "categories": )" + cats + "}")
                  .is_ok());
  for (const auto& [flag, want] : {std::pair<std::string, std::string>{"", by_hand_val},
                                   {" --letterbox ultralytics", by_hand_ultra}}) {
    const CliResult r = cli("eval " + model + " --images " + quote(dir_ + "/wide") + " --annotations " +
                            quote(dir_ + "/gt.json") + " --precision int8 --int8-mode fake --calib " +
                            quote(dir_ + "/wide") + " --calib-algo minmax --calib-cache " +
                            quote(dir_ + "/eval.cache") + " --json -q" + flag);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(cache_diff(slurp(dir_ + "/eval.cache"), want), "") << "eval" << flag;
  }

  const CliResult bad = cli("calibrate " + model + " --data " + quote(dir_ + "/wide") + " --letterbox yolo --cache " +
                            quote(dir_ + "/bad.cache"));
  expect_usage_error(bad, "--letterbox must be val, ultralytics or cudla");
}

TEST_F(CalibrateCli, ClassifierImagesFitAsEvalClasses) {
  const std::string model = quote(source_dir() + "/models/model_bn.onnx");  // input [1,3,32,32]
  // Eight 28x28 images, and the same images as eval --classes lays them out for a 32x32 network: the 28x28 box
  // centred on black (2 pixels each side), which calibrate takes as they are.
  for (int i = 0; i < 8; ++i) {
    const Image img = test::pattern_image(28, 28, 100 + static_cast<uint32_t>(i));
    Image fitted(32, 32, 0);
    for (int y = 0; y < 28; ++y) std::memcpy(fitted.pixel(2, 2 + y), img.pixel(0, y), img.row_bytes());
    write_png(dir_ + "/raw/" + std::to_string(i) + ".png", img);
    write_png(dir_ + "/fitted/" + std::to_string(i) + ".png", fitted);
  }
  auto calibrate = [&](const std::string& data) {
    const CliResult r = cli("calibrate " + model + " --data " + quote(dir_ + "/" + data) + " --algo minmax --cache " +
                            quote(dir_ + "/" + data + ".cache"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return slurp(dir_ + "/" + data + ".cache");
  };
  const std::string fitted = calibrate("fitted");
  ASSERT_FALSE(fitted.empty());
  EXPECT_EQ(cache_diff(calibrate("raw"), fitted), "");
}

}  // namespace
}  // namespace qd
