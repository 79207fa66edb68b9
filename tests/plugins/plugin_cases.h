// The generic plugin harness's cases: a plugin op's declared TestCase as a one-node graph with seeded random inputs
// and the reference's outputs. Header-only, shared by the CPU harness (tests/plugins/) and the CUDA one (tests/cuda/).
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "core/half.h"
#include "ops/op.h"
#include "ops/plugin_registry.h"
#include "test_util.h"

namespace qd::test {

struct PluginCase {
  Graph graph;                  // inputs in0.., one node "case", outputs out0..; values typed and shaped
  std::vector<Tensor> inputs;   // in the storage dtype
  std::vector<Tensor> expected; // the reference's outputs (storage dtype for float outputs)
};

inline Tensor to_f32(const Tensor& t) {
  if (t.dtype() != DType::kFloat16) return t;
  Tensor f = *Tensor::make(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    static_cast<float*>(f.raw())[i] = half_to_float(static_cast<const uint16_t*>(t.raw())[i]);
  }
  return f;
}

inline Tensor to_f16(const Tensor& t) {
  Tensor h = *Tensor::make(DType::kFloat16, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    static_cast<uint16_t*>(h.raw())[i] = float_to_half(static_cast<const float*>(t.raw())[i]);
  }
  return h;
}

// Runs the graph's one node on `inputs` (inference, then the reference through run_node).
inline Expected<std::vector<Tensor>> run_plugin_case(const Graph& g, const std::vector<Tensor>& inputs) {
  const Node& n = g.nodes.at(0);
  std::vector<DType> types;
  std::vector<Shape> shapes;
  std::vector<const Tensor*> values;
  for (const Tensor& t : inputs) {
    types.push_back(t.dtype());
    shapes.push_back(t.shape());
    values.push_back(&t);
  }
  InferCtx ctx(n, types, shapes, values);
  QD_RETURN_IF_ERROR(infer_node(ctx));
  return run_node(ctx, values);
}

// The same graph with its float inputs (and outputs) retyped.
inline Graph with_input_dtype(Graph g, DType t) {
  for (auto& v : g.values) {
    if (v.dtype == DType::kFloat32 || v.dtype == DType::kFloat16) v.dtype = t;
  }
  return g;
}

inline Expected<PluginCase> make_plugin_case(const PluginOp& p, const qdeploy::TestCase& tc, DType storage,
                                             uint32_t seed) {
  PluginCase c;
  Graph& g = c.graph;
  Node n;
  n.name = "case";
  n.op = p.id;
  for (const auto& [name, v] : tc.attrs) n.attrs.set(name, std::visit([](const auto& x) { return AttrValue(x); }, v));
  for (size_t i = 0; i < tc.inputs.size(); ++i) {
    const int v = g.add_value("in" + std::to_string(i));
    const auto allowed = p.def.inputs[i].dtypes;
    const bool is_float = std::find(allowed.begin(), allowed.end(), qdeploy::DataType::kFloat32) != allowed.end();
    g.values[v].dtype = is_float ? storage : from_plugin_dtype(allowed[0]);
    g.values[v].shape = tc.inputs[i];
    g.values[v].has_shape = true;
    g.inputs.push_back(v);
    n.inputs.push_back(v);
    const auto range = i < tc.ranges.size() ? tc.ranges[i] : std::pair<float, float>{-1.f, 1.f};
    Tensor t = random_f32(tc.inputs[i], seed + static_cast<uint32_t>(i) * 7919u, range.first, range.second);
    c.inputs.push_back(g.values[v].dtype == DType::kFloat16 ? to_f16(t) : std::move(t));
  }
  for (size_t i = 0; i < p.def.outputs.size(); ++i) {
    const int v = g.add_value("out" + std::to_string(i));
    n.outputs.push_back(v);
    g.outputs.push_back(v);
  }
  g.nodes.push_back(n);
  g.relink();
  c.expected = QD_TRY(run_plugin_case(g, c.inputs));
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    Value& v = g.values[n.outputs[i]];
    v.dtype = c.expected[i].dtype();
    v.shape = c.expected[i].shape();
    v.has_shape = true;
  }
  return c;
}

}  // namespace qd::test
