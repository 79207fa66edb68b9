// qdeploy calibrate --algo auto / --bias-correction / --adaround, and qdeploy compare, end to end on ModelBN with a
// few Fashion-MNIST images.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "e2e/cli_util.h"
#include "quant/calib_cache.h"
#include "tasks/fmnist.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

bool have_fmnist() { return fs::exists(std::string(kFmnistDefaultDir) + "/t10k-labels-idx1-ubyte.gz"); }

class CalibCompareCli : public CliTest {
 protected:
  CalibCompareCli() : CliTest("calib_compare_") {}
  void SetUp() override {
    CliTest::SetUp();
    if (!have_fmnist()) GTEST_SKIP() << "Fashion-MNIST not installed: run scripts/setup.sh (dataset-fashion-mnist)";
    auto train = load_fmnist(kFmnistDefaultDir, "train");
    auto test = load_fmnist(kFmnistDefaultDir, "test");
    ASSERT_TRUE(train && test);
    fm_ = dir_ + "/fm";
    fs::create_directories(fm_);
    write_idx(fm_ + "/train-images-idx3-ubyte", {16, 28, 28}, train->images.data(), size_t{16} * 28 * 28);
    write_idx(fm_ + "/train-labels-idx1-ubyte", {16}, train->labels.data(), 16);
    write_idx(fm_ + "/t10k-images-idx3-ubyte", {4, 28, 28}, test->images.data(), size_t{4} * 28 * 28);
    write_idx(fm_ + "/t10k-labels-idx1-ubyte", {4}, test->labels.data(), 4);
  }
  nlohmann::json json(const std::string& path) { return nlohmann::json::parse(slurp(path)); }
  std::string fm_;
  const std::string model_ = source_dir() + "/models/model_bn.onnx";
};

TEST_F(CalibCompareCli, AutoCalibrationReportsEachTensor) {
  const CliResult r = cli("calibrate " + model_ + " --fmnist " + fm_ + " --algo auto --cache " + dir_ +
                          "/a.cache --json " + dir_ + "/a.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("auto chose, per tensor:"), std::string::npos) << r.out;
  const auto j = json(dir_ + "/a.json");
  ASSERT_GT(j["auto_choices"].size(), 5u);
  const std::set<std::string> algos{"minmax", "entropy", "percentile", "mse"};
  const std::string cache = slurp(dir_ + "/a.cache");
  for (const auto& t : j["auto_choices"]) {
    EXPECT_TRUE(algos.count(t["chosen"].get<std::string>())) << t.dump();
    const double chosen = t["candidates"][t["chosen"].get<std::string>()]["mse"].get<double>();
    for (const auto& a : algos) EXPECT_LE(chosen, t["candidates"][a]["mse"].get<double>()) << t.dump();
    EXPECT_NE(cache.find(t["tensor"].get<std::string>() + ": "), std::string::npos) << t["tensor"];
  }
  EXPECT_TRUE(j["float_head_tensors"].empty());  // a classifier has no detection head
  // All 16 images calibrate: nothing is left to check the whole model on.
  EXPECT_NE(r.out.find("auto: no data beyond the calibration batches"), std::string::npos) << r.out;
  EXPECT_FALSE(j.contains("auto_model"));
}

// With data beyond --batches, auto checks the whole model on it: its per-tensor picks and each algorithm for every
// tensor, by output SNR; the cache holds the configuration kept, which is the best one, or the per-tensor picks when
// no algorithm beats them by 0.5 dB.
TEST_F(CalibCompareCli, AutoChecksTheWholeModelOnHeldOutData) {
  // ModelBN takes batches of 1: 4 images calibrate, the other 12 are held out.
  const CliResult r = cli("calibrate " + model_ + " --fmnist " + fm_ + " --algo auto --batches 4 --cache " + dir_ +
                          "/h.cache --json " + dir_ + "/h.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("auto, the whole model on 12 held-out images"), std::string::npos) << r.out;
  const auto j = json(dir_ + "/h.json");
  ASSERT_TRUE(j.contains("auto_model")) << j.dump();
  const auto& m = j["auto_model"];
  EXPECT_EQ(m["held_out_images"], 12);
  const auto& snr = m["output_snr_db"];
  ASSERT_EQ(snr.size(), 5u) << m.dump();
  std::string best = "per-tensor";
  for (const char* a : {"minmax", "entropy", "percentile", "mse"}) {
    ASSERT_TRUE(snr.contains(a)) << m.dump();
    if (best == "per-tensor" || snr[a].get<double>() > snr[best].get<double>()) best = a;
  }
  if (snr[best].get<double>() < snr["per-tensor"].get<double>() + 0.5) best = "per-tensor";
  EXPECT_EQ(m["kept"], best) << m.dump();
  auto cache = read_calib_cache(dir_ + "/h.cache");
  ASSERT_TRUE(cache) << cache.status().to_string();
  const std::map<std::string, float> scales(cache->scales.begin(), cache->scales.end());
  for (const auto& t : j["auto_choices"]) {
    const std::string algo = best == "per-tensor" ? t["chosen"].get<std::string>() : best;
    const double amax = t["candidates"][algo]["amax"].get<double>();
    const float want = static_cast<float>((amax > 0 ? amax : 1.0) / 127.0);
    EXPECT_FLOAT_EQ(scales.at(t["tensor"].get<std::string>()), want) << t["tensor"] << " " << algo;
  }
}

TEST_F(CalibCompareCli, AdjustedWeightsExportUnderTheSameNames) {
  const CliResult plain = cli("calibrate " + model_ + " --fmnist " + fm_ + " --algo mse --cache " + dir_ + "/c.cache");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CliResult r = cli("calibrate " + model_ + " --fmnist " + fm_ + " --algo mse --cache " + dir_ +
                          "/c2.cache --bias-correction --adaround -o " + dir_ + "/adj.onnx --json " + dir_ + "/r.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json(dir_ + "/r.json");
  ASSERT_EQ(j["weight_adjustments"].size(), 4u);  // the 4 convs; the Gemm is not adjusted
  EXPECT_EQ(slurp(dir_ + "/c.cache"), slurp(dir_ + "/c2.cache"));  // the scales do not depend on the adjustment
  for (const auto& l : j["weight_adjustments"]) {
    EXPECT_LE(l["err_adjusted"].get<double>(), l["err_nearest"].get<double>()) << l.dump();
  }
  // The adjusted model has other weights under the same names: it runs with the same cache, layer for layer.
  EXPECT_NE(slurp(dir_ + "/adj.onnx"), slurp(model_));
  auto layers = [&](const std::string& model) {
    const CliResult c = cli("compare " + model + " --fmnist " + fm_ + " --precision int8 --calib-cache " + dir_ +
                            "/c.cache --json " + dir_ + "/cmp.json");
    EXPECT_EQ(c.exit_code, 0) << c.err;
    return json(dir_ + "/cmp.json")["layers"].size();
  };
  EXPECT_EQ(layers(dir_ + "/adj.onnx"), layers(model_));
  // Layers the deployment keeps in float are left out of the fit (a bias corrected for INT8 is wrong in float).
  const CliResult fl = cli("calibrate " + model_ + " --fmnist " + fm_ + " --cache " + dir_ + "/c3.cache " +
                           "--bias-correction -o " + dir_ + "/fl.onnx --float-layers /cnn/cnn.0/Conv --json " + dir_ +
                           "/fl.json");
  ASSERT_EQ(fl.exit_code, 0) << fl.err;
  const auto jf = json(dir_ + "/fl.json");
  ASSERT_EQ(jf["weight_adjustments"].size(), 3u);
  for (const auto& l : jf["weight_adjustments"]) EXPECT_NE(l["node"], "/cnn/cnn.0/Conv");
  expect_usage_error(cli("calibrate " + model_ + " --fmnist " + fm_ + " --cache " + dir_ + "/x.cache " +
                         "--float-layers /cnn/cnn.0/Conv"),
                     "--float-layers");
  // -o needs one of the two flags, and the two flags need -o.
  expect_usage_error(cli("calibrate " + model_ + " --fmnist " + fm_ + " --cache " + dir_ + "/x.cache --adaround"),
                     "-o FILE.onnx");
  expect_usage_error(cli("calibrate " + model_ + " --fmnist " + fm_ + " --cache " + dir_ + "/x.cache -o " + dir_ +
                         "/x.onnx"),
                     "--bias-correction");
}

TEST_F(CalibCompareCli, CompareTableJsonSvgAndBisect) {
  ASSERT_EQ(cli("calibrate " + model_ + " --fmnist " + fm_ + " --algo percentile --percentile 90 --cache " + dir_ +
                "/c.cache").exit_code,
            0);
  const std::string int8 = " --precision int8 --calib-cache " + dir_ + "/c.cache";
  const CliResult r = cli("compare " + model_ + " --fmnist " + fm_ + int8 + " --json " + dir_ + "/c.json --svg " +
                          dir_ + "/c.svg --bisect --target-snr 10");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json(dir_ + "/c.json");
  EXPECT_EQ(j["inputs"], 4);
  int convs = 0, quantized = 0;
  for (const auto& l : j["layers"]) {
    convs += l["op"] == "Conv";
    quantized += l["int8_scale"].get<double>() > 0;
    EXPECT_LE(l["cosine"].get<double>(), 1.0 + 1e-9);
    EXPECT_GE(l["saturated_share"].get<double>(), 0.0);
  }
  EXPECT_EQ(convs, 4);
  EXPECT_GE(quantized, 5);  // each conv's and the Gemm's input
  // Clipped at the 90th percentile, some quantized tensors saturate.
  bool saturated = false;
  for (const auto& l : j["layers"]) saturated |= l["saturated_share"].get<double>() > 0.01;
  EXPECT_TRUE(saturated);
  const auto& b = j["bisect"];
  EXPECT_LT(b["all_int8_db"].get<double>(), 10.0);
  EXPECT_GE(b["final_db"].get<double>(), 10.0);
  EXPECT_GE(b["float_layers"].size(), 1u);
  EXPECT_LT(b["float_layers"].size(), 5u);
  EXPECT_NE(slurp(dir_ + "/c.svg").find("<rect class=\"bar\""), std::string::npos);

  // A CPU plan is compared as it runs: against the reference's INT8 every tensor is identical.
  ASSERT_EQ(cli("build " + model_ + int8 + " -o " + dir_ + "/m.plan").exit_code, 0);
  const CliResult p = cli("compare " + dir_ + "/m.plan --fmnist " + fm_ + " --reference int8 --json " + dir_ + "/p.json");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto jp = json(dir_ + "/p.json");
  ASSERT_FALSE(jp["layers"].empty());
  for (const auto& l : jp["layers"]) EXPECT_TRUE(l["snr_db"].is_null()) << l.dump();  // null: +inf, no error
  // Against FP32, the plan's table is the model's.
  const CliResult q = cli("compare " + dir_ + "/m.plan --fmnist " + fm_ + " --json " + dir_ + "/q.json");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const CliResult m = cli("compare " + model_ + " --fmnist " + fm_ + int8 + " --json " + dir_ + "/m.json");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(json(dir_ + "/q.json")["layers"], json(dir_ + "/m.json")["layers"]);
  expect_usage_error(cli("compare " + model_ + " --fmnist " + fm_ + " --target-snr 20"), "--bisect");
}

}  // namespace
}  // namespace qd
