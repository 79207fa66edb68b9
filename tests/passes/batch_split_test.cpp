// check_batch_split: which graphs may run their batch as separate parts (the CUDA engine's lanes).
#include <gtest/gtest.h>

#include "onnx/importer.h"
#include "passes/passes.h"
#include "test_util.h"

namespace qd {

namespace {

// x [batch, 4, 6, 6] -> conv 3x3 (8 outputs) -> `tail` -> output, prepared at the given batch.
struct Net {
  Graph g;
  int x = -1, y = -1;
  int value(const std::string& name) { return g.add_value(name); }
  int constant(const std::string& name, Tensor t) { return g.add_constant(name, std::move(t)); }
  int node(OpType op, std::vector<int> in, AttrMap attrs = {}, const std::string& name = "") {
    const int out = g.add_value((name.empty() ? op_name(op) : name) + std::to_string(g.nodes.size()));
    g.nodes.push_back({name.empty() ? std::string(op_name(op)) : name, op, 13, std::move(attrs), std::move(in), {out}});
    return out;
  }
  Net() {
    x = g.add_value("x");
    g.values[x].dtype = DType::kFloat32;
    g.values[x].shape = {-1, 4, 6, 6};
    g.values[x].dim_names = {"batch", "", "", ""};
    g.values[x].has_shape = true;
    g.inputs = {x};
    AttrMap a;
    a.set("kernel_shape", std::vector<int64_t>{3, 3});
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    y = node(OpType::Conv, {x, constant("w", test::random_f32({8, 4, 3, 3}, 1))}, a, "conv");
  }
  Status check(int out, int64_t batch = 4) {
    g.outputs = {out};
    g.opset = 13;
    g.relink();
    PrepareOptions p;
    p.input_shapes["x"] = {batch, 4, 6, 6};
    QD_RETURN_IF_ERROR(prepare_graph(g, p));
    return check_batch_split(g);
  }
};

AttrMap ints(const char* name, std::vector<int64_t> v) {
  AttrMap a;
  a.set(name, std::move(v));
  return a;
}
AttrMap axis(int64_t v) {
  AttrMap a;
  a.set("axis", v);
  return a;
}

void expect_refused(const Status& s, const std::string& node) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("'" + node + "'"), std::string::npos) << s.to_string();
}

}  // namespace

TEST(BatchSplit, PerItemOpsKeepTheBatchApart) {
  Net n;
  int y = n.node(OpType::Sigmoid, {n.y});
  y = n.node(OpType::Mul, {y, n.y});
  y = n.node(OpType::Add, {y, n.constant("bias", test::random_f32({1, 8, 1, 1}, 2))});  // broadcast along the batch
  AttrMap pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  pool.set("strides", std::vector<int64_t>{2, 2});
  y = n.node(OpType::MaxPool, {y}, pool);
  y = n.node(OpType::Transpose, {y}, ints("perm", {0, 2, 3, 1}));  // [b, 3, 3, 8]
  y = n.node(OpType::Reshape, {y, n.constant("shape", Tensor::from_i64({0, 9, 8}))});
  y = n.node(OpType::Softmax, {y}, axis(-1));
  const int a = n.node(OpType::Slice, {y, n.constant("s0", Tensor::from_i64({0})),
                                       n.constant("s1", Tensor::from_i64({4})), n.constant("s2", Tensor::from_i64({2}))});
  const int b = n.node(OpType::ReduceMax, {y}, ints("axes", {2}));
  y = n.node(OpType::Concat, {a, b}, axis(2));  // [b, 9, 5]
  y = n.node(OpType::MatMul, {y, n.constant("m", test::random_f32({5, 3}, 3))});
  Status s = n.check(y);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(BatchSplit, OpsAcrossTheBatchAreRefused) {
  {
    Net n;
    expect_refused(n.check(n.node(OpType::ReduceMean, {n.y}, ints("axes", {0}), "mean_over_batch")), "mean_over_batch");
  }
  {
    Net n;
    expect_refused(n.check(n.node(OpType::Softmax, {n.y}, axis(0), "softmax0")), "softmax0");
  }
  {
    Net n;  // the batch folded into another dim
    expect_refused(n.check(n.node(OpType::Reshape, {n.y, n.constant("shape", Tensor::from_i64({-1, 8, 18}))}, {},
                                  "fold")),
                   "fold");
  }
  {
    Net n;
    expect_refused(n.check(n.node(OpType::Transpose, {n.y}, ints("perm", {1, 0, 2, 3}), "swap")), "swap");
  }
  {
    Net n;
    expect_refused(n.check(n.node(OpType::Concat, {n.y, n.y}, axis(0), "cat0")), "cat0");
  }
  {
    Net n;  // a constant with a value per batch index
    expect_refused(n.check(n.node(OpType::Mul, {n.y, n.constant("per_item", test::random_f32({4, 8, 1, 1}, 4))}, {},
                                  "scale")),
                   "scale");
  }
  {
    Net n;
    expect_refused(n.check(n.node(OpType::Slice, {n.y, n.constant("s0", Tensor::from_i64({0})),
                                                  n.constant("s1", Tensor::from_i64({2})),
                                                  n.constant("s2", Tensor::from_i64({0}))},
                                  {}, "first_two")),
                   "first_two");
  }
  {
    Net n;  // not known to keep items apart
    AttrMap eq;
    eq.set("equation", std::string("bchw->bchw"));
    expect_refused(n.check(n.node(OpType::Einsum, {n.y}, eq, "einsum")), "einsum");
  }
  {
    Net n;  // statistics over the whole tensor, batch included
    expect_refused(n.check(n.node(OpType::ReduceMax, {n.y}, {}, "all")), "all");
  }
}

// A second input whose first dim is another symbol (here as large as the batch) is not split with it.
TEST(BatchSplit, InputsShareTheBatchSymbol) {
  for (const char* symbol : {"batch", "rows"}) {
    SCOPED_TRACE(symbol);
    Net n;
    const int t = n.value("t");
    n.g.values[t].dtype = DType::kFloat32;
    n.g.values[t].shape = {-1, 8, 1, 1};
    n.g.values[t].dim_names = {symbol, "", "", ""};
    n.g.values[t].has_shape = true;
    n.g.inputs.push_back(t);
    n.g.outputs = {n.node(OpType::Mul, {n.y, t})};
    n.g.relink();
    PrepareOptions p;
    p.input_shapes["x"] = {4, 4, 6, 6};
    p.input_shapes["t"] = {4, 8, 1, 1};
    ASSERT_TRUE(prepare_graph(n.g, p).is_ok());
    const Status s = check_batch_split(n.g);
    if (std::string(symbol) == "batch") {
      EXPECT_TRUE(s.is_ok()) << s.to_string();
    } else {
      ASSERT_FALSE(s.is_ok());
      EXPECT_NE(s.message().find("input 't'"), std::string::npos) << s.to_string();
    }
  }
}

// Squeezing every dim of 1 takes the batch away when it is 1: refused at that batch, fine at another.
TEST(BatchSplit, SqueezeOfABatchOfOne) {
  {
    Net n;
    const int y = n.node(OpType::ReduceMean, {n.y}, ints("axes", {2, 3}));  // [b, 8, 1, 1]
    Status s = n.check(n.node(OpType::Squeeze, {y}, {}, "squeeze"), 4);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  {
    Net n;
    const int y = n.node(OpType::ReduceMean, {n.y}, ints("axes", {2, 3}));
    expect_refused(n.check(n.node(OpType::Squeeze, {y}, {}, "squeeze"), 1), "squeeze");
  }
}

// The shipped detector and classifiers, made dynamic in their batch.
TEST(BatchSplit, ShippedModels) {
  const std::pair<const char*, Shape> models[] = {{"yolov5n_fmnist_det.onnx", {2, 3, 640, 640}},
                                                  {"model_bn.onnx", {2, 3, 32, 32}},
                                                  {"model_gn.onnx", {2, 3, 32, 32}}};
  for (const auto& [file, shape] : models) {
    SCOPED_TRACE(file);
    auto g = import_onnx_file(test::source_dir() + "/models/" + file);
    ASSERT_TRUE(g) << g.status().to_string();
    Graph dyn = test::with_dynamic_batch(*g);
    PrepareOptions p;
    p.input_shapes[dyn.values[dyn.inputs[0]].name] = shape;
    Status s = prepare_graph(dyn, p);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    s = check_batch_split(dyn);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
}

}  // namespace qd
