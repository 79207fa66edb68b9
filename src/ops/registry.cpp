// The op table, built from ops.def at compile time (no static-initializer registration).
#include <cstring>
#include <unordered_map>

#include "ops/op.h"
#include "ops/plugin_registry.h"

namespace qd {

namespace {
const OpSchema kSchemas[] = {
#define QD_OP(name, min_in, max_in, min_out, max_out, kind, int8, batch, macs, cuda)                      \
  {#name, min_in, max_in, min_out, max_out, &ops::infer_##name, &ops::run_##name,                          \
   {OpKind::k##kind, Int8Rule::k##int8, BatchRule::k##batch, MacsRule::k##macs, CudaFamily::k##cuda}},
#include "ops/ops.def"
#undef QD_OP
};
}  // namespace

// Plugin ops (ops/plugin_registry.h) follow the built-in ones; an id nothing registered reads as an op whose
// inference fails, never as another op's entry.
const OpSchema& op_schema(OpType op) {
  if (static_cast<int>(op) >= 0 && op < OpType::kCount) return kSchemas[static_cast<int>(op)];
  if (const PluginOp* p = plugin_op(op)) return p->schema;
  static const OpSchema kUnknown = {
      "?", 0, -1, 0, 1, [](InferCtx&) { return internal("unknown op id"); },
      [](KernelCtx&) { return internal("unknown op id"); },
      {OpKind::kCompute, Int8Rule::kFloat, BatchRule::kNone, MacsRule::kNone, CudaFamily::kReferenceOnly}};
  return kUnknown;
}

const OpTraits& op_traits(OpType op) { return op_schema(op).traits; }

const char* op_name(OpType op) {
  if (op == OpType::kCount) return "?";
  return op_schema(op).name;
}

std::optional<OpType> op_from_name(const std::string& name) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<std::string, OpType>();
    for (int i = 0; i < static_cast<int>(OpType::kCount); ++i) {
      if (kSchemas[i].traits.kind != OpKind::kFused) (*m)[kSchemas[i].name] = static_cast<OpType>(i);
    }
    return m;
  }();
  auto it = table->find(name);
  if (it == table->end()) return std::nullopt;
  return it->second;
}

Expected<std::vector<int64_t>> InferCtx::const_ints(size_t i) const {
  const Tensor* t = value(i);
  if (!t) {
    return unsupported("input " + std::to_string(i) +
                       " must be a constant (computable from shapes at build time), but it depends on runtime data");
  }
  if (!is_integer(t->dtype())) return invalid("input " + std::to_string(i) + " must be an integer tensor");
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  for (int64_t k = 0; k < t->numel(); ++k) v[k] = t->get_i64(k);
  return v;
}

Expected<std::vector<float>> InferCtx::const_floats(size_t i) const {
  const Tensor* t = value(i);
  if (!t) return unsupported("input " + std::to_string(i) + " must be a constant");
  std::vector<float> v(static_cast<size_t>(t->numel()));
  for (int64_t k = 0; k < t->numel(); ++k) v[k] = static_cast<float>(t->get_f64(k));
  return v;
}

InferCtx infer_ctx_for(const Graph& g, const Node& n) {
  std::vector<DType> types;
  std::vector<Shape> shapes;
  std::vector<const Tensor*> values;
  for (int in : n.inputs) {
    types.push_back(in >= 0 ? g.values[in].dtype : DType::kUndefined);
    shapes.push_back(in >= 0 ? g.values[in].shape : Shape{});
    values.push_back(in >= 0 ? g.constant(in) : nullptr);
  }
  return InferCtx(n, std::move(types), std::move(shapes), std::move(values));
}

Status infer_node(InferCtx& ctx) {
  const OpSchema& s = op_schema(ctx.node.op);
  const int nin = static_cast<int>(ctx.node.inputs.size());
  const int nout = static_cast<int>(ctx.node.outputs.size());
  Status st;
  if (nin < s.min_inputs || (s.max_inputs >= 0 && nin > s.max_inputs)) {
    st = invalid("has " + std::to_string(nin) + " inputs; " + s.name + " takes " + std::to_string(s.min_inputs) +
                 (s.max_inputs < 0 ? " or more" : " to " + std::to_string(s.max_inputs)));
  } else if (nout < s.min_outputs || nout > s.max_outputs) {
    st = invalid("has " + std::to_string(nout) + " outputs; " + s.name + " gives " + std::to_string(s.min_outputs) +
                 " to " + std::to_string(s.max_outputs));
  } else {
    for (int i = 0; i < s.min_inputs && st.is_ok(); ++i) {
      if (ctx.node.inputs[i] < 0) st = invalid("required input " + std::to_string(i) + " is missing");
    }
    // An omitted ("") required output: the kernels write every required output.
    for (int i = 0; i < s.min_outputs && st.is_ok(); ++i) {
      if (ctx.node.outputs[i] < 0) st = invalid("required output " + std::to_string(i) + " is omitted (an empty name)");
    }
    if (st.is_ok()) st = s.infer(ctx);
  }
  if (!st.is_ok()) st.at_node(ctx.node.name, s.name);
  return st;
}

Expected<std::vector<Tensor>> run_node(const InferCtx& ctx, const std::vector<const Tensor*>& inputs) {
  const Node& n = ctx.node;
  std::vector<Tensor> outs(n.outputs.size());
  std::vector<Tensor*> ptrs(n.outputs.size(), nullptr);
  bool any_elements = false;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i] < 0) continue;
    auto t = Tensor::make(ctx.out_dtype(i), ctx.out_shape(i));
    if (!t) return Status(t.status()).at_node(n.name, op_name(n.op));
    outs[i] = std::move(*t);
    ptrs[i] = &outs[i];
    any_elements |= outs[i].numel() > 0;
  }
  if (any_elements) {
    KernelCtx kc{n, inputs, ptrs};
    Status st = op_schema(n.op).run(kc);
    if (!st.is_ok()) return st.at_node(n.name, op_name(n.op));
  }
  return outs;
}

}  // namespace qd
