// The CLI on bad input: every malformed model, input file or flag ends with exit code 2 and a line "error: ..." on
// stderr that says what is wrong (never a crash, a signal or exit code 1).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/npy.h"
#include "e2e/cli_util.h"
#include "onnx/onnx_builder.h"
#include "ops/op_type.h"
#include "test_util.h"

namespace qd {
namespace {

using namespace test::onnxb;
namespace fs = std::filesystem;
using namespace test;  // e2e/cli_util.h

class CliErrors : public test::CliTest {
 protected:
  CliErrors() : CliTest("cli_") {}
  std::string model(const onnx::ModelProto& m) { return quote(write_model(dir_, m)); }
};

TEST_F(CliErrors, GoodModelRuns) {
  const std::string m = model(conv_relu_model());
  EXPECT_EQ(cli("inspect " + m).exit_code, 0);
  const CliResult r = cli("run " + m + " --output-dir " + quote(dir_ + "/out"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir_ + "/out/y.npy"));
}

TEST_F(CliErrors, MissingModelFile) {
  expect_usage_error(cli("inspect " + quote(dir_ + "/absent.onnx")), "no such file");
  expect_usage_error(cli("run " + quote(dir_ + "/absent.onnx")), "no such file");
}

TEST_F(CliErrors, GarbageFile) {
  // Field 1 as a length-delimited field of length 2^32 - 1.
  const char raw[] = "\x0a\xff\xff\xff\xff\x0f garbage";
  const std::string p = write_bytes(dir_ + "/model.onnx", std::string(raw, sizeof raw - 1));
  expect_usage_error(cli("inspect " + quote(p)), "not a valid ONNX model");
  expect_usage_error(cli("run " + quote(p)), "not a valid ONNX model");
}

TEST_F(CliErrors, TruncatedFile) {
  const std::string bytes = serialize(conv_relu_model());
  const std::string p = write_bytes(dir_ + "/model.onnx", bytes.substr(0, bytes.size() / 2));
  expect_usage_error(cli("run " + quote(p)), "truncated");
}

TEST_F(CliErrors, EmptyFile) { expect_usage_error(cli("inspect " + quote(write_bytes(dir_ + "/m.onnx", ""))), "empty"); }

TEST_F(CliErrors, UnsupportedOps) {
  onnx::ModelProto m = conv_relu_model();
  add_node(m.mutable_graph(), "Frobnicate", {"y"}, {"f"}, "frob");
  add_output(m.mutable_graph(), "f");
  expect_usage_error(cli("inspect " + model(m)), "'frob' (Frobnicate, opset 13)");
}

TEST_F(CliErrors, Opset99) { expect_usage_error(cli("inspect " + model(conv_relu_model(99))), "opset 99"); }

TEST_F(CliErrors, Cycle) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->set_input(0, "y");
  expect_usage_error(cli("inspect " + model(m)), "cycle");
}

TEST_F(CliErrors, ExternalDataEscapingTheFolder) {
  onnx::ModelProto m = conv_relu_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("../../etc/passwd");
  expect_usage_error(cli("run " + model(m)), "contains '..'");
}

TEST_F(CliErrors, KernelLargerThanInput) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->clear_ints();  // no padding
  for (int i = 0; i < 4; ++i) m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->add_ints(0);
  const std::string p = model(m);
  expect_usage_error(cli("run " + p + " --shapes x:1x3x2x2"), "has fixed dim 2 = 8");  // the flag disagrees
  auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(2)->set_dim_value(2);
  expect_usage_error(cli("run " + model(m)), "larger than the padded input");
}

// inspect summarizes what it can of a model whose dims are open (MACs unknown, exit 0), but a model whose nodes are
// invalid is an error like in every other command.
TEST_F(CliErrors, InspectRefusesInvalidNodes) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->add_input("c");  // Relu with two inputs
  expect_usage_error(cli("inspect " + model(m)), "Relu takes 1 to 1");
  expect_usage_error(cli("inspect " + model(m) + " --json"), "Relu takes 1 to 1");
  onnx::ModelProto open = conv_relu_model();
  open.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)
      ->set_dim_param("batch");
  const CliResult r = cli("inspect " + model(open));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MACs: unknown"), std::string::npos) << r.out;
}

TEST_F(CliErrors, BadShapesFlag) {
  expect_usage_error(cli("run " + model(conv_relu_model()) + " --shapes x:1xAx8x8"), "bad shape");
  expect_usage_error(cli("run " + model(conv_relu_model()) + " --shapes nope:1x3x8x8"), "no input named 'nope'");
}

TEST_F(CliErrors, BadInputNpy) {
  const char raw[] = "\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}";  // no shape
  const std::string npy = write_bytes(dir_ + "/x.npy", std::string(raw, sizeof raw - 1));
  expect_usage_error(cli("run " + model(conv_relu_model()) + " --input x=" + quote(npy)), "not a valid .npy file");
  // A good file of the wrong shape.
  ASSERT_TRUE(write_npy(dir_ + "/x2.npy", Tensor(DType::kFloat32, {1, 3, 4, 4})).is_ok());
  expect_usage_error(cli("run " + model(conv_relu_model()) + " --input x=" + quote(dir_ + "/x2.npy")),
                     "has fixed dim 2 = 8");
}

TEST_F(CliErrors, GatherIndexOutOfRange) {
  if (!op_from_name("Gather")) GTEST_SKIP() << "Gather is not implemented yet (src/ops/)";
  onnx::ModelProto m = empty_model();
  auto* g = m.mutable_graph();
  *g->add_initializer() = tensor_f32("table", {5, 2}, ramp(10));
  add_input(g, "idx", {1}, onnx::TensorProto::INT64);
  add_node(g, "Gather", {"table", "idx"}, {"y"}, "lookup");
  add_output(g, "y");
  ASSERT_TRUE(write_npy(dir_ + "/idx.npy", Tensor::from_i64({9})).is_ok());
  const CliResult r = cli("run " + model(m) + " --input idx=" + quote(dir_ + "/idx.npy"));
  expect_usage_error(r, "out of range");
  expect_usage_error(r, "lookup");
}

// --kernel-policy and the QD_* A/B switches the CLI maps onto it: for GPU builds, words checked before anything is
// built (so without a GPU too); the CPU ignores the switches.
TEST_F(CliErrors, KernelPolicyFlag) {
  const std::string m = model(conv_relu_model());
  const std::string plan = " -o " + quote(dir_ + "/m.plan");
  expect_usage_error(cli("build " + m + plan + " --kernel-policy no-pdl"), "it is for --device cuda");
  expect_usage_error(cli("build " + m + plan + " --device cuda --kernel-policy no-pdl,no-such"),
                     "unknown word 'no-such'");
  setenv("QD_SPLIT", "lanes4", 1);
  const CliResult bad = cli("build " + m + plan + " --device cuda");
  setenv("QD_NO_PDL", "1", 1);
  const CliResult cpu = cli("build " + m + plan);
  unsetenv("QD_SPLIT");
  unsetenv("QD_NO_PDL");
  expect_usage_error(bad, "split=lanes4");
  EXPECT_EQ(cpu.exit_code, 0) << cpu.err;
}

}  // namespace
}  // namespace qd
