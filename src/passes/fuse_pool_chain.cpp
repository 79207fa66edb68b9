// fuse_pool_chains: MaxPools that each pool the one before with the same size-keeping window (YOLOv5's SPPF: x, mp(x),
// mp(mp(x)), ... joined by a Concat) become one MaxPoolChain with an output per pool, so that a target can run them as
// one pass over the input that keeps the window maxima of each step on chip. Which chains a target runs that way
// depends on its kernels: `fits` says it (a null rule fuses none).
#include "ops/fused.h"
#include "passes/graph_uses.h"
#include "passes/passes.h"

namespace qd {

Expected<int> fuse_pool_chains(Graph& g, const PoolChainRule& fits) {
  if (!fits) return 0;
  const GraphUses uses(g);
  std::vector<bool> gone(g.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& first = g.nodes[i];
    if (gone[i] || first.op != OpType::MaxPool || first.outputs.size() != 1 || first.inputs.empty() ||
        first.inputs[0] < 0) {
      continue;
    }
    const Shape& x = g.values[first.inputs[0]].shape;
    const std::vector<int64_t> k = QD_TRY(ops::same_size_pool_window(first, x));
    if (k.empty()) continue;
    // Each next pool reads the one before (which others may read too: the Concat) with the same window.
    std::vector<int> chain = {static_cast<int>(i)};
    for (;;) {
      const int y = g.nodes[chain.back()].outputs[0];
      int next = -1;
      for (int r : uses.readers[y]) {
        const Node& n = g.nodes[r];
        if (!gone[r] && n.op == OpType::MaxPool && n.outputs.size() == 1 && n.inputs[0] == y &&
            QD_TRY(ops::same_size_pool_window(n, x)) == k) {
          next = r;
          break;
        }
      }
      if (next < 0 || !fits(x, static_cast<int>(chain.size()) + 1)) break;
      chain.push_back(next);
    }
    if (chain.size() < 2) continue;
    std::vector<std::string> names;
    for (size_t c = 1; c < chain.size(); ++c) {
      const Node& n = g.nodes[chain[c]];
      names.push_back(n.name);
      first.outputs.push_back(n.outputs[0]);
      gone[chain[c]] = true;
    }
    first.op = OpType::MaxPoolChain;
    first.attrs.set("fused", names);
    ++fused;
  }
  if (fused) drop_nodes(g, gone);
  return fused;
}

}  // namespace qd
