#include <gtest/gtest.h>

#include "onnx/exporter.h"
#include "onnx/importer.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "test_util.h"

namespace qd {

namespace {

Tensor run(Graph g, const Tensor& x) {
  const std::string name = g.values[g.inputs[0]].name;
  PrepareOptions p;
  p.input_shapes[name] = x.shape();
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  auto out = run_reference(g, {{name, x}});
  EXPECT_TRUE(out) << out.status().to_string();
  return out ? (*out)[0] : Tensor();
}

}  // namespace

// import -> export -> import gives the same graph (names, ops, attributes, constants) and the same outputs.
TEST(Exporter, RoundTripsAShippedModel) {
  auto a = import_onnx_file(test::source_dir() + "/models/model_bn.onnx");
  ASSERT_TRUE(a) << a.status().to_string();
  auto bytes = export_onnx_bytes(*a);
  ASSERT_TRUE(bytes) << bytes.status().to_string();
  auto b = import_onnx_bytes(*bytes, "", "exported");
  ASSERT_TRUE(b) << b.status().to_string();
  EXPECT_EQ(b->opset, a->opset);
  ASSERT_EQ(b->nodes.size(), a->nodes.size());
  for (size_t i = 0; i < a->nodes.size(); ++i) {
    const Node& na = a->nodes[i];
    const Node& nb = b->nodes[i];
    EXPECT_EQ(nb.name, na.name);
    EXPECT_EQ(nb.op, na.op);
    ASSERT_EQ(nb.attrs.all().size(), na.attrs.all().size()) << na.name;
    for (const auto& [k, v] : na.attrs.all()) EXPECT_EQ(attr_to_string(nb.attrs.all().at(k)), attr_to_string(v));
    ASSERT_EQ(nb.inputs.size(), na.inputs.size());
    for (size_t k = 0; k < na.inputs.size(); ++k) {
      EXPECT_EQ(b->values[nb.inputs[k]].name, a->values[na.inputs[k]].name);
    }
  }
  ASSERT_EQ(b->constants.size(), a->constants.size());
  for (const auto& [v, t] : a->constants) {
    const Tensor* u = b->constant(b->find_value(a->values[v].name));
    ASSERT_NE(u, nullptr) << a->values[v].name;
    EXPECT_EQ(u->shape(), t.shape());
    EXPECT_EQ(u->dtype(), t.dtype());
    EXPECT_EQ(test::max_abs_diff(*u, t), 0.0);
  }
  const Value& in = b->values[b->inputs[0]];
  EXPECT_EQ(in.shape, a->values[a->inputs[0]].shape);
  EXPECT_EQ(in.dim_names, a->values[a->inputs[0]].dim_names);
  Shape s = in.shape;
  for (auto& d : s) d = d < 0 ? 2 : d;
  const Tensor x = test::random_f32(s, 7);
  EXPECT_EQ(test::max_abs_diff(run(*a, x), run(*b, x)), 0.0);
}

TEST(Exporter, WritesEveryAttributeKind) {
  Graph g;
  g.opset = 17;
  const int x = g.add_value("x"), y = g.add_value("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {-1, 4};
  g.values[x].dim_names = {"batch", ""};
  g.values[x].has_shape = true;
  AttrMap attrs;
  attrs.set("i", int64_t{3});
  attrs.set("f", 0.5f);
  attrs.set("s", std::string("text"));
  attrs.set("ints", std::vector<int64_t>{1, 2});
  attrs.set("floats", std::vector<float>{1.5f});
  attrs.set("strings", std::vector<std::string>{"a", "b"});
  attrs.set("t", Tensor::from_i64({7, 8}));
  g.nodes.push_back(Node{"relu", OpType::Relu, 17, attrs, {x}, {y}});
  g.outputs = {y};
  auto bytes = export_onnx_bytes(g);
  ASSERT_TRUE(bytes);
  auto b = import_onnx_bytes(*bytes, "", "exported");
  ASSERT_TRUE(b) << b.status().to_string();
  for (const auto& [k, v] : attrs.all()) {
    ASSERT_TRUE(b->nodes[0].attrs.has(k)) << k;
    EXPECT_EQ(attr_to_string(b->nodes[0].attrs.all().at(k)), attr_to_string(v)) << k;
  }
  EXPECT_EQ(b->values[b->inputs[0]].dim_names, (std::vector<std::string>{"batch", ""}));
}

}  // namespace qd
