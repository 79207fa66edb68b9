// qdeploy eval --classes DIR (image-folder classification) against eval --fmnist on the same Fashion-MNIST images:
// a tree of PNGs (raw 28x28 glyphs and the 32x32 exports) must give the same top-1, and bad trees clear errors.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "e2e/cli_util.h"
#include "tasks/fmnist.h"
#include "tasks/image_io.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

// "0_T-shirt_top": the label first so that sorted folder names give the label order ('/' cannot be in a name).
std::string class_dir(int label) {
  std::string n = std::to_string(label) + "_" + fmnist_class_names()[static_cast<size_t>(label)];
  for (char& ch : n) {
    if (ch == '/' || ch == ' ') ch = '_';
  }
  return n;
}

TEST(EvalClasses, MatchesFmnistTop1) {
  const std::string model = std::string(QD_SOURCE_DIR) + "/models/model_bn.onnx";
  if (!fs::exists(model) || !fs::is_directory(kFmnistDefaultDir)) GTEST_SKIP() << "needs models/ and Fashion-MNIST";
  auto ds = load_fmnist(kFmnistDefaultDir, "test");
  ASSERT_TRUE(ds) << ds.status().to_string();
  const std::string dir = test::temp_dir("eval_classes");
  constexpr int kN = 120;
  // The same kN images as a small IDX split (for --fmnist) and as a PNG tree (for --classes): even images as the
  // raw 28x28 glyph, odd ones as the 32x32 export; folders named so that sorting gives the label order.
  fs::create_directories(dir + "/idx");
  write_idx(dir + "/idx/t10k-images-idx3-ubyte", {kN, 28, 28}, ds->images.data(), size_t{kN} * 28 * 28);
  write_idx(dir + "/idx/t10k-labels-idx1-ubyte", {kN}, ds->labels.data(), kN);
  for (int i = 0; i < kN; ++i) {
    const int label = ds->labels[static_cast<size_t>(i)];
    const std::string cls = dir + "/tree/" + class_dir(label);
    fs::create_directories(cls);
    Image img;
    if (i % 2 == 0) {
      img = Image(28, 28);
      for (int p = 0; p < 28 * 28; ++p) img.data[p * 3] = img.data[p * 3 + 1] = img.data[p * 3 + 2] = ds->image(i)[p];
    } else {
      img = fmnist_image_32(*ds, i);
    }
    ASSERT_TRUE(write_image(cls + "/" + std::to_string(i) + ".png", img).is_ok());
  }
  const CliResult f = run_cli(dir, "eval " + quote(model) + " --fmnist " + quote(dir + "/idx") + " --json -q");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const CliResult c = run_cli(dir, "eval " + quote(model) + " --classes " + quote(dir + "/tree") + " --json -q");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const auto jf = nlohmann::json::parse(f.out), jc = nlohmann::json::parse(c.out);
  EXPECT_EQ(jc["images"], kN);
  EXPECT_EQ(jc["images"], jf["images"]);
  EXPECT_DOUBLE_EQ(jc["top1"].get<double>(), jf["top1"].get<double>());
  EXPECT_DOUBLE_EQ(jc["top5"].get<double>(), jf["top5"].get<double>());
  EXPECT_GT(jc["top1"].get<double>(), 0.7);
  ASSERT_TRUE(jc["per_class"].is_array());
  int64_t total = 0;
  for (const auto& p : jc["per_class"]) total += p["images"].get<int64_t>();
  EXPECT_EQ(total, kN);

  // --labels fixes the order: the same names in label order give the same result.
  std::string names;
  for (int l = 0; l < kFmnistClasses; ++l) names += class_dir(l) + "\n";
  ASSERT_TRUE(write_file_atomic(dir + "/labels.txt", names).is_ok());
  const CliResult l = run_cli(dir, "eval " + quote(model) + " --classes " + quote(dir + "/tree") + " --labels " +
                                       quote(dir + "/labels.txt") + " --json -q");
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(l.out)["top1"].get<double>(), jc["top1"].get<double>());

  // Errors: a missing folder, an empty one, a class folder without images.
  CliResult e = run_cli(dir, "eval " + quote(model) + " --classes " + quote(dir + "/absent"));
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("is not a folder"), std::string::npos) << e.err;
  fs::create_directories(dir + "/empty");
  e = run_cli(dir, "eval " + quote(model) + " --classes " + quote(dir + "/empty"));
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("no class folders"), std::string::npos) << e.err;
  fs::create_directories(dir + "/tree/zz_none");
  e = run_cli(dir, "eval " + quote(model) + " --classes " + quote(dir + "/tree"));
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("zz_none"), std::string::npos) << e.err;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace qd
