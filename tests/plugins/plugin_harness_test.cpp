// The generic plugin harness: every registered plugin op, every test case it declares, through the paths a model
// takes (import-free graph, shape inference, the reference through run_node, fp16 storage, the plan codec), and its
// attribute schema at the edges of each declared range. The CUDA kernels of the same cases are checked against the
// reference by tests/cuda/plugin_ops_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/half.h"
#include "ops/plugin_registry.h"
#include "plan/graph_codec.h"
#include "plugin_cases.h"
#include "qdeploy/plugin.h"
#include "test_util.h"

namespace qd {
namespace {

class PluginHarness : public ::testing::Test {
 protected:
  void SetUp() override { qdeploy::register_builtin_plugins(); }
};

TEST_F(PluginHarness, EveryBuiltInPluginIsRegisteredAndDeclaresCases) {
  ASSERT_NE(find_plugin_op("ai.qdeploy::DCNv4@1"), nullptr);
  for (const PluginOp* p : plugin_ops()) {
    EXPECT_TRUE(check_op_def(p->def).is_ok()) << p->qualified;
    EXPECT_FALSE(p->def.tests.empty()) << p->qualified;
  }
}

TEST_F(PluginHarness, EveryCaseMatchesItsReferenceThroughEveryPath) {
  int cases = 0;
  for (const PluginOp* p : plugin_ops()) {
    if (p->source != "built in") continue;  // ops other tests registered have their own checks
    for (const auto& tc : p->def.tests) {
      SCOPED_TRACE(p->qualified + " case " + tc.name);
      auto c = test::make_plugin_case(*p, tc, DType::kFloat32, 7);
      ASSERT_TRUE(c) << c.status().to_string();
      // The reference called directly into buffers pre-filled with NaN: it writes every output element.
      const qdeploy::Attrs attrs = *resolve_plugin_attrs(p->def, c->graph.nodes[0].attrs);
      std::vector<qdeploy::TensorView> in, out;
      for (const Tensor& t : c->inputs) in.push_back({qdeploy::DataType::kFloat32, t.shape(), const_cast<void*>(t.raw())});
      std::vector<Tensor> direct;
      for (const Tensor& t : c->expected) {
        direct.push_back(*Tensor::make(DType::kFloat32, t.shape()));
        auto* d = static_cast<float*>(direct.back().raw());
        for (int64_t i = 0; i < t.numel(); ++i) d[i] = std::numeric_limits<float>::quiet_NaN();
      }
      for (Tensor& t : direct) out.push_back({qdeploy::DataType::kFloat32, t.shape(), t.raw()});
      ASSERT_TRUE(p->def.reference(attrs, in, out).is_ok());
      for (size_t o = 0; o < direct.size(); ++o) {
        EXPECT_EQ(test::max_abs_diff(direct[o], c->expected[o]), 0.0) << "output " << o;
        ASSERT_GT(direct[o].numel(), 0);
      }
      // The plan codec keeps the op and its attributes: the decoded graph computes the same.
      auto bytes = encode_graph(c->graph);
      ASSERT_TRUE(bytes);
      auto back = decode_graph(*bytes);
      ASSERT_TRUE(back) << back.status().to_string();
      auto again = test::run_plugin_case(*back, c->inputs);
      ASSERT_TRUE(again) << again.status().to_string();
      for (size_t o = 0; o < again->size(); ++o) EXPECT_EQ(test::max_abs_diff((*again)[o], c->expected[o]), 0.0);
      // fp16 storage: the same case with inputs rounded to fp16 gives the fp32 result on those inputs, rounded.
      auto h = test::make_plugin_case(*p, tc, DType::kFloat16, 7);
      ASSERT_TRUE(h) << h.status().to_string();
      std::vector<Tensor> widened;
      for (const Tensor& t : h->inputs) widened.push_back(test::to_f32(t));
      auto ref = test::run_plugin_case(test::with_input_dtype(h->graph, DType::kFloat32), widened);
      ASSERT_TRUE(ref) << ref.status().to_string();
      for (size_t o = 0; o < ref->size(); ++o) {
        const Tensor got = test::to_f32(h->expected[o]);
        const float* a = static_cast<const float*>(got.raw());
        const float* b = static_cast<const float*>((*ref)[o].raw());
        for (int64_t i = 0; i < got.numel(); ++i) {
          ASSERT_NEAR(a[i], b[i], std::abs(b[i]) * 1e-3 + 1e-7) << "fp16 output " << o << " element " << i;
        }
      }
      ++cases;
    }
  }
  EXPECT_GE(cases, 5);
}

TEST_F(PluginHarness, EveryDeclaredRangeIsEnforced) {
  for (const PluginOp* p : plugin_ops()) {
    if (p->source != "built in") continue;
    for (const auto& spec : p->def.attrs) {
      if (spec.type != qdeploy::AttrType::kInt && spec.type != qdeploy::AttrType::kFloat) continue;
      SCOPED_TRACE(p->qualified + " attribute " + spec.name);
      auto with = [&](double v) {
        AttrMap m;
        for (const auto& s : p->def.attrs) {
          if (s.required) m.set(s.name, int64_t{1});
        }
        if (spec.type == qdeploy::AttrType::kInt) m.set(spec.name, static_cast<int64_t>(v));
        else m.set(spec.name, static_cast<float>(v));
        return resolve_plugin_attrs(p->def, m);
      };
      if (std::isfinite(spec.min)) {
        EXPECT_TRUE(with(spec.min));
        EXPECT_FALSE(with(spec.min - 1));
      }
      if (std::isfinite(spec.max)) {
        EXPECT_TRUE(with(spec.max));
        EXPECT_FALSE(with(spec.max + 1));
      }
    }
  }
}

}  // namespace
}  // namespace qd
