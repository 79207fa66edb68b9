// qdeploy qat2ptq end to end on the shipped QAT detector: the four files, then inspect's precision table with the
// written cache and config; and the usage errors (a float model, a bad header, a bad config).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "e2e/cli_util.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

TEST(Qat2PtqCli, ConvertsTheShippedQatModel) {
  const std::string dir = test::temp_dir("qat2ptq_cli");
  const std::string out = dir + "/ptq";
  const std::string qat = test::source_dir() + "/models/yolov5n_fmnist_det_qat.onnx";
  CliResult r = run_cli(dir, "qat2ptq " + qat + " -o " + out + " --cache-header TRT-8601-EntropyCalibration2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("removed 120 Q/DQ pairs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tensors have no scale"), std::string::npos) << r.out;
  for (const char* f : {"model.onnx", "model.cache", "model.json", "model.layer_precisions.txt"}) {
    EXPECT_TRUE(fs::is_regular_file(out + "/" + f)) << f;
  }
  EXPECT_EQ(slurp(out + "/model.cache").rfind("TRT-8601-EntropyCalibration2\nimages: ", 0), 0u);

  r = run_cli(dir, "inspect " + out + "/model.onnx --precision int8 --calib-cache " + out + "/model.cache");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("60 int8, 0 float; 100.0% of MACs in int8"), std::string::npos) << r.out;
  // The config's fp16 nodes are the Detect head's decoding, after its Convs: every Conv stays int8.
  r = run_cli(dir, "inspect " + out + "/model.onnx --precision int8 --precision-config " + out + "/model.json " +
                   "--fp32-layers /model.24/m.0/Conv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("59 int8, 1 float"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("float (asked)"), std::string::npos) << r.out;
}

TEST(Qat2PtqCli, UsageErrors) {
  const std::string dir = test::temp_dir("qat2ptq_cli_errors");
  const std::string fp32 = test::source_dir() + "/models/model_bn.onnx";
  CliResult r = run_cli(dir, "qat2ptq " + fp32 + " -o " + dir + "/out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no QuantizeLinear/DequantizeLinear pairs"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/out/model.onnx"));
  r = run_cli(dir, "qat2ptq " + fp32 + " -o " + dir + "/out --cache-header TRT8600");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cache-header"), std::string::npos) << r.err;

  std::ofstream(dir + "/bad.json") << R"({"int8_tensor_scales": {"input": 0}})";
  r = run_cli(dir, "inspect " + fp32 + " --precision int8 --precision-config " + dir + "/bad.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(R"($.int8_tensor_scales["input"]: scale 0 is not finite and positive)"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace qd
