// qdeploy sensitivity end to end on the shipped ModelBN and a few Fashion-MNIST images: the table, --json (parsed
// back), --svg (one bar per layer and sweep), --auto-fallback and --precision-out (read back by the engine); and its
// usage errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "tasks/fmnist.h"
#include "e2e/cli_util.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

bool have_fmnist() { return fs::exists(std::string(kFmnistDefaultDir) + "/t10k-labels-idx1-ubyte.gz"); }

TEST(SensitivityCli, ModelBnSnrOnFashionMnist) {
  if (!have_fmnist()) GTEST_SKIP() << "Fashion-MNIST not installed: run scripts/setup.sh (dataset-fashion-mnist)";
  const std::string dir = test::temp_dir("sens_cli");
  const std::string model = test::source_dir() + "/models/model_bn.onnx";
  // Scales calibrated on the fly (minmax, 16 train images); SNR on 4 test images; a budget above the all-INT8 SNR
  // (about 34 dB) that one or two layers in float reach.
  const CliResult r = run_cli(dir, "sensitivity " + model + " --fmnist " + kFmnistDefaultDir +
                                    " --batches 4 --batch-size 1 --algo minmax --calib-batches 16 --json " + dir +
                                    "/s.json --svg " + dir + "/s.svg --auto-fallback 37 --precision-out " + dir +
                                    "/p.json --save-cache " + dir + "/c.cache -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("auto-fallback"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;  // -q

  const auto j = nlohmann::json::parse(slurp(dir + "/s.json"));
  EXPECT_EQ(j["metric"], "snr");
  EXPECT_EQ(j["images"], 4);
  EXPECT_TRUE(j["fp32"].is_null());  // identical to itself: infinite SNR
  const double all_int8 = j["all_int8"].get<double>();
  EXPECT_GT(all_int8, 10.0);
  EXPECT_LT(all_int8, 37.0);
  EXPECT_NEAR(j["all_int8_snr_per_output"]["output"].get<double>(), all_int8, 1e-9);
  ASSERT_EQ(j["layers"].size(), 5u);  // 4 Conv + 1 Gemm
  std::set<int> ranks;
  double macs_share = 0;
  for (const auto& l : j["layers"]) {
    EXPECT_TRUE(l["metric_layer_float"].is_number()) << l.dump();
    EXPECT_TRUE(l["metric_only_layer_int8"].is_number()) << l.dump();
    EXPECT_NEAR(l["delta_vs_all_int8"].get<double>(), l["metric_layer_float"].get<double>() - all_int8, 1e-9);
    // One INT8 layer alone costs less than all of them.
    EXPECT_GT(l["metric_only_layer_int8"].get<double>(), all_int8);
    ranks.insert(l["rank"].get<int>());
    macs_share += l["macs_share"].get<double>();
  }
  EXPECT_EQ(ranks, (std::set<int>{1, 2, 3, 4, 5}));
  EXPECT_NEAR(macs_share, 1.0, 1e-9);
  const auto& fb = j["auto_fallback"];
  EXPECT_TRUE(fb["reached"].get<bool>());
  EXPECT_GE(fb["metric"].is_null() ? INFINITY : fb["metric"].get<double>(), 37.0);
  EXPECT_GE(fb["float_layers"].size(), 1u);
  EXPECT_LT(fb["int8_macs_share"].get<double>(), 1.0);
  // The most sensitive layer is the first one kept in float.
  for (const auto& l : j["layers"]) {
    if (l["rank"] == 1) {
      EXPECT_EQ(l["name"], fb["float_layers"][0]);
    }
  }

  const std::string svg = slurp(dir + "/s.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(count(svg, "class=\"bar\""), 10u);  // 5 layers x 2 sweeps
  EXPECT_EQ(count(svg, "</svg>"), 1u);

  const auto p = nlohmann::json::parse(slurp(dir + "/p.json"));
  EXPECT_EQ(p["fp16_nodes"], fb["float_layers"]);
  EXPECT_GE(p["int8_tensor_scales"].size(), 5u);
  EXPECT_NE(slurp(dir + "/c.cache").find("TRT-"), std::string::npos);
  // The precision JSON is a --precision-config: the engine keeps exactly those layers in float.
  const CliResult inspect =
      run_cli(dir, "inspect " + model + " --precision int8 --precision-config " + dir + "/p.json");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(count(inspect.out, "float (asked)"), fb["float_layers"].size()) << inspect.out;
  fs::remove_all(dir);
}

TEST(SensitivityCli, UsageErrors) {
  const std::string dir = test::temp_dir("sens_cli_err");
  const std::string model = test::source_dir() + "/models/model_bn.onnx";
  CliResult r = run_cli(dir, "sensitivity " + model + " --metric psnr --data " + dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--metric must be snr, map or top1"), std::string::npos) << r.err;
  r = run_cli(dir, "sensitivity " + model);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no activation scales"), std::string::npos) << r.err;
  r = run_cli(dir, "sensitivity " + model + " --calib-cache " + dir + "/absent.cache --data " + dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_cli(dir, "sensitivity " + model + " --metric map --fmnist /nonexistent --precision-out x.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--auto-fallback"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace qd
