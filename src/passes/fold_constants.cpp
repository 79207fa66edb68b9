#include "ir/cost.h"
#include "ops/op.h"
#include "passes/passes.h"

namespace qd {

namespace {

// Shape and Size depend only on the (static) shape of their input.
bool shape_only(const Node& n) { return n.op == OpType::Shape || n.op == OpType::Size; }

}  // namespace

Expected<int> fold_constants(Graph& g, size_t max_bytes, int64_t max_work) {
  for (const auto& [v, t] : g.constants) {
    g.values[v].dtype = t.dtype();
    g.values[v].shape = t.shape();
    g.values[v].has_shape = true;
  }
  int folded = 0;
  std::vector<char> remove(g.nodes.size(), 0);
  // One pass in topological order: each node's shapes are inferred from what is known so far, and a node whose
  // inputs are all known is evaluated at once, so the constants it makes feed the inference of later nodes
  // (Shape -> Gather -> Concat -> Reshape folds in this single pass).
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    std::vector<const Tensor*> ins;
    std::vector<Tensor> placeholders;  // Shape/Size of a non-constant input: only the shape matters
    placeholders.reserve(n.inputs.size());
    std::vector<DType> types;
    std::vector<Shape> shapes;
    bool all_const = true;
    for (int in : n.inputs) {
      if (in < 0) {
        ins.push_back(nullptr);
        types.push_back(DType::kUndefined);
        shapes.emplace_back();
        continue;
      }
      const Value& v = g.values[in];
      if (!v.has_shape) return internal("input '" + v.name + "' has no shape").at_node(n.name, op_name(n.op));
      const Tensor* t = g.constant(in);
      if (!t && shape_only(n)) {
        placeholders.push_back(Tensor().reshaped(v.shape));
        t = &placeholders.back();
      }
      all_const &= t != nullptr;
      ins.push_back(t);
      types.push_back(v.dtype);
      shapes.push_back(v.shape);
    }
    InferCtx ctx(n, types, shapes, ins);
    QD_RETURN_IF_ERROR(infer_node(ctx));
    size_t out_bytes = 0;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] < 0) continue;
      auto count = checked_numel(ctx.out_shape(i));
      if (!count) return Status(count.status()).at_node(n.name, op_name(n.op));
      Value& out = g.values[n.outputs[i]];
      out.dtype = ctx.out_dtype(i);
      out.shape = ctx.out_shape(i);
      out.has_shape = true;
      out_bytes += static_cast<size_t>(*count) * dtype_size(out.dtype);
    }
    if (!all_const || out_bytes > max_bytes || node_work(g, n) > max_work) continue;
    std::vector<Tensor> outs = QD_TRY(run_node(ctx, ins));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] >= 0) g.constants[n.outputs[i]] = std::move(outs[i]);
    }
    remove[ni] = 1;
    ++folded;
  }
  if (folded) {
    std::vector<Node> kept;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!remove[i]) kept.push_back(std::move(g.nodes[i]));
    }
    g.nodes = std::move(kept);
    g.relink();
  }
  return folded;
}

}  // namespace qd
