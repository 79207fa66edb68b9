// qdeploy eval MODEL --images DIR --annotations GT.json: --img-ids runs the detector on those images only (an image
// outside them is never read), and an image of the evaluated set that is missing is an error naming it.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "e2e/cli_util.h"
#include "tasks/image_io.h"
#include "test_util.h"

namespace qd {
namespace {

using namespace test;  // e2e/cli_util.h

class EvalDetectorCli : public CliTest {
 protected:
  EvalDetectorCli() : CliTest("eval_detector_cli_") {}
};

TEST_F(EvalDetectorCli, ImgIdsRunOnlyThoseImages) {
  const std::string model = quote(source_dir() + "/models/yolov5n_fmnist_det.onnx");
  // Images 1 and 2 exist; image 3's file does not.
  std::filesystem::create_directories(dir_ + "/images");
  for (int id : {1, 2}) {
    ASSERT_TRUE(write_image(dir_ + "/images/" + std::to_string(id) + ".png",
                            test::pattern_image(320, 240, static_cast<uint32_t>(id)))
                    .is_ok());
  }
  std::string images, cats;
  for (int id = 1; id <= 3; ++id) {
    images += std::string(id > 1 ? ", " : "") + R"({"id": )" + std::to_string(id) + R"(, "file_name": ")" +
              std::to_string(id) + R"(.png", "width": 320, "height": 240})";
  }
  for (int c = 1; c <= 10; ++c) {
    cats += std::string(c > 1 ? ", " : "") + R"({"id": )" + std::to_string(c) + R"(, "name": "c)" + std::to_string(c) +
            R"("})";
  }
  ASSERT_TRUE(write_file_atomic(dir_ + "/gt.json", R"({"images": [)" + images + R"(], "annotations": [{"id": 1,
    "image_id": 2, "category_id": 3, "bbox": [10, 10, 50, 60], "area": 3000, "iscrowd": 0}], "categories": [)" + cats +
                                                       "]}")
                  .is_ok());
  const std::string base = "eval " + model + " --images " + quote(dir_ + "/images") + " --annotations " +
                           quote(dir_ + "/gt.json") + " --json -q";
  const CliResult two = cli(base + " --img-ids 1 2");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(nlohmann::json::parse(two.out)["num_images"], 2);
  const CliResult all = cli(base);
  EXPECT_EQ(all.exit_code, 2) << all.err;
  EXPECT_NE(all.err.find("3.png"), std::string::npos) << all.err;
}

}  // namespace
}  // namespace qd
