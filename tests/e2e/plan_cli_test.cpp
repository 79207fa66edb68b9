// Plans through the CLI: build -> inspect -> run, and every damaged or foreign plan ends with exit code 2 and a line
// "error: ..." that says what is wrong (never a crash).
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "e2e/cli_util.h"
#include "onnx/onnx_builder.h"
#include "plan/plan_file.h"
#include "test_util.h"

namespace qd {
namespace {

using namespace test::onnxb;
namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

class PlanCli : public test::CliTest {
 protected:
  PlanCli() : CliTest("plan_cli_") {}
  void SetUp() override {
    CliTest::SetUp();
    onnx::ModelProto m = conv_relu_model();
    auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->mutable_dim(0)->set_dim_param("N");  // a dynamic batch
    model_ = write_model(dir_, m);
    plan_ = dir_ + "/m.plan";
  }
  // Builds plan_ from model_; returns the plan's bytes.
  std::string build(const std::string& flags = "") {
    const CliResult r = cli("build " + quote(model_) + " -o " + quote(plan_) + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return slurp(plan_);
  }
  std::string write(const std::string& name, const std::string& bytes) { return write_bytes(dir_ + "/" + name, bytes); }

  std::string model_, plan_;
};

TEST_F(PlanCli, BuildInspectRun) {
  const CliResult b = cli("build " + quote(model_) + " -o " + quote(plan_));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("built " + plan_), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("x  float32[?x3x8x8]"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("layers with MACs: 1"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("target cpu, precision fp32, format v4"), std::string::npos) << b.out;

  const CliResult i = cli("inspect " + quote(plan_));
  ASSERT_EQ(i.exit_code, 0) << i.err;
  for (const char* phrase : {"qdeploy plan format v4", "target: cpu", "precision: fp32", "x  min ?x3x8x8",
                             "graph", "build_options", "conv"}) {
    EXPECT_NE(i.out.find(phrase), std::string::npos) << phrase << " in\n" << i.out;
  }
  const CliResult j = cli("inspect " + quote(plan_) + " --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto json = nlohmann::json::parse(j.out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << j.out;
  EXPECT_EQ(json["target"], "cpu");
  EXPECT_EQ(json["format_version"], kPlanFormatVersion);
  EXPECT_EQ(json["outputs"][0]["name"], "y");
  EXPECT_EQ(json["layers"][0]["name"], "conv");
  EXPECT_EQ(json["layers"][0]["precision"], "fp32");

  // The plan and the model give the same bytes.
  const std::string batch2 = " --shapes x:2x3x8x8 --output-dir ";
  ASSERT_EQ(cli("run " + quote(plan_) + batch2 + quote(dir_ + "/plan_out")).exit_code, 0);
  ASSERT_EQ(cli("run " + quote(model_) + batch2 + quote(dir_ + "/model_out")).exit_code, 0);
  const std::string a = slurp(dir_ + "/plan_out/y.npy"), m = slurp(dir_ + "/model_out/y.npy");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, m);
  expect_usage_error(cli("run " + quote(plan_)), "has dynamic dims");
}

TEST_F(PlanCli, Int8PlanKeepsItsScales) {
  const std::string cache = write("c.cache", "TRT-8600-EntropyCalibration2\nx: 3c010204\n");
  build("--precision int8 --int8-mode fake --calib-cache " + quote(cache));
  fs::remove(cache);  // the plan holds the scales
  const CliResult i = cli("inspect " + quote(plan_));
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("precision: int8"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("1 int8, 0 float"), std::string::npos) << i.out;
  const CliResult r = cli("run " + quote(plan_) + " --shapes x:1x3x8x8");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("int8"), std::string::npos) << r.out;
}

TEST_F(PlanCli, BuildFlagsWithAPlan) {
  build();
  expect_usage_error(cli("inspect " + quote(plan_) + " --precision int8"), "is a fp32 plan, but --precision int8");
  expect_usage_error(cli("inspect " + quote(plan_) + " --fp32-layers conv"), "--fp32-layers cannot apply");
  EXPECT_EQ(cli("inspect " + quote(plan_) + " --precision fp32 --device cpu").exit_code, 0);
  expect_usage_error(cli("build " + quote(plan_) + " -o " + quote(dir_ + "/again.plan")), "already a plan");
  expect_usage_error(cli("calibrate " + quote(plan_) + " --data " + quote(dir_) + " --cache " + quote(dir_ + "/c")),
                     "needs the ONNX model");
  // Float layers are an INT8 build's choice: elsewhere every layer is float already.
  expect_usage_error(cli("build " + quote(model_) + " -o " + quote(dir_ + "/f.plan") + " --fp16-layers conv"),
                     "with --precision fp32 every layer runs in fp32 already");
}

// --tactic-sources: qdeploy and/or cudnn; anything else is refused before any build, and a plan keeps its sources.
TEST_F(PlanCli, TacticSources) {
  const std::string out = " -o " + quote(dir_ + "/t.plan");
  expect_usage_error(cli("build " + quote(model_) + out + " --tactic-sources qdeploy,cublas"),
                     "--tactic-sources takes qdeploy and/or cudnn (comma separated), got 'cublas'");
  EXPECT_EQ(cli("build " + quote(model_) + out + " --tactic-sources qdeploy,cudnn").exit_code, 0);
  expect_usage_error(cli("inspect " + quote(dir_ + "/t.plan") + " --tactic-sources qdeploy"),
                     "--tactic-sources cannot apply");
}

// --calib DATA: the build calibrates first, exactly as `qdeploy calibrate` does (the same cache, byte for byte), and
// writes the cache to --calib-cache; without it the cache is a temporary file and the plan keeps the scales.
TEST_F(PlanCli, CalibrateAtBuildTime) {
  const std::string samples = quote(test::source_dir() + "/models/samples");
  const std::string c1 = dir_ + "/build.cache", c2 = dir_ + "/calibrate.cache";
  build("--precision int8 --calib " + samples + " --calib-algo minmax --calib-cache " + quote(c1));
  ASSERT_EQ(cli("calibrate " + quote(model_) + " --data " + samples + " --algo minmax --cache " + quote(c2)).exit_code,
            0);
  EXPECT_EQ(slurp(c1), slurp(c2));
  EXPECT_NE(slurp(c1).find("TRT-8600-MinMaxCalibration"), std::string::npos) << slurp(c1);
  build("--precision int8 --calib " + samples + " --calib-batches 1");
  EXPECT_NE(cli("inspect " + quote(plan_)).out.find("100.0% of MACs in int8"), std::string::npos);

  const std::string out = " -o " + quote(dir_ + "/c.plan");
  expect_usage_error(cli("build " + quote(model_) + out + " --calib " + samples), "add --precision int8");
  expect_usage_error(cli("build " + quote(model_) + out + " --precision int8 --calib " + quote(dir_ + "/none")),
                     "--calib: ");
  expect_usage_error(cli("build " + quote(model_) + out + " --precision int8 --calib " + samples + " --calib-algo kl"),
                     "minmax");
  expect_usage_error(cli("inspect " + quote(plan_) + " --calib " + samples), "--calib/--calib-algo/--calib-batches");
}

TEST_F(PlanCli, IoFormatFlags) {
  const std::string out = " -o " + quote(dir_ + "/f.plan");
  expect_usage_error(cli("build " + quote(model_) + out + " --input-format int8:nhwc"), "are for --device cuda");
  expect_usage_error(cli("build " + quote(model_) + out + " --device cuda --output-format fp16:chw16"),
                     "the layout must be nchw or nhwc");
  EXPECT_EQ(cli("build " + quote(model_) + out + " --input-format fp32:nchw").exit_code, 0) << "the ONNX form";
  expect_usage_error(cli("inspect " + quote(dir_ + "/f.plan") + " --output-format fp16"),
                     "--input-format/--output-format cannot apply");
}

TEST_F(PlanCli, ShapeProfileFlags) {
  build("--min x:1x3x8x8 --opt x:2x3x8x8 --max x:4x3x8x8");
  const CliResult i = cli("inspect " + quote(plan_));
  EXPECT_NE(i.out.find("x  min 1x3x8x8  opt 2x3x8x8  max 4x3x8x8"), std::string::npos) << i.out;
  EXPECT_EQ(cli("run " + quote(plan_) + " --shapes x:4x3x8x8").exit_code, 0);
  expect_usage_error(cli("run " + quote(plan_) + " --shapes x:5x3x8x8"), "outside the engine's shape profile");
  const std::string out = " -o " + quote(dir_ + "/p.plan");
  expect_usage_error(cli("build " + quote(model_) + out + " --min x:1x3x8x8 --opt x:8x3x8x8 --max x:4x3x8x8"),
                     "min <= opt <= max");
  expect_usage_error(cli("build " + quote(model_) + out + " --min x:1x3x8x8 --opt x:2x3x8x8"), "needs all of");
  expect_usage_error(cli("build " + quote(model_) + out + " --min x:1x3x8 --opt x:2x3x8x8 --max x:2x3x8x8"),
                     "same rank");
  expect_usage_error(cli("build " + quote(model_) + out + " --min x --opt x:2x3x8x8 --max x:2x3x8x8"), "bad --min");
}

// qdeploy bench on the CPU (the GPU's summary adds GPU compute and copy times, checked on the GPU machine): a
// summary per batch size with throughput and latency percentiles, the same in --json, from a model or its plan;
// bad values and the CUDA-only exports and --streams are usage errors.
TEST_F(PlanCli, Bench) {
  build();
  const std::string js = dir_ + "/bench.json";
  for (const std::string& m : {model_, plan_}) {
    const CliResult r = cli("bench " + quote(m) + " --batch 1,3 --warmup 1 --iterations 5 --json " + quote(js));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* phrase : {"batch 1: throughput", "batch 3: throughput", "latency", "median", "p99"}) {
      EXPECT_NE(r.out.find(phrase), std::string::npos) << phrase << " in\n" << r.out;
    }
    const auto doc = nlohmann::json::parse(slurp(js), nullptr, false);
    ASSERT_FALSE(doc.is_discarded());
    ASSERT_EQ(doc["results"].size(), 2u);
    EXPECT_EQ(doc["iterations"], 5);
    for (const auto& res : doc["results"]) {
      EXPECT_GT(res["throughput_ips"].get<double>(), 0.0);
      const auto& lat = res["latency_ms"];
      EXPECT_LE(lat["min"].get<double>(), lat["median"].get<double>());
      EXPECT_LE(lat["median"].get<double>(), lat["p99"].get<double>());
    }
  }
  const std::vector<std::string> bad_flags = {"--iterations 0", "--iterations 1 --batch 0",
                                              "--iterations 1 --export-profile " + quote(dir_ + "/p.json"),
                                              "--iterations 1 --export-layer-info " + quote(dir_ + "/l.json"),
                                              "--iterations 1 --export-timeline " + quote(dir_ + "/t.json"),
                                              "--iterations 1 --streams 2", "--iterations 1 --streams 0"};
  for (const std::string& bad : bad_flags) {
    const CliResult r = cli("bench " + quote(model_) + " --warmup 0 " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << bad << ": " << r.err;
  }
}

TEST_F(PlanCli, TruncatedPlan) {
  const std::string bytes = build();
  const std::string p = write("t.plan", bytes.substr(0, bytes.size() / 2));
  expect_usage_error(cli("run " + quote(p)), "plan is corrupted or truncated");
  expect_usage_error(cli("inspect " + quote(p)), "plan is corrupted or truncated");
  expect_usage_error(cli("run " + quote(write("tiny.plan", bytes.substr(0, 10))) + " --shapes x:1x3x8x8"),
                     "corrupted or truncated");
}

TEST_F(PlanCli, FlippedByte) {
  std::string bytes = build();
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
  expect_usage_error(cli("run " + quote(write("f.plan", bytes)) + " --shapes x:1x3x8x8"), "checksum mismatch");
}

TEST_F(PlanCli, WrongMagic) {
  std::string bytes = build();
  bytes[7] = 9;  // "QDPLAN" kept: recognised as a damaged plan
  expect_usage_error(cli("inspect " + quote(write("m1.plan", bytes))), "not a qdeploy plan");
  bytes[0] = 'X';  // not a plan at all: read as ONNX, which it is not either
  expect_usage_error(cli("inspect " + quote(write("m2.plan", bytes))), "error");
}

TEST_F(PlanCli, FutureFormatVersion) {
  std::string bytes = build();
  bytes[8] = 7;
  expect_usage_error(cli("run " + quote(write("v.plan", bytes)) + " --shapes x:1x3x8x8"),
                     "plan format v7, this qdeploy reads v4: rebuild the plan with `qdeploy build`");
}

TEST_F(PlanCli, CudaPlanWithoutAGpu) {
  PlanFile p;
  p.header.qdeploy_version = "0.1.0";
  p.header.target = "cuda";
  p.header.sm = 86;
  p.header.cuda_runtime_version = 12020;
  p.add("kernels", "not real kernels");
  ASSERT_TRUE(write_plan(plan_, p).is_ok());
  const CliResult i = cli("inspect " + quote(plan_));
  EXPECT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("target: cuda, sm_86 (compute capability 8.6), CUDA runtime 12.2"), std::string::npos) << i.out;
  // Without the CUDA backend or without a GPU, or a GPU engine that rejects the fake section: a clean error.
  const CliResult r = cli("run " + quote(plan_));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
}

// How a CUDA plan runs each batch it timed (cuda.kernels' "split:" entries), listed by batch; a damaged section is an
// error, not a crash.
TEST_F(PlanCli, CudaPlanBatchSplits) {
  PlanFile p;
  p.header.qdeploy_version = "0.1.0";
  p.header.target = "cuda";
  p.header.sm = 90;
  p.add("cuda.kernels", R"({"conv:n32:c64:k128": "tma_i8_128x128_k128_s3",
                            "split:n32:images=32x3x640x640;": "lanes2_step",
                            "split:n8:images=8x3x640x640;mask=8x1;": "lanes2",
                            "split:n1:images=1x3x640x640;": "whole",
                            "split:n4:images=4x3x640x640;": "sideways",
                            "split:nX:images=4x3;": "whole"})");
  ASSERT_TRUE(write_plan(plan_, p).is_ok());
  const CliResult i = cli("inspect " + quote(plan_));
  ASSERT_EQ(i.exit_code, 0) << i.err;
  const size_t b1 = i.out.find("batch 1     images=1x3x640x640: the whole batch at once");
  const size_t b4 = i.out.find("batch 4     images=4x3x640x640: 'sideways', unknown to this qdeploy: rebuild the plan");
  const size_t b8 = i.out.find("batch 8     images=8x3x640x640, mask=8x1: two halves on two streams\n");
  const size_t b32 = i.out.find("batch 32    images=32x3x640x640: two halves on two streams, held in step");
  ASSERT_NE(b1, std::string::npos) << i.out;
  ASSERT_NE(b4, std::string::npos) << i.out;
  ASSERT_NE(b8, std::string::npos) << i.out;
  ASSERT_NE(b32, std::string::npos) << i.out;
  EXPECT_TRUE(b1 < b4 && b4 < b8 && b8 < b32) << "by batch:\n" << i.out;
  EXPECT_EQ(i.out.find("nX"), std::string::npos) << i.out;

  const CliResult j = cli("inspect " + quote(plan_) + " --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto js = nlohmann::json::parse(j.out);
  ASSERT_EQ(js["batch_splits"].size(), 4u) << j.out;
  EXPECT_EQ(js["batch_splits"][3]["batch"], 32);
  EXPECT_EQ(js["batch_splits"][3]["inputs"], "images=32x3x640x640");
  EXPECT_EQ(js["batch_splits"][3]["split"], "lanes2_step");

  PlanFile bad = p;
  bad.sections.clear();
  bad.add("cuda.kernels", R"({"split:n2:x=2x3;": 7})");
  ASSERT_TRUE(write_plan(plan_, bad).is_ok());
  expect_usage_error(cli("inspect " + quote(plan_)), "cuda.kernels['split:n2:x=2x3;'] is not a string");
}

}  // namespace
}  // namespace qd
