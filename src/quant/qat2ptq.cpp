#include "quant/qat2ptq.h"

#include <filesystem>
#include <set>

#include "core/file_io.h"
#include "onnx/exporter.h"
#include "ops/op_traits.h"
#include "passes/passes.h"
#include "quant/int8.h"
#include "quant/precision_config.h"
#include "quant/qdq.h"

namespace qd {

const TensorScale* Qat2Ptq::find(const std::string& tensor) const {
  for (const auto& s : scales) {
    if (s.tensor == tensor) return &s;
  }
  return nullptr;
}

namespace {

// Float activations of the stripped graph: inputs and node outputs that stay tensors at run time. Types come from a
// copy with its symbolic dims bound to 1 and its constants folded (so shape arithmetic does not count). When that
// fails, every non-constant value counts, which only lengthens the list of tensors reported without a scale.
std::vector<char> float_activations(const Graph& g, Graph* typed, bool* bound) {
  std::vector<char> act(g.values.size(), 0);
  *typed = g;
  *bound = false;
  for (int v : typed->inputs) {
    Value& val = typed->values[v];
    for (int64_t& d : val.shape) {
      *bound |= d < 0;
      d = d < 0 ? 1 : d;
    }
  }
  const bool ok = fold_constants(*typed).has_value();
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.is_constant(static_cast<int>(v))) continue;
    act[v] = ok ? !typed->is_constant(static_cast<int>(v)) && is_float(typed->values[v].dtype) : 1;
  }
  return act;
}

template <typename T>
T or_else(const Expected<T>& e, T fallback) { return e ? *e : fallback; }

// Ops whose output takes its values from the input (plus zeros), so max|y| <= max|x| and, in practice, equal: one
// scale serves both tensors. The ops' `int8` traits in ops.def say which: qdq-translator's
// DEFAULT_OPS_TO_INFER_ADJACENT_SCALES, plus nearest resizing and zero padding.
bool keeps_range(const Graph& g, const Node& n) {
  switch (op_traits(n.op).int8) {
    case Int8Rule::kTransparent:
      return true;
    case Int8Rule::kTransparentNearest:
      return or_else<std::string>(n.attrs.get_string("mode", "nearest"), "") == "nearest";
    case Int8Rule::kTransparentZeroPad: {
      // edge, reflect and wrap repeat input values; constant padding adds its value (0 unless given)
      if (or_else<std::string>(n.attrs.get_string("mode", "constant"), "") != "constant") return true;
      if (n.attrs.has("value")) return or_else(n.attrs.get_float("value", 0.f), 1.f) == 0.f;  // opset < 11
      if (n.inputs.size() < 3 || n.inputs[2] < 0) return true;                               // pads with zeros
      const Tensor* c = g.constant(n.inputs[2]);
      return c && c->numel() == 1 && c->get_f64(0) == 0.0;
    }
    case Int8Rule::kFloat: case Int8Rule::kWeights: case Int8Rule::kInteger:
      break;
  }
  return false;
}

// For Mul(x, Sigmoid(x)) (SiLU, either input order): the position of the Sigmoid's output among the Mul's inputs;
// -1 for any other node.
int silu_sigmoid_input(const Graph& g, const Node& n) {
  if (n.op != OpType::Mul || n.inputs.size() != 2) return -1;
  for (int k = 0; k < 2; ++k) {
    const int s = n.inputs[k], x = n.inputs[1 - k];
    if (s < 0 || x < 0) continue;
    const int p = g.values[s].producer;
    if (p >= 0 && g.nodes[p].op == OpType::Sigmoid && g.nodes[p].inputs[0] == x) return k;
  }
  return -1;
}

class ScaleInference {
 public:
  ScaleInference(const Graph& g, const std::vector<char>& act) : g_(g), act_(act), scale_(g.values.size(), 0.f),
                                                                rule_(g.values.size()) {}
  void seed(int v, float s) { set(v, s, "Q/DQ"); }
  float scale(int v) const { return v >= 0 ? scale_[v] : 0.f; }
  const std::string& rule(int v) const { return rule_[v]; }

  // Forward (topological order) then backward (reverse order), repeated until nothing changes: a scale found
  // backward may open a forward step elsewhere. Known scales are never replaced, so Q/DQ scales always win.
  void run() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const Node& n : g_.nodes) changed |= forward(n);
      for (auto it = g_.nodes.rbegin(); it != g_.nodes.rend(); ++it) changed |= backward(*it);
    }
  }

  // DLA fuses Conv + Add when the Conv output has a scale: give a Conv output read only by a two-input Add scale 1,
  // unless the Add's other input already got one this way (qdq-translator's --add_unary_ew_scales_for_dla).
  void unit_scales_for_add() {
    const std::vector<int> uses = g_.use_counts();
    std::set<int> unit;
    for (const Node& n : g_.nodes) {
      const int y = n.outputs.empty() ? -1 : n.outputs[0];
      if (n.op != OpType::Conv || y < 0 || scale_[y] > 0 || !act_[y] || uses[y] != 1) continue;
      for (const Node& add : g_.nodes) {
        if (add.op != OpType::Add || add.inputs.size() != 2) continue;
        const int k = add.inputs[0] == y ? 0 : add.inputs[1] == y ? 1 : -1;
        if (k < 0 || unit.count(add.inputs[1 - k])) continue;
        set(y, 1.f, "unit scale (Conv + Add)");
        unit.insert(y);
      }
    }
  }

 private:
  bool set(int v, float s, const std::string& rule) {
    if (v < 0 || !act_[v] || scale_[v] > 0 || !(s > 0)) return false;
    scale_[v] = s;
    rule_[v] = rule;
    return true;
  }

  bool forward(const Node& n) {
    const std::string op = op_name(n.op);
    if (keeps_range(g_, n)) return set(n.outputs[0], scale(n.inputs[0]), op + " (forward)");
    if (n.op == OpType::Concat) {
      float m = 0;  // qdq-translator's rule: the largest scale among the inputs that have one
      for (int in : n.inputs) m = std::max(m, scale(in));
      return set(n.outputs[0], m, "Concat (max of inputs)");
    }
    const int k = silu_sigmoid_input(g_, n);
    if (k < 0) return false;
    const bool sig = set(n.inputs[k], 1.f / 127.f, "Sigmoid of SiLU (range [0, 1])");
    return set(n.outputs[0], scale(n.inputs[1 - k]), "SiLU (forward)") || sig;
  }

  bool backward(const Node& n) {
    const std::string op = op_name(n.op);
    if (keeps_range(g_, n)) return set(n.inputs[0], scale(n.outputs[0]), op + " (backward)");
    if (n.op == OpType::Concat) {
      bool changed = false;
      for (int in : n.inputs) changed |= set(in, scale(n.outputs[0]), "Concat (backward)");
      return changed;
    }
    const int k = silu_sigmoid_input(g_, n);
    return k >= 0 && set(n.inputs[1 - k], scale(n.outputs[0]), "SiLU (backward)");
  }

  const Graph& g_;
  const std::vector<char>& act_;
  std::vector<float> scale_;
  std::vector<std::string> rule_;
};

}  // namespace

Expected<Qat2Ptq> qat_to_ptq(Graph g, const Qat2PtqOptions& opt) {
  Qat2Ptq r;
  const QdqScales q = QD_TRY(strip_qdq(g));
  if (q.pairs == 0 && q.weight_scales.empty()) {
    return invalid("the model has no QuantizeLinear/DequantizeLinear pairs; qat2ptq reads the scales of a QAT model "
                   "(for a float model, use qdeploy calibrate)");
  }
  if (!q.act_zero_points.empty()) {
    return unsupported(asymmetric_summary(q.act_zero_points) + "; TensorRT's INT8 and its calibration cache are "
                       "symmetric, so qat2ptq cannot translate them: export the QAT model with symmetric quantizers, "
                       "or run this one as it is with --device cpu --precision int8");
  }
  r.pairs = q.pairs;
  r.weight_scales = q.weight_scales;
  g.relink();
  Graph typed;
  bool bound = false;
  const std::vector<char> act = float_activations(g, &typed, &bound);
  // The exported model declares its outputs' types and shapes (the importer does not keep them; ONNX wants them).
  // Dims are left unknown where an input dim was symbolic: they may follow it.
  for (int o : g.outputs) {
    Value& v = g.values[o];
    if (v.dtype != DType::kUndefined || !typed.values[o].has_shape) continue;
    v.dtype = typed.values[o].dtype;
    v.shape = typed.values[o].shape;
    if (bound) v.shape.assign(v.shape.size(), -1);
    v.has_shape = true;
  }

  ScaleInference inf(g, act);
  for (const auto& [name, s] : q.act_scales) inf.seed(g.find_value(name), s);
  inf.run();
  if (opt.unit_scale_for_add) inf.unit_scales_for_add();

  // Scales, unscaled tensors and their consumers, in graph order: inputs, then node outputs.
  std::vector<int> order(g.inputs.begin(), g.inputs.end());
  for (const Node& n : g.nodes) order.insert(order.end(), n.outputs.begin(), n.outputs.end());
  std::set<std::string> fp16;
  for (int v : order) {
    if (v < 0 || !act[v]) continue;
    if (inf.scale(v) > 0) {
      r.scales.push_back({g.values[v].name, inf.scale(v), inf.rule(v)});
      continue;
    }
    r.unscaled.push_back(g.values[v].name);
    for (const Node& n : g.nodes) {
      for (int in : n.inputs) {
        if (in == v && fp16.insert(n.name).second) r.fp16_nodes.push_back(n.name);
      }
    }
  }
  // A Conv/Gemm whose weights had no Q/DQ (e.g. trained in float with qdeploy.qat --float-layers) was left in float
  // by the QAT model, also where its input has a scale: fp16, as an INT8 build of the QAT model itself runs it.
  for (const Node& n : g.nodes) {
    if (op_traits(n.op).int8 == Int8Rule::kWeights && n.inputs.size() > 1 && g.constant(n.inputs[1]) &&
        weights_left_float(q.weight_scales, g.values[n.inputs[1]].name)) {
      fp16.insert(n.name);
    }
  }
  // fp16_nodes in graph order, whatever order the tensors were found in.
  std::vector<std::string> sorted;
  for (const Node& n : g.nodes) {
    if (fp16.count(n.name)) sorted.push_back(n.name);
  }
  r.fp16_nodes = std::move(sorted);

  // The weights become what the QAT model computed with: q * s, q = clamp(round_half_even(w / s), -127, 127).
  for (const auto& [name, s] : q.weight_scales) {
    const int v = g.find_value(name);
    const Tensor* w = g.constant(v);
    if (!w || w->dtype() != DType::kFloat32 || w->rank() == 0 || w->shape()[0] != static_cast<int64_t>(s.size())) {
      return unsupported("weight '" + name + "' is not a float constant with one scale per output channel (axis 0)");
    }
    const WeightQuant wq = quantize_weights_with(*w, 0, s);
    Tensor dq(DType::kFloat32, w->shape());
    const int64_t inner = w->numel() / w->shape()[0];
    for (int64_t i = 0; i < w->numel(); ++i) dq.data<float>()[i] = wq.q.data<int8_t>()[i] * s[i / inner];
    g.constants[v] = std::move(dq);
  }
  r.model = std::move(g);
  return r;
}

std::string format_layer_precisions(const Qat2Ptq& r) {
  const std::set<std::string> fp16(r.fp16_nodes.begin(), r.fp16_nodes.end());
  std::string out;
  for (const Node& n : r.model.nodes) out += n.name + (fp16.count(n.name) ? ":fp16\n" : ":int8\n");
  return out;
}

Status write_qat2ptq(const Qat2Ptq& r, const std::string& dir, const CalibCache& header) {
  CalibCache cache;
  cache.version = header.version;
  cache.algorithm = header.algorithm;
  PrecisionConfig config;
  for (const auto& s : r.scales) {
    cache.scales.emplace_back(s.tensor, s.scale);
    config.int8_tensor_scales.emplace_back(s.tensor, s.scale);
  }
  config.fp16_nodes = r.fp16_nodes;
  config.weight_scales = r.weight_scales;
  const std::string model = QD_TRY(export_onnx_bytes(r.model));
  const std::vector<std::pair<std::string, std::string>> files = {
      {"model.onnx", model},
      {"model.cache", format_calib_cache(cache)},
      {"model.json", format_precision_config(config)},
      {"model.layer_precisions.txt", format_layer_precisions(r)},
  };
  QD_RETURN_IF_ERROR(make_dirs(dir));
  for (const auto& [name, bytes] : files) {
    QD_RETURN_IF_ERROR(write_file_atomic((std::filesystem::path(dir) / name).string(), bytes));
  }
  return Status::ok();
}

}  // namespace qd
