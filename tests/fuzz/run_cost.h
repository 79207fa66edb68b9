// What running a prepared graph on the reference costs, as the fuzz harnesses bound it: the elements of every value,
// and the work (MACs, and for window ops their output times the window, which node_macs does not count: an
// AveragePool with a 14x3 window over 346 K outputs took 13 s under the fuzzer's instrumentation).
#pragma once

#include <vector>

#include "ir/cost.h"
#include "ir/graph.h"

namespace qd::fuzz {

// False when a value's size overflows.
inline bool run_cost(const Graph& g, double* elements, double* work) {
  *elements = *work = 0;
  for (const Value& v : g.values) {
    if (!v.has_shape) continue;
    auto n = checked_numel(v.shape);
    if (!n) return false;
    *elements += static_cast<double>(*n);
  }
  for (const Node& n : g.nodes) {
    *work += static_cast<double>(node_macs(g, n));
    auto k = n.attrs.get_ints("kernel_shape", std::vector<int64_t>{});
    if (k && !k->empty() && !n.outputs.empty() && n.outputs[0] >= 0 && g.values[n.outputs[0]].has_shape) {
      double w = 1;
      for (int64_t d : *k) w *= static_cast<double>(d);
      auto out = checked_numel(g.values[n.outputs[0]].shape);
      if (out) *work += w * static_cast<double>(*out);
    }
  }
  return true;
}

}  // namespace qd::fuzz
