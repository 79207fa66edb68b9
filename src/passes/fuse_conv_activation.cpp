// fuse_conv_activation: a Conv (or FusedConv without activation or residual yet) whose result only an activation
// reads becomes a FusedConv applying it: Relu, Sigmoid, LeakyRelu, HardSwish, HardSigmoid, Clip with constant
// bounds, and SiLU written as x * Sigmoid(x) (how PyTorch exports nn.SiLU before opset 24's Swish).
#include <algorithm>
#include <optional>

#include "ops/fused.h"
#include "passes/graph_uses.h"
#include "passes/passes.h"

namespace qd {

namespace {

using ops::Activation;

// The activation node a reading value v (its only reader), as a FusedConv attribute set; kNone if it is none.
ops::FusedConvAttrs single_activation(const Graph& g, const Node& a, int v) {
  ops::FusedConvAttrs f;
  if (a.inputs.empty() || a.inputs[0] != v || a.outputs.size() != 1) return f;
  auto flt = [&](const char* name, float def) {
    auto x = a.attrs.get_float(name, def);
    return x ? std::optional<float>(*x) : std::nullopt;
  };
  switch (a.op) {
    case OpType::Relu: f.act = Activation::kRelu; break;
    case OpType::Sigmoid: f.act = Activation::kSigmoid; break;
    case OpType::HardSwish: f.act = Activation::kHardSwish; break;
    case OpType::LeakyRelu:
      if (auto al = flt("alpha", 0.01f)) f.act = Activation::kLeakyRelu, f.alpha = *al;
      break;
    case OpType::HardSigmoid:
      if (auto al = flt("alpha", 0.2f), be = flt("beta", 0.5f); al && be) {
        f.act = Activation::kHardSigmoid, f.alpha = *al, f.beta = *be;
      }
      break;
    case OpType::Clip:
      if (auto known = ops::clip_constant_bounds(g, a, &f.alpha, &f.beta); known && *known) f.act = Activation::kClip;
      break;
    default: break;
  }
  return f;
}

}  // namespace

Expected<int> fuse_conv_activation(Graph& g) {
  const GraphUses uses(g);
  std::vector<bool> gone(g.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    ops::FusedConvAttrs f;
    if (!QD_TRY(extendable_conv(n, &f)) || f.act != Activation::kNone || f.residual) continue;
    const int y = n.outputs[0];
    std::vector<int> absorbed;
    int out = -1;
    if (const int a = uses.sole_reader(y); a >= 0) {
      const ops::FusedConvAttrs act = single_activation(g, g.nodes[a], y);
      if (act.act != Activation::kNone) {
        f.act = act.act, f.alpha = act.alpha, f.beta = act.beta;
        absorbed = {a};
        out = g.nodes[a].outputs[0];
      }
    } else if (!uses.is_output[y] && uses.readers[y].size() == 2) {  // SiLU: Mul(y, Sigmoid(y))
      int sig = -1, mul = -1;
      for (int r : uses.readers[y]) {
        if (g.nodes[r].op == OpType::Sigmoid) sig = r;
        if (g.nodes[r].op == OpType::Mul) mul = r;
      }
      if (sig >= 0 && mul >= 0 && g.nodes[sig].inputs[0] == y && uses.sole_reader(g.nodes[sig].outputs[0]) == mul) {
        const auto& mi = g.nodes[mul].inputs;
        const int s = g.nodes[sig].outputs[0];
        if ((mi[0] == y && mi[1] == s) || (mi[1] == y && mi[0] == s)) {
          f.act = Activation::kSilu;
          absorbed = {sig, mul};
          out = g.nodes[mul].outputs[0];
        }
      }
    }
    if (absorbed.empty() || std::any_of(absorbed.begin(), absorbed.end(), [&](int k) { return gone[k]; })) continue;
    for (int k : absorbed) {
      gone[k] = true;
      f.fused.push_back(g.nodes[k].name);
    }
    n.op = OpType::FusedConv;
    ops::set_fused_conv_attrs(n, f);
    n.outputs[0] = out;
    ++fused;
  }
  if (fused) drop_nodes(g, gone);
  return fused;
}

}  // namespace qd
