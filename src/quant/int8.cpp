#include "quant/int8.h"

#include <cmath>
#include <regex>

#include "ir/cost.h"
#include "ops/quantize.h"
#include "passes/passes.h"

namespace qd {

namespace {

int64_t channels_along(const Tensor& w, int axis) { return w.shape()[axis]; }

// Index of the channel (along `axis`) of flat element i.
int64_t channel_of(const Tensor& w, int axis, int64_t i) {
  int64_t inner = 1;
  for (size_t d = axis + 1; d < w.rank(); ++d) inner *= w.shape()[d];
  return (i / inner) % w.shape()[axis];
}

}  // namespace

WeightQuant quantize_weights_with(const Tensor& w, int axis, const std::vector<float>& scales) {
  WeightQuant out{Tensor(DType::kInt8, w.shape()), scales};
  const float* p = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float s = scales[channel_of(w, axis, i)];
    out.q.data<int8_t>()[i] = static_cast<int8_t>(ops::quantize_value(p[i], s, 0, -127, 127));
  }
  return out;
}

WeightQuant quantize_weights(const Tensor& w, int axis) {
  std::vector<float> amax(static_cast<size_t>(channels_along(w, axis)), 0.f);
  const float* p = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    float& m = amax[channel_of(w, axis, i)];
    m = std::max(m, std::fabs(p[i]));
  }
  std::vector<float> scales(amax.size());
  for (size_t c = 0; c < amax.size(); ++c) scales[c] = amax[c] > 0 ? amax[c] / 127.f : 1.f;
  return quantize_weights_with(w, axis, scales);
}

bool weights_left_float(const std::map<std::string, std::vector<float>>& weight_scales, const std::string& weight) {
  return !weight_scales.empty() && !weight_scales.count(weight);
}

bool matches_any(const std::string& name, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) {
    if (p == name) return true;
    try {
      if (std::regex_match(name, std::regex(p))) return true;
    } catch (const std::regex_error&) {
      // not a regex: only the exact comparison above applies
    }
  }
  return false;
}

Int8Options resolve_float_nodes(const Graph& g, const Int8Options& opt) {
  Int8Options r = opt;
  r.float_nodes.clear();
  if (opt.float_nodes.empty()) return r;
  for (const Node& n : g.nodes) {
    if (matches_any(n.name, opt.float_nodes)) r.float_node_names.insert(n.name);
  }
  return r;
}

namespace {

class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g) {}

  int constant(const std::string& name, Tensor t) {
    const int v = g_.add_value(unique(name));
    g_.constants[v] = std::move(t);
    return v;
  }
  int value(const std::string& name) { return g_.add_value(unique(name)); }
  void node(const std::string& name, OpType op, std::vector<int> ins, std::vector<int> outs, AttrMap attrs = {}) {
    Node n;
    n.name = unique_node(name);
    n.op = op;
    n.opset = g_.opset ? g_.opset : 13;
    n.attrs = std::move(attrs);
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    added_.push_back(std::move(n));
  }
  std::vector<Node>& added() { return added_; }

 private:
  std::string unique(const std::string& base) {
    std::string n = base;
    for (int k = 1; g_.find_value(n) >= 0; ++k) n = base + "_" + std::to_string(k);
    return n;
  }
  std::string unique_node(const std::string& base) { return base + "#" + std::to_string(counter_++); }
  Graph& g_;
  std::vector<Node> added_;
  int counter_ = 0;
};

struct Quantized {
  int q = -1;   // int8 (uint8 when asymmetric) value
  int dq = -1;  // its dequantized float value
  int zero_point = -1;
};

Tensor channel_vector(const std::vector<float>& v, size_t rank) {
  Shape s(rank, 1);
  s[1] = static_cast<int64_t>(v.size());
  return Tensor::from_f32(s, v);
}

}  // namespace

int int8_weight_axis(const Node& n) {
  const bool trans_b = n.op == OpType::Gemm && *n.attrs.get_int("transB", 0) != 0;
  return n.op == OpType::Conv || trans_b ? 0 : 1;
}

Int8Report int8_report(const Graph& g, const PrecisionPlan& plan) {
  Int8Report rep;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    const int64_t macs = node_macs(g, n);
    rep.total_macs = add_macs(rep.total_macs, macs);
    if (!is_int8_compute(n.op)) continue;
    const NodePrecision& p = plan.nodes[ni];
    rep.layers.push_back({n.name, op_name(n.op), macs, p});
    switch (p.reason) {
      case PrecisionReason::kQuantized:
        rep.int8_nodes.push_back(n.name);
        rep.int8_macs = add_macs(rep.int8_macs, macs);
        break;
      case PrecisionReason::kAsked: rep.float_nodes.push_back(n.name); break;
      case PrecisionReason::kNoScale:
      case PrecisionReason::kNoWeightScale: rep.no_scale_nodes.push_back(n.name); break;
      case PrecisionReason::kNotQuantizable:
      case PrecisionReason::kNoInt8Compute: break;
    }
  }
  return rep;
}

Expected<Int8Report> lower_int8(Graph& g, const Int8Options& opt) {
  const PrecisionPlan plan = QD_TRY(compute_precision(g, opt));
  return lower_int8(g, opt, plan);
}

Expected<Int8Report> lower_int8(Graph& g, const Int8Options& opt, const PrecisionPlan& plan) {
  if (plan.nodes.size() != g.nodes.size()) {
    return internal("lower_int8: the precision plan has " + std::to_string(plan.nodes.size()) +
                    " nodes, the graph " + std::to_string(g.nodes.size()));
  }
  Int8Report rep = int8_report(g, plan);
  Rewriter rw(g);
  std::map<int, Quantized> quantized;  // float tensor -> its quantized forms
  std::vector<char> remove(g.nodes.size(), 0);

  auto quantize_tensor = [&](int x, const TensorQuant& tq) -> Quantized& {
    auto it = quantized.find(x);
    if (it != quantized.end()) return it->second;
    Quantized qz;
    const std::string name = g.values[x].name;  // a copy: adding values below may reallocate g.values
    const int scale = rw.constant(name + "_scale", Tensor::scalar_f32(tq.scale));
    Tensor zp(tq.asymmetric ? DType::kUInt8 : DType::kInt8, {});
    if (tq.asymmetric) zp.set_f64(0, tq.zero_point);
    qz.zero_point = rw.constant(name + "_zero_point", std::move(zp));
    qz.q = rw.value(name + "_int8");
    qz.dq = rw.value(name + "_dequantized");
    if (opt.mode == Int8Mode::kExactDla) {
      // round(t) = sign(t) * (floor(|t|) + (|t| - floor(|t|) >= 0.5)), t = x / s in float32 as QuantizeLinear
      // computes it; every step is exact, and QuantizeLinear with scale 1 then adds the zero point and saturates.
      auto v = [&](const char* what) { return rw.value(name + what); };
      const int t = v("_div"), a = v("_abs"), f = v("_floor"), frac = v("_frac"), up = v("_up"), upf = v("_upf"),
                r = v("_rounded"), sg = v("_sign"), rs = v("_away");
      const int half = rw.constant(name + "_half", Tensor::scalar_f32(0.5f));
      const int one = rw.constant(name + "_one", Tensor::scalar_f32(1.f));
      AttrMap to_float;
      to_float.set("to", static_cast<int64_t>(DType::kFloat32));
      rw.node("dla_round/" + name + "/div", OpType::Div, {x, scale}, {t});
      rw.node("dla_round/" + name + "/abs", OpType::Abs, {t}, {a});
      rw.node("dla_round/" + name + "/floor", OpType::Floor, {a}, {f});
      rw.node("dla_round/" + name + "/frac", OpType::Sub, {a, f}, {frac});
      rw.node("dla_round/" + name + "/ge", OpType::GreaterOrEqual, {frac, half}, {up});
      rw.node("dla_round/" + name + "/cast", OpType::Cast, {up}, {upf}, to_float);
      rw.node("dla_round/" + name + "/add", OpType::Add, {f, upf}, {r});
      rw.node("dla_round/" + name + "/sign", OpType::Sign, {t}, {sg});
      rw.node("dla_round/" + name + "/mul", OpType::Mul, {r, sg}, {rs});
      rw.node("quantize/" + name, OpType::QuantizeLinear, {rs, one, qz.zero_point}, {qz.q});
    } else {
      rw.node("quantize/" + name, OpType::QuantizeLinear, {x, scale, qz.zero_point}, {qz.q});
    }
    rw.node("dequantize/" + name, OpType::DequantizeLinear, {qz.q, scale, qz.zero_point}, {qz.dq});
    return quantized.emplace(x, qz).first->second;
  };

  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!plan.is_int8(ni)) continue;
    Node& n = g.nodes[ni];
    const bool conv = n.op == OpType::Conv;
    const int x = n.inputs[0];
    const int w = n.inputs[1];
    const Tensor* wt = g.constant(w);
    auto tq = plan.tensors.find(x);
    if (!wt || tq == plan.tensors.end()) {
      return internal("lower_int8: the precision plan is not this graph's (INT8 node '" + n.name + "')");
    }
    const float s_x = tq->second.scale;
    const bool trans_b = n.op == OpType::Gemm && *n.attrs.get_int("transB", 0) != 0;
    const int axis = int8_weight_axis(n);
    // compute_precision checked that given scales count the weight's channels.
    auto wsit = opt.weight_scales.find(g.values[w].name);
    WeightQuant wq = wsit != opt.weight_scales.end() ? quantize_weights_with(*wt, axis, wsit->second)
                                                     : quantize_weights(*wt, axis);
    Quantized& qx = quantize_tensor(x, tq->second);
    const int y = n.outputs[0];
    const int64_t m = wt->shape()[axis];
    const int bias = n.inputs.size() > 2 ? n.inputs[2] : -1;
    if (opt.mode == Int8Mode::kFake) {
      Tensor wdq(DType::kFloat32, wt->shape());
      for (int64_t i = 0; i < wt->numel(); ++i) {
        const int64_t c = trans_b || conv ? i / (wt->numel() / m) : i % m;
        wdq.data<float>()[i] = wq.q.data<int8_t>()[i] * wq.scales[c];
      }
      n.inputs[0] = qx.dq;
      n.inputs[1] = rw.constant(g.values[w].name + "_fakequant", std::move(wdq));
      continue;
    }
    // exact: integer product, then the fp32 epilogue  y = acc * (s_x * s_w[c]) + bias[c]
    std::vector<float> combined(static_cast<size_t>(m));
    for (int64_t c = 0; c < m; ++c) combined[c] = s_x * wq.scales[c];
    const int qw = rw.constant(g.values[w].name + "_int8", conv || !trans_b ? std::move(wq.q) : Tensor());
    const int acc = rw.value(n.name + "_acc");
    if (conv) {
      AttrMap attrs = n.attrs;
      rw.node(n.name + "/int8", OpType::ConvInteger, {qx.q, qw, qx.zero_point}, {acc}, attrs);
    } else {
      int b = qw;
      if (trans_b) {  // MatMulInteger wants B as [K, N]
        const int64_t nn = wt->shape()[0], k = wt->shape()[1];
        Tensor bt(DType::kInt8, {k, nn});
        for (int64_t r = 0; r < nn; ++r) {
          for (int64_t cc = 0; cc < k; ++cc) bt.data<int8_t>()[cc * nn + r] = wq.q.data<int8_t>()[r * k + cc];
        }
        g.constants[qw] = std::move(bt);
      }
      rw.node(n.name + "/int8", OpType::MatMulInteger, {qx.q, b, qx.zero_point}, {acc});
    }
    const int accf = rw.value(n.name + "_acc_float");
    AttrMap cast;
    cast.set("to", static_cast<int64_t>(DType::kFloat32));
    rw.node(n.name + "/to_float", OpType::Cast, {acc}, {accf}, cast);
    const size_t rank = g.values[y].shape.size();
    const int scale_v = rw.constant(n.name + "_requant_scale",
                                    conv ? channel_vector(combined, rank) : Tensor::from_f32({m}, combined));
    if (bias >= 0) {
      const int scaled = rw.value(n.name + "_scaled");
      rw.node(n.name + "/scale", OpType::Mul, {accf, scale_v}, {scaled});
      int bias_v = bias;
      if (conv) {
        const Tensor* bt = g.constant(bias);
        if (!bt) return unsupported("Conv with a non-constant bias in INT8").at_node(n.name, "Conv");
        std::vector<float> bv(bt->data<float>(), bt->data<float>() + bt->numel());
        bias_v = rw.constant(n.name + "_bias", channel_vector(bv, rank));
      }
      rw.node(n.name + "/bias", OpType::Add, {scaled, bias_v}, {y});
    } else {
      rw.node(n.name + "/scale", OpType::Mul, {accf, scale_v}, {y});
    }
    remove[ni] = 1;
  }
  // Every consumer of a quantized tensor reads its dequantized form (the INT8 nodes read the int8 form directly).
  std::vector<Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!remove[i]) nodes.push_back(std::move(g.nodes[i]));
  }
  for (Node& n : nodes) {
    for (int& in : n.inputs) {
      auto it = quantized.find(in);
      if (it != quantized.end()) in = it->second.dq;
    }
  }
  for (Node& n : rw.added()) {
    if (n.op != OpType::QuantizeLinear && n.name.rfind("dla_round/", 0) != 0) {
      for (int& in : n.inputs) {
        auto it = quantized.find(in);
        if (it != quantized.end()) in = it->second.dq;
      }
    }
    nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  QD_RETURN_IF_ERROR(g.topo_sort());
  QD_RETURN_IF_ERROR(infer_shapes(g));
  return rep;
}

}  // namespace qd
