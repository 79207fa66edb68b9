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

// The fields every --json holds, checked for consistency: ranks 1..N in the order of the "layer in float" metric,
// deltas, MAC shares summing to 1 when every layer was swept, and the fallback's MAC share = 1 - the shares of its
// float layers (every layer has a scale here, so all of them start in INT8).
void check_sensitivity_json(const nlohmann::json& j, double budget, bool all_layers_swept) {
  const double fp32 = j["fp32"].get<double>(), all_int8 = j["all_int8"].get<double>();
  EXPECT_EQ(j["unit"], "percent");
  EXPECT_DOUBLE_EQ(j["int8_macs_share"].get<double>(), 1.0);
  const auto& layers = j["layers"];
  ASSERT_GE(layers.size(), 1u);
  std::vector<const nlohmann::json*> by_rank(layers.size(), nullptr);
  double macs_share = 0;
  for (const auto& l : layers) {
    const int r = l["rank"].get<int>();
    ASSERT_GE(r, 1);
    ASSERT_LE(r, static_cast<int>(layers.size()));
    EXPECT_EQ(by_rank[r - 1], nullptr) << "rank " << r << " twice";
    by_rank[r - 1] = &l;
    EXPECT_NEAR(l["delta_vs_all_int8"].get<double>(), l["metric_layer_float"].get<double>() - all_int8, 1e-9);
    EXPECT_GE(l["metric_only_layer_int8"].get<double>(), 0.0);
    EXPECT_LE(l["metric_only_layer_int8"].get<double>(), 100.0);
    macs_share += l["macs_share"].get<double>();
  }
  for (size_t r = 1; r < by_rank.size(); ++r) {
    EXPECT_GE((*by_rank[r - 1])["metric_layer_float"].get<double>(), (*by_rank[r])["metric_layer_float"].get<double>())
        << "rank " << r;
  }
  const auto& fb = j["auto_fallback"];
  EXPECT_DOUBLE_EQ(fb["budget"].get<double>(), budget);
  EXPECT_NEAR(fb["target"].get<double>(), fp32 - budget, 1e-9);
  EXPECT_EQ(fb["reached"].get<bool>(), fb["metric"].get<double>() >= fb["target"].get<double>());
  ASSERT_EQ(fb["metrics"].size(), fb["float_layers"].size());
  if (!fb["metrics"].empty()) EXPECT_DOUBLE_EQ(fb["metrics"].back().get<double>(), fb["metric"].get<double>());
  else EXPECT_DOUBLE_EQ(fb["metric"].get<double>(), all_int8);
  double float_share = 0;
  for (size_t k = 0; k < fb["float_layers"].size(); ++k) {
    EXPECT_EQ(fb["float_layers"][k], (*by_rank[k])["name"]) << "the fallback follows the ranking";
    float_share += (*by_rank[k])["macs_share"].get<double>();
  }
  EXPECT_NEAR(fb["int8_macs_share"].get<double>(), 1.0 - float_share, 1e-9);
  if (all_layers_swept) EXPECT_NEAR(macs_share, 1.0, 1e-9);
  else EXPECT_LT(macs_share, 1.0);
}

// --metric top1 on a small Fashion-MNIST folder (16 train images to calibrate on, 48 test images): FP32 and all-INT8
// top-1 are what `qdeploy eval --fmnist` gives for the same model, scales and images, and the fallback's layers in
// float (its --precision-out) give its metric.
TEST(SensitivityCli, Top1AgreesWithEval) {
  if (!have_fmnist()) GTEST_SKIP() << "Fashion-MNIST not installed: run scripts/setup.sh (dataset-fashion-mnist)";
  auto train = load_fmnist(kFmnistDefaultDir, "train");
  auto test = load_fmnist(kFmnistDefaultDir, "test");
  ASSERT_TRUE(train && test);
  const std::string dir = test::temp_dir("sens_top1");
  const std::string fm = dir + "/fm";
  fs::create_directories(fm);
  constexpr int kTrain = 16, kTest = 48;
  write_idx(fm + "/train-images-idx3-ubyte", {kTrain, 28, 28}, train->images.data(), size_t{kTrain} * 28 * 28);
  write_idx(fm + "/train-labels-idx1-ubyte", {kTrain}, train->labels.data(), kTrain);
  write_idx(fm + "/t10k-images-idx3-ubyte", {kTest, 28, 28}, test->images.data(), size_t{kTest} * 28 * 28);
  write_idx(fm + "/t10k-labels-idx1-ubyte", {kTest}, test->labels.data(), kTest);
  const std::string model = test::source_dir() + "/models/model_bn.onnx";
  // Scales clipped on purpose (the 90th percentile) so that INT8 costs many points and the layers differ, and a
  // budget of 0.5 points, so that the ranking and the fallback have work to do.
  const CliResult r = run_cli(dir, "sensitivity " + model + " --metric top1 --fmnist " + fm + " --algo percentile " +
                                       "--percentile 90 --calib-batches 16 --save-cache " + dir + "/c.cache --json " +
                                       dir + "/s.json --auto-fallback 0.5 --precision-out " + dir + "/p.json -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(dir + "/s.json"));
  EXPECT_EQ(j["metric"], "top1");
  EXPECT_EQ(j["images"], kTest);
  ASSERT_EQ(j["layers"].size(), 5u);  // 4 Conv + 1 Gemm
  check_sensitivity_json(j, 0.5, true);
  EXPECT_LT(j["all_int8"].get<double>(), j["fp32"].get<double>() - 10);
  EXPECT_GE(j["auto_fallback"]["float_layers"].size(), 1u);

  auto eval_top1 = [&](const std::string& flags) {
    const CliResult e = run_cli(dir, "eval " + model + " --fmnist " + fm + " --json -q" + flags);
    EXPECT_EQ(e.exit_code, 0) << e.err;
    const auto je = nlohmann::json::parse(e.out);
    EXPECT_EQ(je["images"], kTest);
    return 100 * je["top1"].get<double>();
  };
  EXPECT_NEAR(j["fp32"].get<double>(), eval_top1(""), 1e-9);
  const std::string int8 = " --precision int8 --int8-mode fake";
  EXPECT_NEAR(j["all_int8"].get<double>(), eval_top1(int8 + " --calib-cache " + dir + "/c.cache"), 1e-9);
  EXPECT_NEAR(j["auto_fallback"]["metric"].get<double>(), eval_top1(int8 + " --precision-config " + dir + "/p.json"),
              1e-9);
  fs::remove_all(dir);
}

// --metric map on two FMNIST-Det val scenes with the shipped cache, sweeping the Detect head's three convs: FP32 and
// all-INT8 mAP50-95 are `qdeploy eval`'s (its default val letterbox, conf 0.001, IoU 0.65), in percent, and the
// fallback's float layers as --fp32-layers give its metric.
TEST(SensitivityCli, MapAgreesWithEval) {
  if (!have_fmnist()) GTEST_SKIP() << "Fashion-MNIST not installed: run scripts/setup.sh (dataset-fashion-mnist)";
  const std::string dir = test::temp_dir("sens_map");
  CliResult d = run_cli(dir, "dataset fmnist-det --split val --count 2 --seed 0 --quiet --out " + dir + "/val");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const std::string model = test::source_dir() + "/models/yolov5n_fmnist_det.onnx";
  const std::string cache = test::source_dir() + "/models/yolov5n_fmnist_det.cache";
  const std::string data =
      " --images " + dir + "/val/images --annotations " + dir + "/val/annotations/instances_val.json";
  const CliResult r = run_cli(dir, "sensitivity " + model + " --metric map" + data + " --calib-cache " + cache +
                                       " --layers '/model.24/.*' --auto-fallback 0 --json " + dir + "/s.json -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(dir + "/s.json"));
  EXPECT_EQ(j["metric"], "map");
  EXPECT_EQ(j["images"], 2);
  ASSERT_EQ(j["layers"].size(), 3u);
  for (const auto& l : j["layers"]) EXPECT_EQ(l["name"].get<std::string>().rfind("/model.24/", 0), 0u) << l.dump();
  check_sensitivity_json(j, 0.0, false);
  EXPECT_LT(j["all_int8"].get<double>(), j["fp32"].get<double>());  // a budget of 0: the fallback adds layers

  auto eval_map = [&](const std::string& flags) {
    const CliResult e = run_cli(dir, "eval " + model + data + " --json -q" + flags);
    EXPECT_EQ(e.exit_code, 0) << e.err;
    return 100 * nlohmann::json::parse(e.out)["stats"]["AP"].get<double>();
  };
  const double fp32 = eval_map("");
  EXPECT_GT(fp32, 10.0);  // the detector finds the items
  EXPECT_NEAR(j["fp32"].get<double>(), fp32, 1e-6);
  const std::string int8 = " --precision int8 --int8-mode fake --calib-cache " + cache;
  EXPECT_NEAR(j["all_int8"].get<double>(), eval_map(int8), 1e-6);
  std::string float_layers;
  for (const auto& l : j["auto_fallback"]["float_layers"]) {
    float_layers += (float_layers.empty() ? "" : ",") + l.get<std::string>();
  }
  if (!float_layers.empty()) {
    EXPECT_NEAR(j["auto_fallback"]["metric"].get<double>(), eval_map(int8 + " --fp32-layers '" + float_layers + "'"),
                1e-6);
  }
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
