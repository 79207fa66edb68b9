#include <gtest/gtest.h>

#include "ir/cost.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "test_util.h"

namespace qd {

namespace {
// The shape subgraph PyTorch exports for x.view(x.size(0), -1):
// Shape(x) -> Gather(0) -> Unsqueeze(0) -> Concat(.., [-1]) -> Reshape(x, .)
Graph view_graph() {
  Graph g;
  g.opset = 13;
  auto v = [&](const char* n) { return g.add_value(n); };
  const int x = v("x"), shp = v("shp"), idx = v("idx"), n0 = v("n0"), ax = v("ax"), n1 = v("n1"), m1 = v("m1"),
            cat = v("cat"), y = v("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {-1, 3, 4};
  g.values[x].dim_names = {"batch", "", ""};
  g.values[x].has_shape = true;
  g.constants[idx] = Tensor::scalar_i64(0);
  g.constants[ax] = Tensor::from_i64({0});
  g.constants[m1] = Tensor::from_i64({-1});
  AttrMap axis0;
  axis0.set("axis", int64_t{0});
  g.nodes.push_back(Node{"shape", OpType::Shape, 13, {}, {x}, {shp}});
  g.nodes.push_back(Node{"gather", OpType::Gather, 13, axis0, {shp, idx}, {n0}});
  g.nodes.push_back(Node{"unsq", OpType::Unsqueeze, 13, {}, {n0, ax}, {n1}});
  g.nodes.push_back(Node{"concat", OpType::Concat, 13, axis0, {n1, m1}, {cat}});
  g.nodes.push_back(Node{"reshape", OpType::Reshape, 13, {}, {x, cat}, {y}});
  g.outputs = {y};
  g.relink();
  return g;
}
}  // namespace

TEST(Prepare, FoldsShapeSubgraphs) {
  Graph g = view_graph();
  PrepareOptions opt;
  opt.input_shapes["x"] = {2, 3, 4};
  ASSERT_TRUE(prepare_graph(g, opt).is_ok());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, OpType::Reshape);
  EXPECT_EQ(g.values[g.outputs[0]].shape, (Shape{2, 12}));
  auto out = run_reference(g, {{"x", test::random_f32({2, 3, 4}, 1)}});
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 12}));
}

TEST(Prepare, UnboundSymbolicDimIsAnError) {
  Graph g = view_graph();
  Status s = prepare_graph(g, {});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("batch"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("--shapes"), std::string::npos) << s.to_string();
}

TEST(Prepare, BindErrors) {
  Graph g = view_graph();
  PrepareOptions opt;
  opt.input_shapes["x"] = {2, 5, 4};  // dim 1 is fixed at 3
  EXPECT_FALSE(prepare_graph(g, opt).is_ok());
  Graph g2 = view_graph();
  PrepareOptions opt2;
  opt2.input_shapes["nope"] = {1};
  Status s = prepare_graph(g2, opt2);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("no input named 'nope'"), std::string::npos);
}

// A pooling window over a constant: folding evaluates it, so it folds only while its work (window x outputs, which
// MACs do not count) is within the bound, however small its result.
TEST(Prepare, FoldsConstantWindowOpsOnlyWithinTheWorkBound) {
  auto pool_graph = [](int64_t window) {
    Graph g;
    g.opset = 13;
    const int x = g.add_value("x"), c = g.add_value("c"), p = g.add_value("p"), y = g.add_value("y");
    g.inputs = {x};
    g.values[x].dtype = DType::kFloat32;
    g.values[x].shape = {1, 1, 1, 1};
    g.values[x].has_shape = true;
    g.constants[c] = test::random_f32({1, 4, 64, 64}, 3);
    AttrMap a;
    a.set("kernel_shape", std::vector<int64_t>{window, window});
    g.nodes.push_back(Node{"pool", OpType::MaxPool, 13, a, {c}, {p}});
    g.nodes.push_back(Node{"add", OpType::Add, 13, {}, {x, p}, {y}});
    g.outputs = {y};
    g.relink();
    return g;
  };
  Graph small = pool_graph(3);  // 62x62x4 outputs x 9: folds
  ASSERT_TRUE(infer_shapes(small).is_ok());
  EXPECT_EQ(*fold_constants(small, size_t{64} << 20, 1 << 20), 1);
  EXPECT_EQ(small.nodes.size(), 1u);
  Graph large = pool_graph(32);  // 33x33x4 outputs x 1024 = 4.5M window reads: stays a node
  ASSERT_TRUE(infer_shapes(large).is_ok());
  EXPECT_EQ(node_work(large, large.nodes[0]), int64_t{33} * 33 * 4 * 1024);
  EXPECT_EQ(*fold_constants(large, size_t{64} << 20, 1 << 20), 0);
  ASSERT_EQ(large.nodes.size(), 2u);
  auto out = run_reference(large, {{"x", test::random_f32({1, 1, 1, 1}, 1)}});
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 4, 33, 33}));
}

// An Einsum's work is its loop's (every label combination, times the operands), which it has no MAC trait for: the
// fold and the fuzz harnesses' run limit bound it by that.
TEST(Prepare, EinsumWorkIsItsLoop) {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), c = g.add_value("c"), e = g.add_value("e"), y = g.add_value("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {4, 8, 16};
  g.values[x].has_shape = true;
  g.constants[c] = test::random_f32({4, 8, 16}, 5);
  AttrMap a;
  a.set("equation", std::string("bij, bgk -> bik"));
  g.nodes.push_back(Node{"einsum", OpType::Einsum, 13, a, {c, c}, {e}});
  g.nodes.push_back(Node{"add", OpType::Add, 13, {}, {x, e}, {y}});
  g.outputs = {y};
  g.relink();
  ASSERT_TRUE(infer_shapes(g).is_ok());
  EXPECT_EQ(node_work(g, g.nodes[0]), int64_t{4} * 8 * 16 * 8 * 16 * 2);  // b i j g k, two operands
  Graph held = g;
  EXPECT_EQ(*fold_constants(held, size_t{64} << 20, 1 << 16), 0);
  EXPECT_EQ(*fold_constants(g, size_t{64} << 20, 1 << 20), 1);
}

// A value read without an element type (a malformed plan's input) is the model's fault, not an internal error.
TEST(Prepare, UntypedInputIsInvalid) {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), y = g.add_value("y");
  g.inputs = {x};
  g.values[x].shape = {2, 3};
  g.values[x].has_shape = true;
  g.nodes.push_back(Node{"relu", OpType::Relu, 13, {}, {x}, {y}});
  g.outputs = {y};
  g.relink();
  const Status st = infer_shapes(g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("no element type"), std::string::npos) << st.to_string();
}

}  // namespace qd
