// inspect --target cuda: the fusions the CUDA builder's passes make of the shipped detector, as text and JSON; the
// target's answers (plan/target.h): the nodes it cannot run, and INT8 nodes it runs in float.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "e2e/cli_util.h"
#include "onnx/onnx_builder.h"
#include "test_util.h"

namespace qd {
namespace {

using namespace test;  // e2e/cli_util.h
using namespace test::onnxb;

TEST(InspectCli, CudaTargetListsTheFusions) {
  const std::string dir = temp_dir("inspect_fusions");
  const std::string det = source_dir() + "/models/yolov5n_fmnist_det.onnx";
  CliResult r = run_cli(dir, "inspect " + det + " --target cuda --layers");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fusions (CUDA builder): 0 BatchNormalization folded into convs, 57 conv activations, "
                       "7 residual Adds (57 FusedConv)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("/model.0/conv/Conv (Silu) + /model.0/act/Sigmoid + /model.0/act/Mul"), std::string::npos);
  r = run_cli(dir, "inspect " + det + " --target cuda --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fusions"]["conv_activations"], 57);
  EXPECT_EQ(j["fusions"]["conv_residuals"], 7);
  EXPECT_EQ(j["fusions"]["fused_convs"].size(), 57u);
  EXPECT_EQ(j["fusions"]["pool_chains"], 0);  // fp32 plans pool with the generic kernels
  EXPECT_EQ(j["fusions"]["slice_concats"], 3);  // the Detect head's three decodes
  EXPECT_EQ(j["layouts"]["fast_nodes"], 0);      // fp32: every node in the ONNX form
  EXPECT_EQ(j["layouts"]["reformats"].size(), 0u);
  // fp16 (and INT8) plans run SPPF's three pools as one chain.
  r = run_cli(dir, "inspect " + det + " --target cuda --precision fp16 --layers");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(57 FusedConv), 1 max-pool chains, 0 GELUs, 3 slice/concat decodes"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("/model.24/Concat (SliceConcat, 3 segments) + /model.24/Slice + /model.24/Mul + "),
            std::string::npos)
      << r.out;
  // The layout plan: the image is the one reformat (fp32 NCHW -> the stem conv's NHWC fp16).
  EXPECT_NE(r.out.find("layouts (CUDA builder): 76 nodes on fast layers, 16 in the ONNX form; 1 reformat\n"
                       "  images -> fast for /model.0/conv/Conv"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("/model.9/m/MaxPool (MaxPoolChain, 3 pools) + /model.9/m_1/MaxPool + /model.9/m_2/MaxPool"),
            std::string::npos)
      << r.out;
  // The layout plan as a picture: one box per node, one reformat mark.
  r = run_cli(dir, "inspect " + det + " --target cuda --precision fp16 --svg " + dir + "/layouts.svg");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string svg = slurp(dir + "/layouts.svg");
  const auto occurrences = [&](const std::string& s) {
    size_t n = 0;
    for (size_t at = svg.find(s); at != std::string::npos; at = svg.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(occurrences("class=\"node\""), 92u);
  EXPECT_EQ(occurrences("fill=\"#76b900\" stroke"), 76u);  // fast
  EXPECT_EQ(occurrences("class=\"reformat\""), 1u);
  r = run_cli(dir, "inspect " + det + " --svg " + dir + "/x.svg");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("or --target cuda (layouts)"), std::string::npos) << r.err;
  // The CPU engine runs the graph as imported: no fusion summary.
  r = run_cli(dir, "inspect " + det + " --target cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("fusions"), std::string::npos);
}

// x -> Einsum (no CUDA kernel) -> Relu -> y; MatMul with a graph input as its weights.
onnx::ModelProto einsum_model() {
  onnx::ModelProto m = empty_model(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", {2, 3});
  add_input(g, "w", {3, 4});
  attr_string(add_node(g, "Einsum", {"x"}, {"t"}, "sum"), "equation", "ij->ji");
  add_node(g, "Relu", {"t"}, {"y"}, "relu");
  add_node(g, "MatMul", {"x", "w"}, {"z"}, "mm");
  add_output(g, "y");
  add_output(g, "z");
  return m;
}

TEST(InspectCli, TargetsSayWhatTheyCannotRun) {
  const std::string dir = temp_dir("inspect_targets");
  const std::string model = quote(write_model(dir, einsum_model()));
  CliResult r = run_cli(dir, "inspect " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("unsupported on cpu: none"), std::string::npos) << r.out;
  r = run_cli(dir, "inspect " + model + " --target cuda");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("unsupported on cuda: 1 node(s)\n  sum (Einsum): Einsum has no CUDA kernel"), std::string::npos)
      << r.out;
  r = run_cli(dir, "inspect " + model + " --target cuda --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["target"], "cuda");
  ASSERT_EQ(j["unsupported"].size(), 1u);
  EXPECT_EQ(j["unsupported"][0]["node"], "sum");
  EXPECT_FALSE(j["unsupported"][0]["source"].get<std::string>().empty());
}

// The detector's INT8 convs all run in INT8 on both targets.
TEST(InspectCli, ShippedDetectorInt8OnBothTargets) {
  const std::string dir = temp_dir("inspect_int8_targets");
  const std::string det = source_dir() + "/models/yolov5n_fmnist_det.onnx";
  const std::string cache = source_dir() + "/models/yolov5n_fmnist_det.cache";
  for (const char* target : {"cpu", "cuda"}) {
    CliResult r = run_cli(dir, "inspect " + det + " --precision int8 --calib-cache " + cache + " --json --target " +
                                   target);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["unsupported"].empty()) << target;
    EXPECT_TRUE(j["int8_in_float"].empty()) << target;
  }
}

}  // namespace
}  // namespace qd
