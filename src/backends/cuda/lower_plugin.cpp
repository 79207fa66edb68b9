// Plugin ops (qdeploy/plugin.h): a layer of their own, in the graph's dtype, or in fp16 on fp16 rows (fp16 plans).
#include <algorithm>

#include "backends/cuda/lowerer.h"
#include "backends/cuda/plugin_layer.h"
#include "ir/cost.h"
#include "ops/plugin_registry.h"

namespace qd::cuda {

// A plugin input that is a column slice of a wider tensor (Slice of the last axis, step 1, maybe through a Reshape
// keeping the last dim; e.g. value and offsets cut from one fused linear) is read in place when the kernel accepts
// the row stride: the Slice and Reshape run no layer.
std::optional<Lowerer::InPlaceSlice> Lowerer::column_slice(int v, std::vector<int>* nodes) const {
  int cur = v;
  const int p0 = g_.values[cur].producer;
  if (p0 >= 0 && g_.nodes[p0].op == OpType::Reshape && uses_[cur] == 1 && !is_output_[cur]) {
    const int src = g_.nodes[p0].inputs[0];
    const Shape &a = g_.values[src].shape, &b = g_.values[cur].shape;
    if (a.empty() || b.empty() || a.back() != b.back()) return std::nullopt;
    nodes->push_back(p0);
    cur = src;
  }
  const int ps = g_.values[cur].producer;
  if (ps < 0 || g_.nodes[ps].op != OpType::Slice || uses_[cur] != 1 || is_output_[cur]) return std::nullopt;
  const Node& sl = g_.nodes[ps];
  if (sl.inputs.size() < 3) return std::nullopt;
  const int src = sl.inputs[0];
  const Shape &in = g_.values[src].shape, &out = g_.values[cur].shape;
  if (g_.is_constant(src) || in.size() != out.size() || in.empty()) return std::nullopt;
  for (size_t d = 0; d + 1 < in.size(); ++d) {
    if (in[d] != out[d]) return std::nullopt;
  }
  auto scalar = [&](size_t k, int64_t def) -> std::optional<int64_t> {
    if (k >= sl.inputs.size() || sl.inputs[k] < 0) return def;
    const Tensor* t = g_.constant(sl.inputs[k]);
    if (!t || t->numel() != 1) return std::nullopt;
    return t->get_i64(0);
  };
  const int64_t rank = static_cast<int64_t>(in.size()), len = in.back();
  auto start = scalar(1, 0), axis = scalar(3, rank - 1), step = scalar(4, 1);
  if (!start || !axis || !step || *step != 1 || (*axis != rank - 1 && *axis != -1)) return std::nullopt;
  int64_t c0 = *start < 0 ? *start + len : *start;
  c0 = std::clamp<int64_t>(c0, 0, len);
  if (c0 + out.back() > len) return std::nullopt;
  nodes->push_back(ps);
  return InPlaceSlice{src, c0};
}

// Per plugin node: the inputs it reads in place (column slices), and in fp16 plans whether it runs in fp16 (its
// kernels take fp16 rows: float inputs and outputs whose rows are whole 16-byte runs), else in the graph's dtype.
void Lowerer::plan_plugin_slices() {
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    const Node& n = g_.nodes[i];
    const PluginOp* p = plugin_op(n.op);
    if (!p || p->def.cuda_kernels.empty() || done_[i]) continue;
    auto attrs = resolve_plugin_attrs(p->def, n.attrs);
    if (!attrs) continue;
    for (const bool f16 : {true, false}) {
      if (f16 && in_.opt->precision != Precision::kFp16) continue;
      const auto rows16 = [&](int v) {
        const Shape& s = g_.values[v].shape;
        return g_.values[v].dtype == DType::kFloat32 && !s.empty() && s.back() > 0 && s.back() % 8 == 0;
      };
      std::vector<qdeploy::TensorView> in, out;
      std::map<int, InPlaceSlice> found;
      std::vector<int> skip;
      bool ok = true;
      for (size_t k = 0; k < n.inputs.size() && ok; ++k) {
        const int v = n.inputs[k];
        if (v < 0) continue;
        std::vector<int> nodes;
        auto s = column_slice(v, &nodes);
        const DType dt = f16 ? DType::kFloat16 : g_.values[v].dtype;
        if (s && g_.values[s->source].dtype == g_.values[v].dtype && (s->column * dtype_size(dt)) % 16 == 0 &&
            (!f16 || rows16(s->source))) {
          found[static_cast<int>(k)] = *s;
          skip.insert(skip.end(), nodes.begin(), nodes.end());
          in.push_back(plugin_view(dt, g_.values[v].shape, g_.values[s->source].shape.back()));
        } else {
          ok = !f16 || rows16(v);
          in.push_back(plugin_view(dt, g_.values[v].shape));
        }
      }
      for (int v : n.outputs) {
        ok = ok && (!f16 || rows16(v));
        out.push_back(plugin_view(f16 ? DType::kFloat16 : g_.values[v].dtype, g_.values[v].shape));
      }
      if (!ok || !plugin_supported(*p, *attrs, in, out).is_ok()) continue;
      if (f16) f16_plugins_.insert(static_cast<int>(i));
      if (!found.empty()) plugin_slices_[static_cast<int>(i)] = std::move(found);
      for (int s : skip) {
        done_[s] = true;
        plugin_slice_reader_[s] = static_cast<int>(i);
      }
      break;
    }
  }
}

Status Lowerer::lower_plugin(int i) {
  const Node& n = g_.nodes[i];
  const PluginOp* p = plugin_op(n.op);
  auto l = std::make_unique<PluginLayer>();
  l->op = p;
  l->attrs = QD_TRY(resolve_plugin_attrs(p->def, n.attrs));
  const auto slices = plugin_slices_.find(i);
  const bool f16 = f16_plugins_.count(i) > 0;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const int v = n.inputs[k];
    if (v < 0) continue;
    const InPlaceSlice* s = nullptr;
    if (slices != plugin_slices_.end()) {
      if (auto it = slices->second.find(static_cast<int>(k)); it != slices->second.end()) s = &it->second;
    }
    const int src = s ? s->source : v;
    const Shape& ss = g_.values[src].shape;  // rows of ss.back() values (f16_plugins_: a multiple of 8)
    const int t = f16 ? QD_TRY(ensure_rows_f16(src, numel(ss) / ss.back(), ss.back())) : QD_TRY(ensure_generic(src));
    l->ins.push_back(t);
    l->in_offset.push_back(s ? static_cast<size_t>(s->column) * dtype_size(inst_->tensors[t].dtype) : 0);
    l->in.push_back(plugin_view(inst_->tensors[t].dtype, g_.values[v].shape, s ? ss.back() : 0));
  }
  for (int v : n.outputs) {
    const Shape& vs = g_.values[v].shape;
    const int t = f16 ? nhwc_tensor({numel(vs) / vs.back(), vs.back(), 1, 1}) : add_tensor(generic_ref(v));
    (f16 ? rows_f16_[v] : gen_[v]) = t;
    l->outs.push_back(t);
    l->out.push_back(plugin_view(inst_->tensors[t].dtype, g_.values[v].shape));
  }
  QD_RETURN_IF_ERROR(plugin_supported(*p, l->attrs, l->in, l->out));
  QD_RETURN_IF_ERROR(choose_plugin_kernel(l.get(), in_.choices, in_.frozen));
  if (l->kernel->workspace) {
    if (size_t ws = l->kernel->workspace(l->attrs, l->tactic, l->in, l->out)) {
      l->workspace = static_cast<int>(buffer_bytes_.size());
      buffer_bytes_.push_back(ws);
      buffer_users_.push_back(1);
    }
  }
  const std::string dt = dtype_name(l->out.empty() ? DType::kFloat32 : from_plugin_dtype(l->out[0].dtype));
  l->info = {n.name, p->qualified, "plugin:" + l->kernel->name + "/" +
             (l->kernel->tactic_name ? l->kernel->tactic_name(l->tactic) : std::to_string(l->tactic)),
             dt, "nhwc:" + dt + (slices != plugin_slices_.end() ? "(in place)" : ""), "nhwc:" + dt,
             static_cast<double>(node_macs(g_, n))};
  add_layer(std::move(l));
  return Status::ok();
}

}  // namespace qd::cuda
