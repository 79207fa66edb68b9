// fuse_conv_residual: a Conv or FusedConv whose result only an Add reads, the Add's other operand being a tensor of
// the same type and shape computed before the conv (a ResNet or YOLOv5 bottleneck's shortcut), becomes a FusedConv
// that adds it after its activation; the conv's epilogue then reads the shortcut instead of a separate pass reading
// both tensors again.
#include <algorithm>

#include "ops/fused.h"
#include "passes/graph_uses.h"
#include "passes/passes.h"

namespace qd {

Expected<int> fuse_conv_residual(Graph& g) {
  const GraphUses uses(g);
  std::vector<bool> gone(g.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    ops::FusedConvAttrs f;
    if (!QD_TRY(extendable_conv(n, &f)) || f.residual) continue;
    const int y = n.outputs[0];
    const int a = uses.sole_reader(y);
    if (a < 0 || gone[a] || g.nodes[a].op != OpType::Add || g.nodes[a].inputs.size() != 2) continue;
    const Node& add = g.nodes[a];
    const int other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
    const Value &vo = g.values[other], &vy = g.values[y];
    // The shortcut must exist when the conv runs: a graph input, or made by a node before it.
    const int producer = vo.producer;
    if (other == y || g.is_constant(other) || vo.dtype != vy.dtype || !vo.has_shape || !vy.has_shape ||
        vo.shape != vy.shape || producer >= static_cast<int>(i)) {
      continue;
    }
    if (producer < 0 && std::find(g.inputs.begin(), g.inputs.end(), other) == g.inputs.end()) continue;
    gone[a] = true;
    f.fused.push_back(add.name);
    n.op = OpType::FusedConv;
    ops::set_fused_conv_attrs(n, f);
    n.inputs.resize(4, -1);
    n.inputs[3] = other;
    n.outputs[0] = add.outputs[0];
    ++fused;
  }
  if (fused) drop_nodes(g, gone);
  return fused;
}

}  // namespace qd
