// inspect --target dla and export (trt10, dla, trt11) end to end on the shipped classifiers: the seeds' placements,
// the files and trtexec lines written, and qdeploy's INT8 build of the exported Q/DQ model against its build from the
// cache (bit-identical); the usage errors.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "e2e/cli_util.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

std::string model(const char* name) { return source_dir() + "/models/" + name; }

TEST(DlaCli, InspectShowsTheSeedsPlacements) {
  const std::string dir = temp_dir("dla_inspect");
  CliResult r = run_cli(dir, "inspect " + model("model_gn.onnx") + " --target dla --precision fp16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("DLA subgraphs: 6 (limit 16 per core)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("InstanceNormalization  a normalization layer"), std::string::npos) << r.out;

  r = run_cli(dir, "inspect " + model("model_bn.onnx") + " --target dla:8.6 --precision fp16 --json --svg " +
                       dir + "/bn.svg");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["target"], "dla:8.6");
  EXPECT_EQ(j["dla_subgraphs"], 2);
  ASSERT_EQ(j["segments"].size(), 3u);
  EXPECT_EQ(j["segments"][0]["nodes"].size(), 8u);
  EXPECT_EQ(j["segments"][1]["device"], "GPU");
  EXPECT_EQ(j["segments"][1]["nodes"][0], "/pool/GlobalAveragePool");
  EXPECT_NE(slurp(dir + "/bn.svg").find("<rect class=\"segment\""), std::string::npos);
}

TEST(DlaCli, UsageErrors) {
  const std::string dir = temp_dir("dla_errors");
  expect_usage_error(run_cli(dir, "inspect " + model("model_bn.onnx") + " --target dla"), "DLA has no FP32");
  expect_usage_error(run_cli(dir, "inspect " + model("model_bn.onnx") + " --target dla:9 --precision fp16"),
                     "covered: dla:8.6");
  expect_usage_error(run_cli(dir, "inspect " + model("model_bn.onnx") + " --svg x.svg"), "add --target dla");
  expect_usage_error(run_cli(dir, "inspect " + model("model_bn.onnx") + " --target dla --precision int8"),
                     "needs activation scales");
  expect_usage_error(run_cli(dir, "export " + model("model_bn.onnx") + " --target trt9 -o " + dir + "/x"),
                     "use trt10");
  expect_usage_error(run_cli(dir, "export " + model("model_bn.onnx") + " --target trt11 --precision fp16 -o " +
                                      dir + "/x"),
                     "writes a Q/DQ model");
  expect_usage_error(run_cli(dir, "export " + model("model_bn.onnx") + " --target trt11 --float-dtype bf16 -o " +
                                      dir + "/x"),
                     "use fp16 or fp32");
  expect_usage_error(run_cli(dir, "export " + model("model_bn.onnx") + " --target trt10 --float-dtype fp32 -o " +
                                      dir + "/x"),
                     "applies to --target trt11");
}

class DlaExport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("dla_export");
    input_ = random_f32({1, 3, 32, 32}, 3, 0.f, 1.f);
    ASSERT_TRUE(write_minmax_cache(model("model_bn.onnx"), "input", input_, dir_ + "/bn.cache").is_ok());
    ASSERT_TRUE(write_npy(dir_ + "/in.npy", input_).is_ok());
  }
  std::string dir_;
  Tensor input_;
};

TEST_F(DlaExport, DlaFilesAndTrtexecLine) {
  const std::string out = dir_ + "/dla";
  CliResult r = run_cli(dir_, "export " + model("model_bn.onnx") + " --target dla -o " + out +
                                  " --precision int8 --calib-cache " + dir_ + "/bn.cache --fp16-layers /linear/Gemm");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"model.onnx", "model.cache", "model.layer_precisions.txt", "trtexec.sh", "placement.json"}) {
    EXPECT_TRUE(fs::is_regular_file(out + "/" + f)) << f;
  }
  const std::string sh = slurp(out + "/trtexec.sh");
  for (const char* flag : {"--useDLACore=0 --allowGPUFallback", "--int8 --fp16 --calib=model.cache",
                           "--inputIOFormats=int8:dla_hwc4 --outputIOFormats=fp32:chw",
                           "--precisionConstraints=obey --layerPrecisions=/linear/Gemm:fp16"}) {
    EXPECT_NE(sh.find(flag), std::string::npos) << flag << " in\n" << sh;
  }
  EXPECT_NE(slurp(out + "/model.layer_precisions.txt").find("/linear/Gemm:fp16\n"), std::string::npos);
  EXPECT_EQ(slurp(out + "/model.cache").rfind("TRT-", 0), 0u);

  r = run_cli(dir_, "export " + model("model_bn.onnx") + " --target trt10 -o " + dir_ + "/t10 --precision int8 " +
                        "--calib-cache " + dir_ + "/bn.cache");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(dir_ + "/t10/trtexec.sh").find("useDLACore"), std::string::npos);
}

// The trt11 Q/DQ model built INT8 by qdeploy equals the float model built with the cache, to the bit: with its float
// layers cast to FP16 (the default; the casts go on import) and kept in float32 (--float-dtype fp32, no casts).
TEST_F(DlaExport, QdqModelBuildsAsTheCache) {
  CliResult r = run_cli(dir_, "run " + model("model_bn.onnx") + " --precision int8 --calib-cache " + dir_ +
                                  "/bn.cache --input input=" + dir_ + "/in.npy --output-dir " + dir_ + "/b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string b = slurp(dir_ + "/b/output.npy");
  ASSERT_FALSE(b.empty());
  for (const std::string dtype : {"fp16", "fp32"}) {
    const std::string out = dir_ + "/t11_" + dtype;
    r = run_cli(dir_, "export " + model("model_bn.onnx") + " --target trt11 -o " + out + " --precision int8 " +
                          "--calib-cache " + dir_ + "/bn.cache --float-dtype " + dtype);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("5 INT8 layers: 5 activation and 5 weight quantizers"), std::string::npos) << r.out;
    const std::string onnx = slurp(out + "/model_qdq.onnx");
    EXPECT_EQ(onnx.find("/CastToFp16") != std::string::npos, dtype == "fp16");
    EXPECT_EQ(onnx.find("/CastToFp32") != std::string::npos, dtype == "fp16");
    EXPECT_NE(slurp(out + "/trtexec.sh").find("--stronglyTyped"), std::string::npos);
    r = run_cli(dir_, "run " + out + "/model_qdq.onnx --precision int8 --input input=" + dir_ + "/in.npy " +
                          "--output-dir " + out + "/a");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(slurp(out + "/a/output.npy"), b) << dtype;
  }
}

}  // namespace
}  // namespace qd
