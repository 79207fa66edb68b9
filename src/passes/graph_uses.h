// Who reads each value of a graph: what the fusion passes ask before folding a node into its producer.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ops/fused.h"

namespace qd {

struct GraphUses {
  explicit GraphUses(const Graph& g) : readers(g.values.size()), uses(g.use_counts()), is_output(g.values.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int v : g.nodes[i].inputs) {
        if (v >= 0) readers[v].push_back(static_cast<int>(i));
      }
    }
    for (int o : g.outputs) is_output[o] = true;
  }
  // The only node reading v (once), v not being a graph output; -1 otherwise.
  int sole_reader(int v) const {
    if (is_output[v] || uses[v] != 1 || readers[v].size() != 1) return -1;
    return readers[v][0];
  }
  std::vector<std::vector<int>> readers;  // per value: the nodes reading it, once per input slot
  std::vector<int> uses;
  std::vector<bool> is_output;
};

// Drops the nodes marked in `gone` and recomputes producers; value ids stay (the values the dropped nodes made are
// left unread).
inline void drop_nodes(Graph& g, const std::vector<bool>& gone) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!gone[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  g.relink();
}

// A Conv or FusedConv with one output that a fusion may extend: its fused attributes so far (none for a Conv) in *f.
inline Expected<bool> extendable_conv(const Node& n, ops::FusedConvAttrs* f) {
  *f = {};
  if ((n.op != OpType::Conv && n.op != OpType::FusedConv) || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  if (n.op == OpType::FusedConv) *f = QD_TRY(ops::fused_conv_attrs(n));
  return true;
}

}  // namespace qd
