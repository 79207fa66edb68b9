#include "passes/passes.h"

namespace qd {

Status prepare_graph(Graph& g, const PrepareOptions& opt) {
  QD_RETURN_IF_ERROR(bind_input_shapes(g, opt.input_shapes));
  for (int round = 0; round < 64; ++round) {
    QD_RETURN_IF_ERROR(infer_shapes(g));
    const int folded = QD_TRY(fold_constants(g));
    if (folded == 0) break;
  }
  g.remove_dead();
  return infer_shapes(g);
}

}  // namespace qd
