// The CLI on bad input: every malformed model, input file or flag ends with exit code 2 and a line "error: ..." on
// stderr that says what is wrong (never a crash, a signal or exit code 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/npy.h"
#include "e2e/cli_util.h"
#include "onnx/onnx_builder.h"
#include "ops/op_type.h"
#include "tasks/image_io.h"
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

// The malformed-model corpus against every command that reads a model: one defect per stage of loading (file bytes,
// protobuf, opset, op schema, node arity, graph structure, external data, shapes), each giving exit 2 and an
// "error:" line that names it, whatever the command. The commands get valid other inputs, so that the model is what
// they stumble on.
struct ModelCommand {
  std::string name;
  std::string args;  // after the model path
};

struct BadModel {
  std::string file;
  std::string bytes;
  std::string phrase;
};

// conv_relu_model with a Q/DQ pair on its input, so that qat2ptq (which wants a QAT model) reads on too:
// x -> QuantizeLinear -> DequantizeLinear -> Conv "conv" -> Relu "relu" -> y.
onnx::ModelProto qdq_conv_relu_model(int64_t opset = 13) {
  onnx::ModelProto m = conv_relu_model(opset);
  auto* g = m.mutable_graph();
  *g->add_initializer() = tensor_f32("x_scale", {}, {0.02f}, /*raw=*/false);
  onnx::TensorProto zp;
  zp.set_name("x_zp");
  zp.set_data_type(onnx::TensorProto::INT8);
  zp.add_int32_data(0);
  *g->add_initializer() = zp;
  add_node(g, "QuantizeLinear", {"x", "x_scale", "x_zp"}, {"xq"}, "quant");
  add_node(g, "DequantizeLinear", {"xq", "x_scale", "x_zp"}, {"xd"}, "dequant");
  g->mutable_node(0)->set_input(0, "xd");
  // Keep the nodes in topological order (Q, DQ, Conv, Relu): the defects below index them.
  std::rotate(g->mutable_node()->begin(), g->mutable_node()->begin() + 2, g->mutable_node()->end());
  return m;
}
constexpr int kConv = 2, kRelu = 3;

std::vector<BadModel> malformed_corpus() {
  std::vector<BadModel> out;
  const std::string good = serialize(qdq_conv_relu_model());
  out.push_back({"garbage.onnx", std::string("\x0a\xff\xff\xff\xff\x0f garbage", 13), "not a valid ONNX model"});
  out.push_back({"truncated.onnx", good.substr(0, good.size() / 2), "truncated"});
  out.push_back({"empty.onnx", "", "empty"});
  out.push_back({"opset99.onnx", serialize(qdq_conv_relu_model(99)), "opset 99"});
  onnx::ModelProto m = qdq_conv_relu_model();
  add_node(m.mutable_graph(), "Frobnicate", {"y"}, {"f"}, "frob");
  add_output(m.mutable_graph(), "f");
  out.push_back({"unsupported_op.onnx", serialize(m), "'frob' (Frobnicate, opset 13)"});
  m = qdq_conv_relu_model();
  m.mutable_graph()->mutable_node(kRelu)->add_input("c");  // Relu with two inputs
  out.push_back({"relu_two_inputs.onnx", serialize(m), "Relu takes 1 to 1"});
  m = qdq_conv_relu_model();
  m.mutable_graph()->mutable_node(kRelu)->set_input(0, "y");
  out.push_back({"cycle.onnx", serialize(m), "cycle"});
  m = qdq_conv_relu_model();
  m.mutable_graph()->mutable_node(kRelu)->set_input(0, "nowhere");
  out.push_back({"dangling_edge.onnx", serialize(m), "nowhere"});
  m = qdq_conv_relu_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("../../etc/passwd");
  out.push_back({"external_data_escape.onnx", serialize(m), "contains '..'"});
  // An 11x11 kernel over the 8x8 input padded by 1.
  m = qdq_conv_relu_model();
  *m.mutable_graph()->mutable_initializer(0) = tensor_f32("w", {4, 3, 11, 11}, ramp(4 * 3 * 11 * 11));
  m.mutable_graph()->mutable_node(kConv)->mutable_attribute(0)->clear_ints();
  for (int i = 0; i < 2; ++i) m.mutable_graph()->mutable_node(kConv)->mutable_attribute(0)->add_ints(11);
  out.push_back({"kernel_larger_than_input.onnx", serialize(m), "larger than the padded input"});
  return out;
}

// The subcommands `qdeploy --help` lists.
std::set<std::string> cli_subcommands(const CliResult& help) {
  std::set<std::string> names;
  std::istringstream in(help.out);
  std::string line;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_list = true;
    } else if (in_list && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      names.insert(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return names;
}

TEST_F(CliErrors, EveryModelCommandRefusesTheMalformedCorpus) {
  // Valid other inputs: an image folder, its annotations, a tensor for the model's input.
  fs::create_directories(dir_ + "/imgs");
  ASSERT_TRUE(write_image(dir_ + "/imgs/a.png", Image(8, 8, 128)).is_ok());
  ASSERT_TRUE(write_file_atomic(dir_ + "/ann.json",
                                R"({"images": [{"id": 1, "file_name": "a.png", "width": 8, "height": 8}], )"
                                R"("annotations": [], "categories": [{"id": 1, "name": "c"}]})")
                  .is_ok());
  ASSERT_TRUE(write_npy(dir_ + "/x.npy", Tensor(DType::kFloat32, {1, 3, 8, 8})).is_ok());
  const std::string d = quote(dir_);
  const std::vector<ModelCommand> commands = {
      {"inspect", ""},
      {"build", " -o " + d + "/m.plan"},
      {"run", " --output-dir " + d + "/run"},
      {"bench", ""},
      {"compare", " --data " + d + "/x.npy"},
      {"detect", " " + d + "/imgs --out " + d + "/det"},
      {"eval", " --annotations " + d + "/ann.json --images " + d + "/imgs"},
      {"calibrate", " --data " + d + "/x.npy --cache " + d + "/c.cache"},
      {"sensitivity", " --data " + d + "/x.npy"},
      {"qat2ptq", " -o " + d + "/q"},
      {"export", " --target trt10 --precision fp16 -o " + d + "/e"},
      {"classify", " " + d + "/imgs"},
  };
  // A new command must be listed here or above, so that it is checked too.
  const std::set<std::string> no_model = {"ops", "dataset", "chart"};
  for (const std::string& c : cli_subcommands(cli("--help"))) {
    bool listed = no_model.count(c) > 0;
    for (const auto& mc : commands) listed = listed || mc.name == c;
    EXPECT_TRUE(listed) << "command '" << c << "' is not in this test: add it to `commands` (it reads a model) or to "
                        << "`no_model`";
  }
  for (const BadModel& bad : malformed_corpus()) {
    const std::string p = quote(write_bytes(dir_ + "/" + bad.file, bad.bytes));
    for (const ModelCommand& c : commands) {
      SCOPED_TRACE(c.name + " " + bad.file);
      expect_usage_error(cli(c.name + " " + p + c.args), bad.phrase);
    }
  }
}

// Plans that are damaged (flipped byte, truncated, not a plan past the magic) through every command that reads a plan.
TEST_F(CliErrors, EveryPlanCommandRefusesDamagedPlans) {
  const std::string m = model(conv_relu_model());
  const std::string plan_path = dir_ + "/good.plan";
  const CliResult built = cli("build " + m + " -o " + quote(plan_path));
  ASSERT_EQ(built.exit_code, 0) << built.err;
  const std::string good = slurp(plan_path);
  ASSERT_GT(good.size(), 64u);
  std::string flipped = good;
  flipped[good.size() / 2] = static_cast<char>(flipped[good.size() / 2] ^ 0x5a);
  const std::vector<std::pair<std::string, std::string>> plans = {
      {"flipped.plan", flipped}, {"truncated.plan", good.substr(0, good.size() / 2)}, {"magic_only.plan", good.substr(0, 8)}};
  fs::create_directories(dir_ + "/imgs");
  ASSERT_TRUE(write_image(dir_ + "/imgs/a.png", Image(8, 8, 128)).is_ok());
  ASSERT_TRUE(write_npy(dir_ + "/x.npy", Tensor(DType::kFloat32, {1, 3, 8, 8})).is_ok());
  ASSERT_TRUE(write_file_atomic(dir_ + "/ann.json",
                                R"({"images": [{"id": 1, "file_name": "a.png"}], "annotations": [], )"
                                R"("categories": [{"id": 1}]})")
                  .is_ok());
  const std::string d = quote(dir_);
  const std::vector<ModelCommand> commands = {
      {"inspect", ""},
      {"run", ""},
      {"bench", ""},
      {"compare", " --data " + d + "/x.npy"},
      {"detect", " " + d + "/imgs --out " + d + "/det"},
      {"eval", " --annotations " + d + "/ann.json --images " + d + "/imgs"},
      {"classify", " " + d + "/imgs"},
  };
  for (const auto& [file, bytes] : plans) {
    const std::string p = quote(write_bytes(dir_ + "/" + file, bytes));
    for (const ModelCommand& c : commands) {
      SCOPED_TRACE(c.name + " " + file);
      expect_usage_error(cli(c.name + " " + p + c.args), file);
    }
  }
}

}  // namespace
}  // namespace qd
