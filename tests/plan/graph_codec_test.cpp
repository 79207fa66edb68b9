// ir::Graph <-> bytes: real models survive the round trip bit for bit (same text, same reference outputs), and
// damaged bytes end in errors, never crashes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "onnx/importer.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "plan/byte_io.h"
#include "plan/graph_codec.h"
#include "test_util.h"

namespace qd {
namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::vector<Tensor> run(Graph g, const std::map<std::string, Tensor>& feeds) {
  PrepareOptions p;
  for (const auto& [name, t] : feeds) p.input_shapes[name] = t.shape();
  Status st = prepare_graph(g, p);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  auto out = run_reference(g, feeds);
  EXPECT_TRUE(out) << out.status().to_string();
  return out ? *out : std::vector<Tensor>{};
}

void expect_round_trip(const std::string& model, const Shape& input_shape) {
  SCOPED_TRACE(model);
  auto g = import_onnx_file(test::source_dir() + "/models/" + model);
  ASSERT_TRUE(g) << g.status().to_string();
  auto bytes = encode_graph(*g);
  ASSERT_TRUE(bytes) << bytes.status().to_string();
  auto back = decode_graph(*bytes);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->to_text(), g->to_text());
  EXPECT_EQ(back->constants.size(), g->constants.size());
  for (size_t v = 0; v < g->values.size(); ++v) {
    EXPECT_EQ(back->values[v].dim_names, g->values[v].dim_names);
    EXPECT_EQ(back->values[v].producer, g->values[v].producer);
    EXPECT_EQ(back->find_value(g->values[v].name), g->find_value(g->values[v].name));
  }
  for (const auto& [id, t] : g->constants) {
    ASSERT_TRUE(back->is_constant(id));
    EXPECT_TRUE(same_bytes(*back->constant(id), t)) << g->values[id].name;
  }
  auto again = encode_graph(*back);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *bytes);  // deterministic
  const std::string input = g->values[g->inputs[0]].name;
  const std::map<std::string, Tensor> feeds = {{input, test::random_f32(input_shape, 3, 0.f, 1.f)}};
  const auto a = run(std::move(*g), feeds);
  const auto b = run(std::move(*back), feeds);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bytes(a[i], b[i])) << "output " << i;
}

TEST(GraphCodec, RealModelsRoundTrip) {
  expect_round_trip("model_bn.onnx", {1, 3, 32, 32});
  expect_round_trip("model_gn.onnx", {1, 3, 32, 32});
  expect_round_trip("yolov5n_fmnist_det.onnx", {1, 3, 640, 640});
}

TEST(GraphCodec, QatModelRoundTrip) {
  auto g = import_onnx_file(test::source_dir() + "/models/yolov5n_fmnist_det_qat.onnx");
  ASSERT_TRUE(g) << g.status().to_string();
  auto back = decode_graph(*encode_graph(*g));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->to_text(), g->to_text());
}

// One node with every attribute kind, an omitted optional input, a symbolic input dim and an int64 constant.
Graph every_attr_graph() {
  Graph g;
  g.name = "attrs";
  g.opset = 13;
  const int x = g.add_value("x");
  g.values[x].dtype = DType::kFloat32;
  g.values[x].has_shape = true;
  g.values[x].shape = {-1, 4};
  g.values[x].dim_names = {"N", ""};
  g.inputs = {x};
  const int lo = g.add_value("lo");
  g.constants[lo] = Tensor::scalar_f32(-0.5f);
  const int y = g.add_value("y");
  Node n;
  n.name = "clip";
  n.op = OpType::Clip;
  n.opset = 13;
  n.inputs = {x, lo, -1};
  n.outputs = {y};
  n.attrs.set("i", int64_t{-7});
  n.attrs.set("f", 1.5f);
  n.attrs.set("s", std::string("text\0with nul", 13));
  n.attrs.set("ints", std::vector<int64_t>{1, -2, INT64_MAX});
  n.attrs.set("floats", std::vector<float>{0.25f, -0.f});
  n.attrs.set("strings", std::vector<std::string>{"a", ""});
  n.attrs.set("tensor", Tensor::from_i64({5, 6, 7}));
  n.attrs.set("empty_tensor", Tensor());
  g.nodes.push_back(n);
  g.outputs = {y};
  g.relink();
  return g;
}

TEST(GraphCodec, EveryAttributeKind) {
  const Graph g = every_attr_graph();
  auto bytes = encode_graph(g);
  ASSERT_TRUE(bytes) << bytes.status().to_string();
  auto back = decode_graph(*bytes);
  ASSERT_TRUE(back) << back.status().to_string();
  const AttrMap& a = back->nodes[0].attrs;
  EXPECT_EQ(*a.get_int("i"), -7);
  EXPECT_EQ(*a.get_float("f"), 1.5f);
  EXPECT_EQ(*a.get_string("s"), std::string("text\0with nul", 13));
  EXPECT_EQ(*a.get_ints("ints"), (std::vector<int64_t>{1, -2, INT64_MAX}));
  EXPECT_TRUE(std::signbit((*a.get_floats("floats"))[1]));
  EXPECT_EQ(std::get<std::vector<std::string>>(a.all().at("strings")), (std::vector<std::string>{"a", ""}));
  EXPECT_TRUE(same_bytes(*a.get_tensor("tensor"), Tensor::from_i64({5, 6, 7})));
  EXPECT_TRUE(a.get_tensor("empty_tensor")->empty());
  EXPECT_EQ(back->nodes[0].inputs, (std::vector<int>{0, 1, -1}));
  EXPECT_EQ(back->values[0].dim_names, (std::vector<std::string>{"N", ""}));
  EXPECT_EQ(back->values[0].shape, (Shape{-1, 4}));
  EXPECT_EQ(*encode_graph(*back), *bytes);
}

void expect_bad(const std::string& bytes, const std::string& phrase) {
  auto g = decode_graph(bytes);
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().code(), StatusCode::kInternal) << g.status().to_string();
  EXPECT_NE(g.status().to_string().find(phrase), std::string::npos) << g.status().to_string();
}

TEST(GraphCodec, UnknownOp) {
  std::string bytes = *encode_graph(every_attr_graph());
  const size_t at = bytes.find("Clip");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 4, "Clop");
  expect_bad(bytes, "node 'clip' uses op 'Clop', which this qdeploy does not support");
}

TEST(GraphCodec, BadIdsAndStructure) {
  Graph g = every_attr_graph();
  g.nodes[0].inputs[0] = 2;  // the node's own output: not defined before use
  expect_bad(*encode_graph(g), "not produced by any earlier node");
  g = every_attr_graph();
  g.nodes[0].outputs[0] = 0;  // overwrites the graph input
  expect_bad(*encode_graph(g), "produced more than once");
  g = every_attr_graph();
  g.outputs = {};
  expect_bad(*encode_graph(g), "no outputs");
  g = every_attr_graph();
  g.inputs.push_back(1);  // a constant as graph input
  expect_bad(*encode_graph(g), "also a constant");
  // Ids out of range: write one by hand where the node's first input id sits.
  g = every_attr_graph();
  g.nodes[0].inputs[0] = 12345;
  const std::string out_of_range = *encode_graph(g);  // encode does not validate; decode must
  expect_bad(out_of_range, "value id 12345 is out of range");
  g = every_attr_graph();
  g.nodes[0].op = OpType::Sum;  // variadic: no omitted inputs
  expect_bad(*encode_graph(g), "cannot be omitted");
}

TEST(GraphCodec, BadTensors) {
  Graph g = every_attr_graph();
  std::string bytes = *encode_graph(g);
  // The constant is the last thing: i32 id, i32 dtype, shape (u32 rank 0), u64 nbytes = 4, 4 bytes.
  std::string wrong_size = bytes;
  wrong_size[wrong_size.size() - 12] = 8;
  expect_bad(wrong_size, "needs 4 bytes, but 8 are stored");
  std::string bad_dtype = bytes;
  bad_dtype[bad_dtype.size() - 4 - 8 - 4 - 4] = 8;  // string
  expect_bad(bad_dtype, "unknown or unsupported dtype 8");
  g.constants[1] = Tensor(DType::kBool, {2});
  std::string boolean = *encode_graph(g);
  boolean[boolean.size() - 1] = 2;
  expect_bad(boolean, "bool tensor");
}

TEST(GraphCodec, EveryTruncationFails) {
  const std::string bytes = *encode_graph(every_attr_graph());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto g = decode_graph(bytes.substr(0, n));
    ASSERT_FALSE(g) << n;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << n << ": " << g.status().to_string();
  }
}

// Random damage: decode either fails cleanly or returns a graph that verifies (run under ASan in the sanitizer
// build; the fuzzer does this at scale).
TEST(GraphCodec, RandomDamageNeverCrashes) {
  const std::string bytes = *encode_graph(every_attr_graph());
  std::mt19937 rng(11);
  int decoded = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string b = bytes;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) b[rng() % b.size()] = static_cast<char>(rng());
    auto g = decode_graph(b);
    if (g) {
      EXPECT_TRUE(g->verify().is_ok());
      ++decoded;
    } else {
      EXPECT_NE(g.status().code(), StatusCode::kInternal) << g.status().to_string();
    }
  }
  EXPECT_GT(decoded, 0);  // edits of names and attribute values still decode
}

TEST(GraphCodec, RankAboveEightIsRefusedOnEncode) {
  Graph g = every_attr_graph();
  g.values[2].has_shape = true;
  g.values[2].shape = Shape(9, 1);
  auto bytes = encode_graph(g);
  ASSERT_FALSE(bytes);
  EXPECT_NE(bytes.status().message().find("rank 9"), std::string::npos);
}

}  // namespace
}  // namespace qd
