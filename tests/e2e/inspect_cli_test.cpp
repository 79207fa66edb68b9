// inspect --target cuda: the fusions the CUDA builder's passes make of the shipped detector, as text and JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "e2e/cli_util.h"
#include "test_util.h"

namespace qd {
namespace {

using namespace test;  // e2e/cli_util.h

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
  // The CPU engine runs the graph as imported: no fusion summary.
  r = run_cli(dir, "inspect " + det + " --target cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("fusions"), std::string::npos);
}

}  // namespace
}  // namespace qd
