#include "ops/op.h"
#include "passes/passes.h"

namespace qd {

Status infer_shapes(Graph& g) {
  for (const auto& [v, t] : g.constants) {
    g.values[v].dtype = t.dtype();
    g.values[v].shape = t.shape();
    g.values[v].has_shape = true;
  }
  for (int v : g.inputs) {
    if (!g.values[v].has_shape || !is_static(g.values[v].shape)) {
      return invalid("input '" + g.values[v].name + "' has no static shape; bind it first (--shapes)");
    }
  }
  for (const Node& n : g.nodes) {
    for (int in : n.inputs) {
      if (in >= 0 && !g.values[in].has_shape) {
        return internal("input '" + g.values[in].name + "' has no shape").at_node(n.name, op_name(n.op));
      }
      if (in >= 0 && g.values[in].dtype == DType::kUndefined) {
        return invalid("input '" + g.values[in].name + "' has no element type; the model or plan is malformed")
            .at_node(n.name, op_name(n.op));
      }
    }
    InferCtx ctx = infer_ctx_for(g, n);
    QD_RETURN_IF_ERROR(infer_node(ctx));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] < 0) continue;
      Value& out = g.values[n.outputs[i]];
      if (ctx.out_dtype(i) == DType::kUndefined) {
        return internal("inference left output " + std::to_string(i) + " untyped").at_node(n.name, op_name(n.op));
      }
      auto count = checked_numel(ctx.out_shape(i));
      if (!count) return Status(count.status()).at_node(n.name, op_name(n.op));
      out.dtype = ctx.out_dtype(i);
      out.shape = ctx.out_shape(i);
      out.has_shape = true;
    }
  }
  return Status::ok();
}

}  // namespace qd
