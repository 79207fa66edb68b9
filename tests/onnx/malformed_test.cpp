// A corpus of malformed models. Each case takes a good small model, adds one defect, writes it to a temporary folder
// and loads it the way the CLI does (import_onnx_file -> prepare_graph -> a reference run). Every case must end in a
// clear error: a non-OK status of the right code (never kInternal), whose text names the problem; never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>

#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "onnx_builder.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "test_util.h"

namespace qd {
namespace {

using namespace test::onnxb;
namespace fs = std::filesystem;

// Ops that other files add: a case that needs one skips (visibly) until it exists.
#define REQUIRE_OP(name)                                                                   \
  do {                                                                                     \
    if (!op_from_name(name)) GTEST_SKIP() << name << " is not implemented yet (src/ops/)"; \
  } while (0)

// Deterministic inputs for a prepared graph: floats in [-1, 1), integers 0..2, false.
std::map<std::string, Tensor> default_feeds(const Graph& g) {
  std::map<std::string, Tensor> feeds;
  for (int v : g.inputs) {
    const Value& val = g.values[v];
    Tensor t(val.dtype, val.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, is_float(val.dtype) ? 0.25 * (i % 8) - 1.0 : i % 3);
    feeds[val.name] = t;
  }
  return feeds;
}

// The CLI's path: import the file, prepare with `shapes`, run on the reference backend with `feeds` (or defaults).
Status load_and_run(const std::string& path, const std::map<std::string, Shape>& shapes = {},
                    const std::map<std::string, Tensor>* feeds = nullptr) {
  auto g = import_onnx_file(path);
  if (!g) return g.status();
  PrepareOptions opt;
  opt.input_shapes = shapes;
  QD_RETURN_IF_ERROR(prepare_graph(*g, opt));
  auto out = run_reference(*g, feeds ? *feeds : default_feeds(*g));
  return out.status();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The status is an error of `code` whose text (node, op and message) contains `phrase` (case-insensitive).
void expect_error(const Status& s, StatusCode code, const std::string& phrase) {
  ASSERT_FALSE(s.is_ok()) << "expected an error containing '" << phrase << "'";
  if (std::getenv("QD_TEST_SHOW_ERRORS")) std::cout << "    error: " << s.to_string() << "\n";  // to review wording
  EXPECT_NE(s.code(), StatusCode::kInternal) << s.to_string();
  EXPECT_EQ(static_cast<int>(s.code()), static_cast<int>(code)) << s.to_string();
  EXPECT_NE(lower(s.to_string()).find(lower(phrase)), std::string::npos)
      << "message lacks '" << phrase << "': " << s.to_string();
}

// One temporary folder per test.
class Malformed : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = test::temp_dir(std::string("malformed_") + info->name());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const onnx::ModelProto& m) { return write_model(dir_, m); }
  Status load(const onnx::ModelProto& m, const std::map<std::string, Shape>& shapes = {}) {
    return load_and_run(write(m), shapes);
  }
  std::string dir_;
};

// ---- the good models load and run (so that each defect below is the only thing wrong) ----

TEST_F(Malformed, BaseModelsAreValid) {
  EXPECT_TRUE(load(conv_relu_model()).is_ok()) << load(conv_relu_model()).to_string();
  EXPECT_TRUE(load(conv_add_model()).is_ok()) << load(conv_add_model()).to_string();
}

// ---- the file itself ----

TEST_F(Malformed, EmptyFile) {
  const std::string p = write_bytes(dir_ + "/model.onnx", "");
  expect_error(load_and_run(p), StatusCode::kInvalidArgument, "empty");
}

TEST_F(Malformed, MissingFile) {
  expect_error(load_and_run(dir_ + "/nope.onnx"), StatusCode::kNotFound, "no such file");
}

TEST_F(Malformed, DirectoryInsteadOfFile) {
  expect_error(load_and_run(dir_), StatusCode::kInvalidArgument, "not a regular file");
}

TEST_F(Malformed, TruncatedInsideTheGraph) {
  const std::string bytes = serialize(conv_relu_model());
  // The graph holds nearly all bytes; cutting inside it or the opset list that follows leaves a field unfinished.
  for (size_t cut : {bytes.size() / 4, bytes.size() / 3, bytes.size() / 2, bytes.size() * 3 / 4, bytes.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(bytes.size()));
    const std::string p = write_bytes(dir_ + "/model.onnx", bytes.substr(0, cut));
    expect_error(load_and_run(p), StatusCode::kInvalidArgument, "truncated");
  }
}

TEST_F(Malformed, TruncatedAtEveryLength) {
  // Every prefix of a valid model is an error or (at a field boundary) a smaller model; never a crash.
  const std::string bytes = serialize(conv_add_model());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto g = import_onnx_bytes(bytes.substr(0, cut), "", "prefix");
    if (g) {
      PrepareOptions opt;
      Status st = prepare_graph(*g, opt);
      EXPECT_NE(st.code(), StatusCode::kInternal) << st.to_string();
      continue;
    }
    EXPECT_NE(g.status().code(), StatusCode::kInternal) << "cut " << cut << ": " << g.status().to_string();
    EXPECT_FALSE(g.status().message().empty());
  }
}

TEST_F(Malformed, RandomGarbage) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    std::string bytes(16 + rng() % 4096, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const std::string p = write_bytes(dir_ + "/model.onnx", bytes);
    Status st = load_and_run(p);
    ASSERT_FALSE(st.is_ok());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  }
  // Text is not a model either.
  const std::string p = write_bytes(dir_ + "/model.onnx", "this is not an onnx model\n");
  expect_error(load_and_run(p), StatusCode::kInvalidArgument, "not a valid ONNX model");
}

TEST_F(Malformed, DeeplyNestedAttributes) {
  // Graph attributes nested 200 deep exceed the parser's recursion limit: an error, not a stack overflow.
  onnx::ModelProto m = conv_relu_model();
  onnx::GraphProto inner;
  for (int i = 0; i < 200; ++i) {
    onnx::GraphProto outer;
    auto* n = outer.add_node();
    n->set_op_type("If");
    auto* a = n->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = inner;
    inner = std::move(outer);
  }
  auto* n = add_node(m.mutable_graph(), "If", {"c"}, {"unused"});
  auto* a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = inner;
  expect_error(load(m), StatusCode::kInvalidArgument, "nested too deeply");
}

// ---- tensors (initializers, Constant values) ----

TEST_F(Malformed, RawDataLengthDisagreesWithDims) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(100);
  expect_error(load(m), StatusCode::kInvalidArgument, "initializer 'w': raw_data is 100 bytes");
}

TEST_F(Malformed, TypedFieldCountDisagreesWithDims) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_initializer(1)->add_float_data(1.f);  // b: 5 values for dims [4]
  expect_error(load(m), StatusCode::kInvalidArgument, "float_data holds 5 values");
}

TEST_F(Malformed, TensorWithoutData) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_initializer(1)->clear_float_data();
  expect_error(load(m), StatusCode::kInvalidArgument, "initializer 'b': no data");
}

TEST_F(Malformed, NegativeDim) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_initializer(1)->set_dims(0, -4);
  expect_error(load(m), StatusCode::kInvalidArgument, "negative dim -4 in dims [-4]");
}

TEST_F(Malformed, DimsProductOverflowsInt64) {
  onnx::ModelProto m = conv_relu_model();
  auto* b = m.mutable_graph()->mutable_initializer(1);
  b->clear_dims();
  for (int i = 0; i < 4; ++i) b->add_dims(int64_t{1} << 31);  // 2^124 elements
  expect_error(load(m), StatusCode::kInvalidArgument, "more than 2^40 elements");
}

TEST_F(Malformed, HugeDims) {
  // 2^40 float elements (4 TiB) declared by a few bytes of file: refused before any allocation.
  onnx::ModelProto m = conv_relu_model();
  auto* b = m.mutable_graph()->mutable_initializer(1);
  b->clear_dims();
  b->add_dims(int64_t{1} << 20);
  b->add_dims(int64_t{1} << 20);
  expect_error(load(m), StatusCode::kInvalidArgument, "8 GiB limit");
}

TEST_F(Malformed, LargeDimsWithoutData) {
  // 1 GiB of dims backed by 16 bytes: the data check comes before the allocation.
  onnx::ModelProto m = conv_relu_model();
  auto* b = m.mutable_graph()->mutable_initializer(1);
  b->set_dims(0, int64_t{1} << 28);
  expect_error(load(m), StatusCode::kInvalidArgument, "float_data holds 4 values");
}

TEST_F(Malformed, RankAbove8) {
  onnx::ModelProto m = conv_relu_model();
  auto* b = m.mutable_graph()->mutable_initializer(1);
  for (int i = 0; i < 9; ++i) b->add_dims(1);
  expect_error(load(m), StatusCode::kInvalidArgument, "initializer 'b': rank 10 is more than 8");
}

TEST_F(Malformed, DuplicateInitializer) {
  onnx::ModelProto m = conv_relu_model();
  *m.mutable_graph()->add_initializer() = m.graph().initializer(1);
  expect_error(load(m), StatusCode::kInvalidArgument, "initializer 'b' is defined twice");
}

TEST_F(Malformed, InitializerWithoutName) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->add_initializer()->CopyFrom(tensor_f32("", {1}, {1.f}));
  expect_error(load(m), StatusCode::kInvalidArgument, "no name");
}

TEST_F(Malformed, StringInitializer) {
  onnx::ModelProto m = conv_relu_model();
  auto* s = m.mutable_graph()->add_initializer();
  s->set_name("labels");
  s->set_data_type(onnx::TensorProto::STRING);
  s->add_dims(1);
  s->add_string_data("cat");
  expect_error(load(m), StatusCode::kUnsupported, "string tensors");
}

TEST_F(Malformed, InitializerWithoutElementType) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_initializer(1)->clear_data_type();
  expect_error(load(m), StatusCode::kInvalidArgument, "no element type");
}

TEST_F(Malformed, BFloat16Initializer) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_initializer(1)->set_data_type(onnx::TensorProto::BFLOAT16);
  expect_error(load(m), StatusCode::kUnsupported, "element type bfloat16 is not supported");
}

// ---- external data ----

class MalformedExternal : public Malformed {
 protected:
  // The model with initializer w stored externally at `location` (offset/length as given, when not empty).
  onnx::ModelProto with_external(const std::string& location, const std::string& offset = "",
                                 const std::string& length = "") {
    onnx::ModelProto m = conv_relu_model();
    auto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const char* k, const std::string& v) {
      auto* e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    kv("location", location);
    if (!offset.empty()) kv("offset", offset);
    if (!length.empty()) kv("length", length);
    return m;
  }
  // 108 floats of w (432 bytes) after `pad` bytes.
  void write_weights(const std::string& path, size_t pad = 0) {
    const auto v = ramp(108);
    write_bytes(path, std::string(pad, '\0') + std::string(reinterpret_cast<const char*>(v.data()), 432));
  }
};

TEST_F(MalformedExternal, ValidExternalDataLoads) {
  write_weights(dir_ + "/weights.bin", 64);
  EXPECT_TRUE(load(with_external("weights.bin", "64", "432")).is_ok());
}

TEST_F(MalformedExternal, DotDot) {
  write_weights(dir_ + "/../qd_escape_weights.bin");
  expect_error(load(with_external("../qd_escape_weights.bin")), StatusCode::kInvalidArgument, "contains '..'");
  fs::remove(dir_ + "/../qd_escape_weights.bin");
  expect_error(load(with_external("sub/../../x.bin")), StatusCode::kInvalidArgument, "contains '..'");
}

TEST_F(MalformedExternal, AbsolutePath) {
  write_weights(dir_ + "/weights.bin");
  expect_error(load(with_external(dir_ + "/weights.bin")), StatusCode::kInvalidArgument, "is absolute");
  expect_error(load(with_external("/etc/passwd")), StatusCode::kInvalidArgument, "is absolute");
}

TEST_F(MalformedExternal, SymlinkEscapingTheFolder) {
  const std::string outside = test::temp_dir("malformed_outside");
  write_weights(outside + "/weights.bin");
  fs::create_symlink(outside + "/weights.bin", dir_ + "/weights.bin");
  expect_error(load(with_external("weights.bin")), StatusCode::kInvalidArgument, "outside the model's folder");
  // A symlinked folder that escapes, too.
  fs::create_directory_symlink(outside, dir_ + "/data");
  expect_error(load(with_external("data/weights.bin")), StatusCode::kInvalidArgument, "outside the model's folder");
  fs::remove_all(outside);
}

TEST_F(MalformedExternal, SymlinkInsideTheFolderIsFine) {
  fs::create_directory(dir_ + "/real");
  write_weights(dir_ + "/real/weights.bin");
  fs::create_symlink("real/weights.bin", dir_ + "/weights.bin");
  EXPECT_TRUE(load(with_external("weights.bin")).is_ok());
}

TEST_F(MalformedExternal, OffsetPastEndOfFile) {
  write_weights(dir_ + "/weights.bin");
  expect_error(load(with_external("weights.bin", "4096")), StatusCode::kInvalidArgument, "runs past its end");
  expect_error(load(with_external("weights.bin", "8")), StatusCode::kInvalidArgument, "runs past its end");
  expect_error(load(with_external("weights.bin", "9223372036854775807")), StatusCode::kInvalidArgument,
               "runs past its end");
}

TEST_F(MalformedExternal, LengthDisagreesWithDims) {
  write_weights(dir_ + "/weights.bin");
  expect_error(load(with_external("weights.bin", "0", "100000")), StatusCode::kInvalidArgument, "disagrees");
}

TEST_F(MalformedExternal, FileShorterThanTensor) {
  write_bytes(dir_ + "/weights.bin", std::string(100, '\0'));
  expect_error(load(with_external("weights.bin")), StatusCode::kInvalidArgument, "runs past its end");
}

TEST_F(MalformedExternal, BadOffsetText) {
  write_weights(dir_ + "/weights.bin");
  for (const char* bad : {"-8", "12abc", "0x10", "99999999999999999999999", " 8"}) {
    SCOPED_TRACE(bad);
    expect_error(load(with_external("weights.bin", bad)), StatusCode::kInvalidArgument, "not a non-negative integer");
  }
}

TEST_F(MalformedExternal, MissingFile) {
  expect_error(load(with_external("weights.bin")), StatusCode::kNotFound, "not found");
}

TEST_F(MalformedExternal, NoLocation) {
  onnx::ModelProto m = with_external("x");
  m.mutable_graph()->mutable_initializer(0)->clear_external_data();
  expect_error(load(m), StatusCode::kInvalidArgument, "no 'location'");
}

TEST_F(MalformedExternal, LocationIsAFolder) {
  fs::create_directory(dir_ + "/weights");
  expect_error(load(with_external("weights")), StatusCode::kInvalidArgument, "not a regular file");
  expect_error(load(with_external(".")), StatusCode::kInvalidArgument, "not a regular file");
}

TEST_F(MalformedExternal, NotAllowedFromMemory) {
  auto g = import_onnx_bytes(serialize(with_external("weights.bin")), "", "bytes");
  ASSERT_FALSE(g);
  expect_error(g.status(), StatusCode::kInvalidArgument, "loaded from memory");
}

// ---- graph structure ----

TEST_F(Malformed, MissingGraph) {
  onnx::ModelProto m = conv_relu_model();
  m.clear_graph();
  expect_error(load(m), StatusCode::kInvalidArgument, "has no graph");
}

TEST_F(Malformed, NoOutputs) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->clear_output();
  expect_error(load(m), StatusCode::kInvalidArgument, "has no outputs");
}

TEST_F(Malformed, DanglingNodeInput) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->set_input(0, "nobody_makes_this");
  expect_error(load(m), StatusCode::kInvalidArgument, "dangling");
  const Status st = load(m);
  EXPECT_NE(st.to_string().find("nobody_makes_this"), std::string::npos) << st.to_string();
  EXPECT_NE(st.to_string().find("relu"), std::string::npos) << st.to_string();
}

TEST_F(Malformed, GraphOutputNotProduced) {
  onnx::ModelProto m = conv_relu_model();
  add_output(m.mutable_graph(), "ghost");
  expect_error(load(m), StatusCode::kInvalidArgument, "graph output 'ghost' is not produced");
}

TEST_F(Malformed, GraphOutputThatIsOnlyConsumed) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->set_input(0, "ghost");
  m.mutable_graph()->mutable_output(0)->set_name("ghost");
  expect_error(load(m), StatusCode::kInvalidArgument, "graph output 'ghost' is not produced");
}

TEST_F(Malformed, Cycle) {
  // relu1 reads relu2's output and relu2 reads relu1's.
  onnx::ModelProto m = conv_relu_model();
  auto* g = m.mutable_graph();
  add_node(g, "Add", {"c", "r2"}, {"r1"}, "loop_a");
  add_node(g, "Relu", {"r1"}, {"r2"}, "loop_b");
  add_output(g, "r2");
  expect_error(load(m), StatusCode::kInvalidArgument, "cycle");
  const Status st = load(m);
  EXPECT_NE(st.to_string().find("loop_a"), std::string::npos) << st.to_string();
}

TEST_F(Malformed, SelfLoop) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->set_input(0, "y");
  expect_error(load(m), StatusCode::kInvalidArgument, "cycle");
}

TEST_F(Malformed, DuplicateOutputNames) {
  onnx::ModelProto m = conv_relu_model();
  add_node(m.mutable_graph(), "Relu", {"c"}, {"y"}, "relu_again");
  expect_error(load(m), StatusCode::kInvalidArgument, "value 'y' is defined twice");
  const Status st = load(m);
  EXPECT_NE(st.to_string().find("relu_again"), std::string::npos) << st.to_string();
}

TEST_F(Malformed, NodeOutputRedefinesGraphInput) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->set_output(0, "x");
  m.mutable_graph()->mutable_output(0)->set_name("x");
  expect_error(load(m), StatusCode::kInvalidArgument, "value 'x' is defined twice: by a graph input");
}

TEST_F(Malformed, NodeOutputRedefinesInitializer) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->set_output(0, "w");
  m.mutable_graph()->mutable_output(0)->set_name("w");
  expect_error(load(m), StatusCode::kInvalidArgument, "value 'w' is defined twice: by an initializer");
}

TEST_F(Malformed, SameOutputTwiceInOneNode) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->add_output("y");
  expect_error(load(m), StatusCode::kInvalidArgument, "defined twice");
}

TEST_F(Malformed, GraphInputListedTwice) {
  onnx::ModelProto m = conv_relu_model();
  *m.mutable_graph()->add_input() = m.graph().input(0);
  expect_error(load(m), StatusCode::kInvalidArgument, "listed twice");
}

TEST_F(Malformed, ConstantOutputRedefined) {
  onnx::ModelProto m = conv_relu_model();
  auto* c = add_node(m.mutable_graph(), "Constant", {}, {"c"}, "const_c");
  attr_float(c, "value_float", 1.f);
  expect_error(load(m), StatusCode::kInvalidArgument, "defined twice");
}

TEST_F(Malformed, NodesOutOfOrderAreFine) {
  // Not a defect: ONNX requires topological order, but a reversed list with a Constant read before it is defined
  // is sorted on import.
  onnx::ModelProto m = empty_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", {2, 3});
  add_node(g, "Add", {"r", "k"}, {"y"}, "add");
  add_node(g, "Relu", {"x"}, {"r"}, "relu");
  attr_float(add_node(g, "Constant", {}, {"k"}, "k"), "value_float", 1.f);
  add_output(g, "y");
  EXPECT_TRUE(load(m).is_ok()) << load(m).to_string();
}

// ---- opsets and ops ----

TEST_F(Malformed, Opset6) { expect_error(load(conv_relu_model(6)), StatusCode::kUnsupported, "opset 6 is not supported"); }

TEST_F(Malformed, Opset99) {
  const Status st = load(conv_relu_model(99));
  expect_error(st, StatusCode::kUnsupported, "opset 99 is not supported");
  EXPECT_NE(st.message().find("opset_version="), std::string::npos) << st.to_string();
}

TEST_F(Malformed, NoOpsetImport) {
  onnx::ModelProto m = conv_relu_model();
  m.clear_opset_import();
  expect_error(load(m), StatusCode::kInvalidArgument, "declares no opset");
}

TEST_F(Malformed, UnknownOp) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->set_op_type("FancyRelu");
  expect_error(load(m), StatusCode::kUnsupported, "'relu' (FancyRelu, opset 13)");
}

TEST_F(Malformed, ThreeUnknownOpsInOneError) {
  onnx::ModelProto m = conv_relu_model();
  auto* g = m.mutable_graph();
  add_node(g, "Frobnicate", {"y"}, {"f1"}, "frob");
  add_node(g, "Quux", {"f1"}, {"f2"}, "quux");
  add_node(g, "Zorch", {"f2"}, {"f3"}, "zorch");
  add_output(g, "f3");
  const Status st = load(m);
  expect_error(st, StatusCode::kUnsupported, "3 node(s)");
  for (const char* part : {"'frob' (Frobnicate, opset 13)", "'quux' (Quux, opset 13)", "'zorch' (Zorch, opset 13)"}) {
    EXPECT_NE(st.message().find(part), std::string::npos) << "missing " << part << " in " << st.message();
  }
}

TEST_F(Malformed, NonDefaultDomainOp) {
  onnx::ModelProto m = conv_relu_model();
  auto* op = m.add_opset_import();
  op->set_domain("com.example");
  op->set_version(2);
  m.mutable_graph()->mutable_node(1)->set_domain("com.example");
  expect_error(load(m), StatusCode::kUnsupported, "'relu' (com.example::Relu, opset 2)");
}

TEST_F(Malformed, ControlFlowOp) {
  onnx::ModelProto m = conv_relu_model();
  auto* n = add_node(m.mutable_graph(), "If", {"c"}, {"z"}, "branch");
  auto* a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("then");
  add_output(m.mutable_graph(), "z");
  expect_error(load(m), StatusCode::kUnsupported, "'branch' (If");
}

TEST_F(Malformed, WrongNumberOfInputs) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->add_input("x");  // Relu(c, x)
  expect_error(load(m), StatusCode::kInvalidArgument, "has 2 inputs; Relu takes 1");
  onnx::ModelProto m2 = conv_relu_model();
  auto* conv = m2.mutable_graph()->mutable_node(0);
  conv->clear_input();
  conv->add_input("x");  // Conv(x): no weight
  expect_error(load(m2), StatusCode::kInvalidArgument, "has 1 inputs; Conv takes 2");
}

TEST_F(Malformed, RequiredInputOmitted) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(0)->set_input(1, "");  // Conv(x, "", b)
  expect_error(load(m), StatusCode::kInvalidArgument, "required input 1 is missing");
}

TEST_F(Malformed, OmittedVariadicInput) {
  // Found by fuzz_onnx_import: Sum(x, x, "") dereferenced the missing input in the reference kernel (src/ops/binary.cpp).
  for (const char* op : {"Sum", "Max", "Min", "Mean", "Concat"}) {
    SCOPED_TRACE(op);
    onnx::ModelProto m = conv_relu_model();
    auto* n = add_node(m.mutable_graph(), op, {"y", "", "y"}, {"z"}, "variadic");
    if (std::string(op) == "Concat") attr_int(n, "axis", 1);
    m.mutable_graph()->mutable_output(0)->set_name("z");
    const Status st = load(m);
    expect_error(st, StatusCode::kInvalidArgument, "input 1 is empty");
    EXPECT_EQ(st.node(), "variadic");
  }
}

TEST_F(Malformed, WrongNumberOfOutputs) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(1)->add_output("extra");
  expect_error(load(m), StatusCode::kInvalidArgument, "has 2 outputs; Relu gives 1");
}

TEST_F(Malformed, ConstantWithoutValue) {
  onnx::ModelProto m = conv_relu_model();
  add_node(m.mutable_graph(), "Constant", {}, {"k"}, "k");
  expect_error(load(m), StatusCode::kInvalidArgument, "no value attribute");
}

TEST_F(Malformed, ConstantValueOfWrongType) {
  onnx::ModelProto m = conv_relu_model();
  attr_int(add_node(m.mutable_graph(), "Constant", {}, {"k"}, "k"), "value", 3);
  expect_error(load(m), StatusCode::kInvalidArgument, "should be a tensor");
}

TEST_F(Malformed, ConstantTensorWithBadData) {
  onnx::ModelProto m = conv_relu_model();
  auto* k = add_node(m.mutable_graph(), "Constant", {}, {"k"}, "k");
  auto* a = k->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = tensor_f32("", {3}, {1.f, 2.f});  // 2 values for dims [3]
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "Constant value (unnamed): raw_data is 8 bytes");
  EXPECT_EQ(st.node(), "k");
}

TEST_F(Malformed, TensorAttributeWithBadData) {
  onnx::ModelProto m = conv_relu_model();
  auto* a = m.mutable_graph()->mutable_node(1)->add_attribute();
  a->set_name("extra");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = tensor_f32("t", {-1}, {});
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "attribute 'extra': tensor 't': negative dim -1");
  EXPECT_EQ(st.node(), "relu");
}

// ---- attributes and geometry ----

TEST_F(Malformed, WrongAttributeType) {
  onnx::ModelProto m = conv_relu_model();
  attr_ints(m.mutable_graph()->mutable_node(0), "group", {1});  // ints where an int is expected
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "attribute 'group' should be an int");
  EXPECT_EQ(st.node(), "conv");
  EXPECT_EQ(st.op(), "Conv");
}

TEST_F(Malformed, DuplicateAttribute) {
  onnx::ModelProto m = conv_relu_model();
  attr_ints(m.mutable_graph()->mutable_node(0), "pads", {0, 0, 0, 0});
  expect_error(load(m), StatusCode::kInvalidArgument, "attribute 'pads' is given twice");
}

TEST_F(Malformed, GraphAttributeOnSupportedOp) {
  onnx::ModelProto m = conv_relu_model();
  auto* a = m.mutable_graph()->mutable_node(1)->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  expect_error(load(m), StatusCode::kUnsupported, "attribute 'body' is a graph");
}

TEST_F(Malformed, ZeroStride) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(0)->mutable_attribute(2)->set_ints(0, 0);  // strides [0, 1]
  expect_error(load(m), StatusCode::kInvalidArgument, "strides must be positive");
}

TEST_F(Malformed, NegativePads) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->set_ints(2, -3);
  expect_error(load(m), StatusCode::kInvalidArgument, "pads must be non-negative");
}

TEST_F(Malformed, GroupDoesNotDivideChannels) {
  onnx::ModelProto m = conv_relu_model();
  attr_int(m.mutable_graph()->mutable_node(0), "group", 2);  // 3 input channels
  expect_error(load(m), StatusCode::kInvalidArgument, "group 2 does not divide");
}

TEST_F(Malformed, NonPositiveGroup) {
  onnx::ModelProto m = conv_relu_model();
  attr_int(m.mutable_graph()->mutable_node(0), "group", 0);
  expect_error(load(m), StatusCode::kInvalidArgument, "group 0");
}

TEST_F(Malformed, WeightChannelsDisagreeWithInput) {
  onnx::ModelProto m = conv_relu_model();
  expect_error(load(m, {{"x", {1, 5, 8, 8}}}), StatusCode::kInvalidArgument, "has fixed dim 1 = 3");
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(5);
  expect_error(load(m), StatusCode::kInvalidArgument, "input channels");
}

TEST_F(Malformed, KernelLargerThanPaddedInput) {
  onnx::ModelProto m = conv_relu_model();
  auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(2)->set_dim_value(1);  // height 1, no padding, a 3x3 kernel
  m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->clear_ints();
  for (int i = 0; i < 4; ++i) m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->add_ints(0);
  expect_error(load(m), StatusCode::kInvalidArgument, "larger than the padded input");
}

TEST_F(Malformed, KernelShapeDisagreesWithWeight) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_ints(0, 5);
  expect_error(load(m), StatusCode::kInvalidArgument, "kernel_shape disagrees");
}

TEST_F(Malformed, BiasOfWrongShape) {
  onnx::ModelProto m = conv_relu_model();
  auto* b = m.mutable_graph()->mutable_initializer(1);
  b->set_dims(0, 2);
  b->clear_float_data();
  b->add_float_data(0.f);
  b->add_float_data(0.f);
  expect_error(load(m), StatusCode::kInvalidArgument, "bias must have shape [4]");
}

TEST_F(Malformed, AddShapesDoNotBroadcast) {
  onnx::ModelProto m = conv_add_model();
  expect_error(load(m, {{"skip", {1, 4, 7, 8}}}), StatusCode::kInvalidArgument, "has fixed dim 2 = 8");
  auto* shape = m.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(2)->set_dim_value(7);
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "do not broadcast");
  EXPECT_EQ(st.node(), "add");
}

TEST_F(Malformed, AxisOutOfRangeConcat) {
  REQUIRE_OP("Concat");
  onnx::ModelProto m = conv_relu_model();
  attr_int(add_node(m.mutable_graph(), "Concat", {"y", "c"}, {"z"}, "cat"), "axis", 4);
  m.mutable_graph()->mutable_output(0)->set_name("z");
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "axis");
  EXPECT_EQ(st.node(), "cat");
}

TEST_F(Malformed, AxisOutOfRangeSoftmax) {
  REQUIRE_OP("Softmax");
  onnx::ModelProto m = conv_relu_model();
  attr_int(add_node(m.mutable_graph(), "Softmax", {"y"}, {"z"}, "softmax"), "axis", -5);
  m.mutable_graph()->mutable_output(0)->set_name("z");
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "axis");
  EXPECT_EQ(st.node(), "softmax");
}

TEST_F(Malformed, AxisOutOfRangeGather) {
  REQUIRE_OP("Gather");
  onnx::ModelProto m = conv_relu_model();
  *m.mutable_graph()->add_initializer() = tensor_i64("idx", {1}, {0});
  attr_int(add_node(m.mutable_graph(), "Gather", {"y", "idx"}, {"z"}, "gather"), "axis", 7);
  m.mutable_graph()->mutable_output(0)->set_name("z");
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "axis");
  EXPECT_EQ(st.node(), "gather");
}

TEST_F(Malformed, ReshapeElementCountMismatch) {
  REQUIRE_OP("Reshape");
  onnx::ModelProto m = conv_relu_model();
  *m.mutable_graph()->add_initializer() = tensor_i64("shape", {2}, {7, 9});  // 256 elements -> 63
  add_node(m.mutable_graph(), "Reshape", {"y", "shape"}, {"z"}, "reshape");
  m.mutable_graph()->mutable_output(0)->set_name("z");
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "cannot reshape");
  EXPECT_EQ(st.node(), "reshape");
}

TEST_F(Malformed, MaxPoolZeroStride) {
  REQUIRE_OP("MaxPool");
  onnx::ModelProto m = conv_relu_model();
  auto* pool = add_node(m.mutable_graph(), "MaxPool", {"y"}, {"z"}, "pool");
  attr_ints(pool, "kernel_shape", {2, 2});
  attr_ints(pool, "strides", {0, 2});
  m.mutable_graph()->mutable_output(0)->set_name("z");
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "strides must be positive");
  EXPECT_EQ(st.node(), "pool");
}

TEST_F(Malformed, MaxPoolKernelLargerThanInput) {
  REQUIRE_OP("MaxPool");
  onnx::ModelProto m = conv_relu_model();
  attr_ints(add_node(m.mutable_graph(), "MaxPool", {"y"}, {"z"}, "pool"), "kernel_shape", {9, 9});
  m.mutable_graph()->mutable_output(0)->set_name("z");
  expect_error(load(m), StatusCode::kInvalidArgument, "larger than the padded input");
}

TEST_F(Malformed, GatherIndexOutOfRangeAtRunTime) {
  REQUIRE_OP("Gather");
  onnx::ModelProto m = empty_model();
  auto* g = m.mutable_graph();
  *g->add_initializer() = tensor_f32("table", {5, 2}, ramp(10));
  add_input(g, "idx", {1}, onnx::TensorProto::INT64);
  add_node(g, "Gather", {"table", "idx"}, {"y"}, "lookup");
  add_output(g, "y");
  const std::string path = write(m);
  auto feed = [](int64_t i) {
    std::map<std::string, Tensor> f;
    f["idx"] = Tensor::from_i64({i});
    return f;
  };
  const auto ok_feed = feed(4), neg_feed = feed(-5), bad_feed = feed(5), worse_feed = feed(int64_t{1} << 40);
  EXPECT_TRUE(load_and_run(path, {}, &ok_feed).is_ok());
  EXPECT_TRUE(load_and_run(path, {}, &neg_feed).is_ok());  // negative indices count from the end
  for (const auto* f : {&bad_feed, &worse_feed}) {
    const Status st = load_and_run(path, {}, f);
    expect_error(st, StatusCode::kInvalidArgument, "out of range");
    EXPECT_EQ(st.node(), "lookup");
  }
}

// ---- graph inputs ----

TEST_F(Malformed, StringInput) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
  expect_error(load(m), StatusCode::kUnsupported, "graph input 'x': element type string is not supported");
}

TEST_F(Malformed, InputWithoutElementType) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_elem_type();
  expect_error(load(m), StatusCode::kInvalidArgument, "no element type");
}

TEST_F(Malformed, InputWithoutType) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_input(0)->clear_type();
  expect_error(load(m), StatusCode::kInvalidArgument, "has no type");
}

TEST_F(Malformed, SequenceInput) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type();
  expect_error(load(m), StatusCode::kUnsupported, "not a tensor");
}

TEST_F(Malformed, InputDimTooLarge) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(
      int64_t{1} << 50);
  expect_error(load(m), StatusCode::kInvalidArgument, "invalid dim");
}

TEST_F(Malformed, InputWithoutName) {
  onnx::ModelProto m = conv_relu_model();
  m.mutable_graph()->mutable_input(0)->clear_name();
  expect_error(load(m), StatusCode::kInvalidArgument, "graph input has no name");
}

TEST_F(Malformed, DynamicDimNotBound) {
  onnx::ModelProto m = conv_relu_model();
  auto* d = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
  d->set_dim_param("batch");
  expect_error(load(m), StatusCode::kInvalidArgument, "--shapes x:");
  EXPECT_TRUE(load(m, {{"x", {2, 3, 8, 8}}}).is_ok());
  expect_error(load(m, {{"nope", {2, 3, 8, 8}}}), StatusCode::kInvalidArgument, "no input named 'nope'");
}

TEST_F(Malformed, DeclaredInputTooLarge) {
  // Each dim is plausible; their product (2^62) is not. Refused on import, before anything sizes a buffer from it.
  onnx::ModelProto m = conv_relu_model();
  auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(0)->set_dim_value(int64_t{1} << 31);
  shape->mutable_dim(2)->set_dim_value(int64_t{1} << 31);
  expect_error(load(m), StatusCode::kInvalidArgument, "graph input 'x' has more than 2^40 elements");
}

TEST_F(Malformed, BoundInputTooLarge) {
  // The same through binding: x[N, 3, 8, 8] with N from --shapes. parse_shape (the CLI flag) checks the element count;
  // a program calling prepare_graph directly relies on bind_input_shapes / infer_shapes to do it.
  onnx::ModelProto m = empty_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", {-1, 1 << 20, 1 << 20});
  add_output(g, "x");  // an input that is also an output: no node checks its size
  auto imported = import_onnx_file(write(m));
  ASSERT_TRUE(imported) << imported.status().to_string();
  PrepareOptions opt;
  opt.input_shapes["x"] = {int64_t{1} << 32, 1 << 20, 1 << 20};  // 2^72 elements
  const Status st = prepare_graph(*imported, opt);
  expect_error(st, StatusCode::kInvalidArgument, "2^40");
}

// x: 3 x 2^32 x 0 holds no elements; a kernel must not loop over the 3*2^32 empty rows.
onnx::ModelProto empty_tensor_model(const std::string& op) {
  onnx::ModelProto m = empty_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", {3, int64_t{1} << 32, 0});
  add_node(g, op, {"x"}, {"y"}, "op");
  add_output(g, "y");
  return m;
}

TEST_F(Malformed, EmptyTensorWithHugeDim) {
  for (const char* op : {"Relu", "Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(load(empty_tensor_model(op)).is_ok());
  }
  // Trilu (also LayerNormalization, LRN) once looped over the empty rows for minutes; the executor now skips
  // kernels whose outputs hold no elements.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = write(empty_tensor_model("Trilu"));
  EXPECT_EXIT(
      {
        alarm(20);
        const Status st = load_and_run(path);
        std::_Exit(st.code() == StatusCode::kInternal ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(Malformed, ActivationTooLarge) {
  // An input just under 2^40 elements (81920x3x2048x2048) whose Conv output (4 channels) is over it.
  onnx::ModelProto m = conv_relu_model();
  auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(0)->set_dim_value(81920);
  shape->mutable_dim(2)->set_dim_value(2048);
  shape->mutable_dim(3)->set_dim_value(2048);
  const Status st = load(m);
  expect_error(st, StatusCode::kInvalidArgument, "2^40");
  EXPECT_EQ(st.node(), "conv");
}

}  // namespace
}  // namespace qd
