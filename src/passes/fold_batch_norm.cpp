// fold_batch_norm: Conv -> BatchNormalization (inference form, constant statistics) becomes one Conv whose weights and
// bias carry the normalization: w' = w * s, b' = b * s + (beta - mean * s), s = gamma / sqrt(var + eps) per output
// channel, in float32 as the GPU packing computed it.
#include <cmath>

#include "passes/graph_uses.h"
#include "passes/passes.h"

namespace qd {

namespace {
bool f32(const Tensor* t, int64_t n) { return t && t->dtype() == DType::kFloat32 && t->numel() == n; }
}  // namespace

Expected<int> fold_batch_norm(Graph& g, const std::set<std::string>& keep) {
  const GraphUses uses(g);
  std::vector<bool> gone(g.nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (n.op != OpType::Conv || n.inputs.size() < 2 || n.outputs.size() != 1 || keep.count(n.name)) continue;
    const Tensor* w = g.constant(n.inputs[1]);
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
    const Tensor* bias = has_bias ? g.constant(n.inputs[2]) : nullptr;
    if (!w || w->dtype() != DType::kFloat32 || w->shape().size() < 3 || (has_bias && !bias)) continue;
    const int64_t m = w->shape()[0];
    if (has_bias && !f32(bias, m)) continue;
    const int b = uses.sole_reader(n.outputs[0]);
    if (b < 0 || gone[b]) continue;
    const Node& bn = g.nodes[b];
    if (bn.op != OpType::BatchNormalization || bn.inputs.size() != 5 || bn.inputs[0] != n.outputs[0] ||
        bn.outputs.empty() || bn.outputs[0] < 0) {
      continue;
    }
    bool trailing = false;  // training-mode outputs (running mean and variance) are not folded away
    for (size_t k = 1; k < bn.outputs.size(); ++k) trailing |= bn.outputs[k] >= 0;
    const Tensor *gamma = g.constant(bn.inputs[1]), *beta = g.constant(bn.inputs[2]), *mean = g.constant(bn.inputs[3]),
                 *var = g.constant(bn.inputs[4]);
    auto eps = bn.attrs.get_float("epsilon", 1e-5f);
    if (trailing || !eps || !f32(gamma, m) || !f32(beta, m) || !f32(mean, m) || !f32(var, m)) continue;
    Tensor w2 = w->clone(), b2(DType::kFloat32, {m});
    const int64_t per_k = w->numel() / m;
    for (int64_t k = 0; k < m; ++k) {
      const float s = gamma->data<float>()[k] / std::sqrt(var->data<float>()[k] + *eps);
      const float shift = beta->data<float>()[k] - mean->data<float>()[k] * s;
      float* row = w2.data<float>() + k * per_k;
      for (int64_t e = 0; e < per_k; ++e) row[e] = row[e] * s;
      b2.data<float>()[k] = (bias ? bias->data<float>()[k] : 0.f) * s + shift;
    }
    // New constants: the originals may be shared with other nodes.
    n.inputs.resize(3);
    n.inputs[1] = g.add_constant(n.name + ":bn_folded_w", std::move(w2));
    n.inputs[2] = g.add_constant(n.name + ":bn_folded_b", std::move(b2));
    n.outputs[0] = bn.outputs[0];
    gone[b] = true;
    ++folded;
  }
  if (folded) {
    drop_nodes(g, gone);
    g.remove_dead();  // the unfolded weights, unless another node reads them
  }
  return folded;
}

}  // namespace qd
