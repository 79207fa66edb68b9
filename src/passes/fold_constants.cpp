#include "ops/op.h"
#include "passes/passes.h"

namespace qd {

Expected<int> fold_constants(Graph& g, size_t max_bytes) {
  int folded = 0;
  std::vector<char> remove(g.nodes.size(), 0);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    bool all_const = true;
    for (int in : n.inputs) all_const &= (in < 0 || g.is_constant(in));
    // Shape and Size depend only on the (static) shape of their input.
    const bool shape_only = n.op == OpType::Shape || n.op == OpType::Size;
    if (!all_const && !shape_only) continue;
    bool small = true;
    for (int o : n.outputs) {
      if (o >= 0 && g.values[o].has_shape) small &= numel(g.values[o].shape) * dtype_size(g.values[o].dtype) <= max_bytes;
    }
    if (!small) continue;
    std::vector<const Tensor*> ins;
    std::vector<Tensor> placeholders;  // Shape/Size of a non-constant input: only the shape matters
    placeholders.reserve(n.inputs.size());
    std::vector<DType> types;
    std::vector<Shape> shapes;
    for (int in : n.inputs) {
      if (in < 0) {
        ins.push_back(nullptr);
        types.push_back(DType::kUndefined);
        shapes.emplace_back();
        continue;
      }
      const Tensor* t = g.constant(in);
      if (!t) {
        placeholders.push_back(Tensor().reshaped(g.values[in].shape));
        t = &placeholders.back();
      }
      ins.push_back(t);
      types.push_back(g.values[in].dtype);
      shapes.push_back(g.values[in].shape);
    }
    InferCtx ctx(n, types, shapes, ins);
    QD_RETURN_IF_ERROR(infer_node(ctx));
    std::vector<Tensor> outs(n.outputs.size());
    std::vector<Tensor*> out_ptrs(n.outputs.size(), nullptr);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] < 0) continue;
      auto t = Tensor::make(ctx.out_dtype(i), ctx.out_shape(i));
      if (!t) return Status(t.status()).at_node(n.name, op_name(n.op));
      outs[i] = std::move(*t);
      out_ptrs[i] = &outs[i];
    }
    KernelCtx kc{n, ins, out_ptrs};
    Status st = op_schema(n.op).run(kc);
    if (!st.is_ok()) return st.at_node(n.name, op_name(n.op));
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
