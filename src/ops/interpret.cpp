#include "ops/interpret.h"

#include "ops/op.h"

namespace qd {

Expected<std::vector<Tensor>> run_reference(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                            const ReferenceRunOptions& opt) {
  std::vector<Tensor> vals(g.values.size());
  for (int v : g.inputs) {
    const Value& info = g.values[v];
    auto it = inputs.find(info.name);
    if (it == inputs.end()) return invalid("no tensor given for input '" + info.name + "'");
    if (it->second.dtype() != info.dtype) {
      return invalid("input '" + info.name + "' must be " + dtype_name(info.dtype) + ", got " +
                     dtype_name(it->second.dtype()));
    }
    if (it->second.shape() != info.shape) {
      return invalid("input '" + info.name + "' must have shape " + shape_str(info.shape) + ", got " +
                     shape_str(it->second.shape()));
    }
    vals[v] = it->second;
  }
  for (const auto& [name, t] : inputs) {
    if (g.find_value(name) < 0) return invalid("the model has no input named '" + name + "'");
  }
  std::vector<int> uses = g.use_counts();
  auto value_of = [&](int v) -> const Tensor* {
    if (const Tensor* c = g.constant(v)) return c;
    return vals[v].empty() ? nullptr : &vals[v];
  };
  for (const Node& n : g.nodes) {
    std::vector<const Tensor*> ins;
    std::vector<DType> types;
    std::vector<Shape> shapes;
    for (int in : n.inputs) {
      if (in < 0) {
        ins.push_back(nullptr);
        types.push_back(DType::kUndefined);
        shapes.emplace_back();
        continue;
      }
      const Tensor* t = value_of(in);
      if (!t) return internal("value '" + g.values[in].name + "' was not computed").at_node(n.name, op_name(n.op));
      ins.push_back(t);
      types.push_back(t->dtype());
      shapes.push_back(t->shape());
    }
    InferCtx ctx(n, std::move(types), std::move(shapes), ins);
    QD_RETURN_IF_ERROR(infer_node(ctx));
    std::vector<Tensor> made = QD_TRY(run_node(ctx, ins));
    std::vector<const Tensor*> outs(n.outputs.size(), nullptr);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] < 0) continue;
      vals[n.outputs[i]] = std::move(made[i]);
      outs[i] = &vals[n.outputs[i]];
    }
    if (opt.observer) opt.observer(n, outs);
    if (!opt.keep_all) {
      for (int in : n.inputs) {
        if (in >= 0 && --uses[in] == 0 && !g.is_constant(in)) vals[in] = Tensor();
      }
    }
  }
  std::vector<Tensor> result;
  for (int o : g.outputs) {
    const Tensor* t = g.constant(o);
    result.push_back(t ? *t : vals[o]);
  }
  return result;
}

}  // namespace qd
