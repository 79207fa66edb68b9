#include <gtest/gtest.h>

#include "ir/graph.h"

namespace qd {

namespace {
// x -> Relu -> a -> Add(a, a) -> y, plus an unused Relu branch.
Graph small_graph() {
  Graph g;
  const int x = g.add_value("x"), a = g.add_value("a"), y = g.add_value("y"), dead = g.add_value("dead");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.nodes.push_back(Node{"add", OpType::Add, 13, {}, {a, a}, {y}});
  g.nodes.push_back(Node{"relu", OpType::Relu, 13, {}, {x}, {a}});
  g.nodes.push_back(Node{"unused", OpType::Relu, 13, {}, {x}, {dead}});
  g.outputs = {y};
  return g;
}
}  // namespace

TEST(Graph, TopoSortOrdersProducersFirst) {
  Graph g = small_graph();
  EXPECT_FALSE(g.verify().is_ok());  // add reads 'a' before relu produces it
  ASSERT_TRUE(g.topo_sort().is_ok());
  EXPECT_TRUE(g.verify().is_ok());
  EXPECT_EQ(g.nodes[0].name, "relu");
  EXPECT_EQ(g.values[g.find_value("y")].producer, 2);
}

TEST(Graph, RemoveDead) {
  Graph g = small_graph();
  ASSERT_TRUE(g.topo_sort().is_ok());
  g.remove_dead();
  ASSERT_EQ(g.nodes.size(), 2u);
  for (const auto& n : g.nodes) EXPECT_NE(n.name, "unused");
}

TEST(Graph, CycleIsAnError) {
  Graph g;
  const int a = g.add_value("a"), b = g.add_value("b");
  g.nodes.push_back(Node{"n1", OpType::Relu, 13, {}, {a}, {b}});
  g.nodes.push_back(Node{"n2", OpType::Relu, 13, {}, {b}, {a}});
  g.outputs = {b};
  Status s = g.topo_sort();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cycle"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("n1"), std::string::npos);
}

TEST(Graph, DanglingInputIsAnError) {
  Graph g;
  const int a = g.add_value("a"), b = g.add_value("b");
  g.nodes.push_back(Node{"n1", OpType::Relu, 13, {}, {a}, {b}});
  g.outputs = {b};
  Status s = g.topo_sort();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("dangling"), std::string::npos) << s.to_string();
  EXPECT_EQ(s.node(), "n1");
}

TEST(Graph, TextDump) {
  Graph g = small_graph();
  ASSERT_TRUE(g.topo_sort().is_ok());
  const std::string t = g.to_text();
  EXPECT_NE(t.find("Relu(%x)"), std::string::npos) << t;
  EXPECT_NE(t.find("output %y"), std::string::npos) << t;
}

}  // namespace qd
