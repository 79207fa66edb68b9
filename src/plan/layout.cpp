#include "plan/layout.h"

#include <map>

#include "ops/plugin_registry.h"

namespace qd {

const char* layout_name(Layout l) { return l == Layout::kFast ? "fast" : "onnx"; }

int LayoutPlan::count(Layout l) const {
  int n = 0;
  for (Layout x : nodes) n += x == l;
  return n;
}

LayoutPlan plan_layouts(const Graph& g, const Target& t, const std::function<TensorPrecision(int)>& wanted) {
  LayoutPlan p;
  p.nodes.assign(g.nodes.size(), Layout::kOnnx);
  p.values.assign(g.values.size(), Layout::kOnnx);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    // Plugin kernels see their tensors in the ONNX form (include/qdeploy/plugin.h), whatever their dtypes.
    const TensorPrecision w = is_plugin_op(g.nodes[i].op) ? TensorPrecision::kFp32 : wanted(static_cast<int>(i));
    if (w != TensorPrecision::kFp32 && t.supports(g, g.nodes[i], uniform_formats(g, g.nodes[i], w)).yes) {
      p.nodes[i] = Layout::kFast;
    }
  }
  std::vector<bool> fast_reader(g.values.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].inputs) {
      if (v >= 0 && p.nodes[i] == Layout::kFast) fast_reader[v] = true;
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (p.nodes[i] != Layout::kFast) continue;
    const bool onnx_ok = t.writes_onnx_form(g, g.nodes[i]);
    for (int v : g.nodes[i].outputs) {
      if (v >= 0 && (fast_reader[v] || !onnx_ok)) p.values[v] = Layout::kFast;
    }
  }
  std::map<std::pair<int, Layout>, size_t> at;  // (value, layout) -> its reformat
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].inputs) {
      if (v < 0 || g.is_constant(v) || p.values[v] == p.nodes[i]) continue;
      auto [it, fresh] = at.emplace(std::make_pair(v, p.nodes[i]), p.reformats.size());
      if (fresh) p.reformats.push_back({v, p.nodes[i], {}});
      auto& readers = p.reformats[it->second].readers;
      if (readers.empty() || readers.back() != static_cast<int>(i)) readers.push_back(static_cast<int>(i));
    }
  }
  for (int v : g.outputs) {  // bound in the ONNX form (the engine converts to other binding formats)
    if (p.values[v] == Layout::kFast && at.emplace(std::make_pair(v, Layout::kOnnx), p.reformats.size()).second) {
      p.reformats.push_back({v, Layout::kOnnx, {}});
    }
  }
  return p;
}

}  // namespace qd
