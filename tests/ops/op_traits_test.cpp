// The op traits of ops.def (ops/op_traits.h): consistent with each other, and read by the modules that used to keep
// their own switches (MACs here; the batch rule in tests/passes, keeps_range in tests/quant, the CUDA families in
// tests/cuda/op_families_test.cpp).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ir/cost.h"
#include "ops/op.h"

namespace qd {
namespace {

std::vector<OpType> all_ops() {
  std::vector<OpType> v;
  for (int i = 0; i < static_cast<int>(OpType::kCount); ++i) v.push_back(static_cast<OpType>(i));
  return v;
}

TEST(OpTraits, EveryOpHasACudaFamilyOrIsReferenceOnly) {
  // The ops no CUDA kernel runs. Giving one a family (or taking one away) is a change this list makes visible; the
  // CUDA side checks that every family named has a factory.
  const std::set<std::string> reference_only = {
      "Compress",  "ConvInteger",     "CumSum",   "DynamicQuantizeLinear", "Einsum", "GatherElements",
      "GatherND",  "GlobalLpPool",    "LRN",      "MatMulInteger",         "MeanVarianceNormalization",
      "NonZero",   "OneHot",          "Scatter",  "ScatterElements",       "ScatterND", "TopK", "Trilu"};
  std::set<std::string> found;
  for (OpType op : all_ops()) {
    const CudaFamily f = op_traits(op).cuda;
    ASSERT_LT(f, CudaFamily::kCount) << op_name(op);
    // A fused op's family is its generic fallback; MaxPoolChain has none, the CUDA builder's own layer runs it.
    if (f == CudaFamily::kReferenceOnly && op_traits(op).kind != OpKind::kFused) found.insert(op_name(op));
  }
  EXPECT_EQ(found, reference_only);
}

TEST(OpTraits, AreConsistent) {
  for (OpType op : all_ops()) {
    const OpTraits& t = op_traits(op);
    const std::string name = op_name(op);
    // MACs and quantizable weights belong to the matrix products (and to fused ops made around one).
    if (t.macs != MacsRule::kNone) {
      EXPECT_TRUE(t.kind == OpKind::kCompute || t.kind == OpKind::kFused) << name;
    }
    // Fused ops are made after the INT8 choice and the batch analysis, never imported.
    if (t.kind == OpKind::kFused) {
      EXPECT_EQ(t.int8, Int8Rule::kFloat) << name;
      EXPECT_EQ(t.batch, BatchRule::kNone) << name;
      EXPECT_FALSE(op_from_name(name).has_value()) << name;
    }
    if (t.int8 == Int8Rule::kWeights) {
      EXPECT_EQ(t.kind, OpKind::kCompute) << name;
      EXPECT_NE(t.macs, MacsRule::kNone) << name;
    }
    // Broadcasting batch rule for elementwise ops, and every elementwise op may split its batch.
    EXPECT_EQ(t.batch == BatchRule::kBroadcast, t.kind == OpKind::kElementwise) << name;
    // Ops that pass values through keep their input's element type: no casts, no quantizers.
    const bool transparent = t.int8 == Int8Rule::kTransparent || t.int8 == Int8Rule::kTransparentNearest ||
                             t.int8 == Int8Rule::kTransparentZeroPad;
    if (transparent) {
      EXPECT_NE(t.kind, OpKind::kQuantize) << name;
    }
    if (t.kind == OpKind::kQuantize) {
      EXPECT_EQ(t.int8, Int8Rule::kInteger) << name;
    }
  }
  EXPECT_EQ(op_traits(OpType::Conv).cuda, CudaFamily::kConv);
  EXPECT_EQ(op_traits(OpType::Relu).int8, Int8Rule::kTransparent);
  EXPECT_EQ(op_traits(OpType::Resize).int8, Int8Rule::kTransparentNearest);
  EXPECT_EQ(op_traits(OpType::Concat).batch, BatchRule::kConcat);
}

// node_macs reads the `macs` trait.
struct MacsNet {
  Graph g;
  int value(const Shape& s) {
    const int v = g.add_value("v" + std::to_string(g.values.size()));
    g.values[v].dtype = DType::kFloat32;
    g.values[v].shape = s;
    g.values[v].has_shape = true;
    return v;
  }
  int64_t macs(OpType op, std::vector<Shape> in, const Shape& out, AttrMap attrs = {}) {
    std::vector<int> ins;
    for (const Shape& s : in) ins.push_back(value(s));
    g.nodes.push_back({"n", op, 13, std::move(attrs), ins, {value(out)}});
    return node_macs(g, g.nodes.back());
  }
};

TEST(OpTraits, MacsFollowTheTrait) {
  MacsNet n;
  EXPECT_EQ(n.macs(OpType::Conv, {{1, 4, 8, 8}, {16, 4, 3, 3}}, {1, 16, 8, 8}), 16 * 64 * 4 * 9);
  EXPECT_EQ(n.macs(OpType::ConvTranspose, {{1, 4, 8, 8}, {4, 2, 3, 3}}, {1, 2, 10, 10}), 4 * 64 * 2 * 9);
  EXPECT_EQ(n.macs(OpType::MatMul, {{2, 5, 7}, {7, 3}}, {2, 5, 3}), 2 * 5 * 3 * 7);
  EXPECT_EQ(n.macs(OpType::Gemm, {{5, 7}, {7, 3}}, {5, 3}), 5 * 3 * 7);
  AttrMap trans;
  trans.set("transA", int64_t{1});
  EXPECT_EQ(n.macs(OpType::Gemm, {{7, 5}, {7, 3}}, {5, 3}, trans), 5 * 3 * 7);
  EXPECT_EQ(n.macs(OpType::Relu, {{2, 3}}, {2, 3}), 0);
  EXPECT_EQ(n.macs(OpType::ConvInteger, {{1, 4, 8, 8}, {16, 4, 3, 3}}, {1, 16, 8, 8}), 0);
}

}  // namespace
}  // namespace qd
