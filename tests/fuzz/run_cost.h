// What running a prepared graph on the reference costs, as the fuzz harnesses bound it: the elements of every value,
// and the work (ir/cost.h's node_work).
#pragma once

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
  for (const Node& n : g.nodes) *work += static_cast<double>(node_work(g, n));
  return true;
}

}  // namespace qd::fuzz
