#include "passes/passes.h"

namespace qd {

Status prepare_graph(Graph& g, const PrepareOptions& opt) {
  QD_RETURN_IF_ERROR(bind_input_shapes(g, opt.input_shapes));
  for (int v : g.inputs) {
    if (!g.values[v].has_shape || !is_static(g.values[v].shape)) return internal("unbound input after binding");
  }
  QD_RETURN_IF_ERROR(fold_constants(g).status());
  g.remove_dead();
  return infer_shapes(g);
}

Expected<FusionCounts> fuse_graph(Graph& g, const std::set<std::string>& keep_bn, const FusionRules& rules) {
  FusionCounts c;
  c.batch_norms = QD_TRY(fold_batch_norm(g, keep_bn));
  c.activations = QD_TRY(fuse_conv_activation(g));
  c.residuals = QD_TRY(fuse_conv_residual(g));
  c.pool_chains = QD_TRY(fuse_pool_chains(g, rules.pool_chain));
  c.gelus = QD_TRY(fuse_gelu(g));
  c.slice_concats = QD_TRY(fuse_slice_concat(g, rules.slice_concat));
  return c;
}

}  // namespace qd
