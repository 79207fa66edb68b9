#include "quant/qdq_export.h"

#include <cmath>
#include <map>

namespace qd {

namespace {

std::string fresh(const Graph& g, const std::string& base) {
  std::string n = base;
  for (int k = 1; g.find_value(n) >= 0; ++k) n = base + "_" + std::to_string(k);
  return n;
}

}  // namespace

Expected<Graph> insert_qdq(const Graph& src, const Int8Options& opt, QdqExportReport* report) {
  if (src.opset != 0 && src.opset < 13) {
    return unsupported("the model's opset is " + std::to_string(src.opset) + "; per-channel Q/DQ needs opset 13 or "
                       "later (re-export the model at opset >= 13)");
  }
  Graph g = src;
  QdqExportReport rep;
  std::vector<Node> added;
  std::map<int, int> dq_of;  // float activation -> its dequantized value
  int counter = 0;
  auto add_node = [&](const std::string& name, OpType op, std::vector<int> ins, int out, AttrMap attrs = {}) {
    Node n;
    n.name = name + "#" + std::to_string(counter++);
    n.op = op;
    n.opset = g.opset ? g.opset : 13;
    n.attrs = std::move(attrs);
    n.inputs = std::move(ins);
    n.outputs = {out};
    added.push_back(std::move(n));
  };
  auto constant = [&](const std::string& base, Tensor t) {
    const int v = g.add_value(fresh(g, base));
    g.values[v].dtype = t.dtype();
    g.constants[v] = std::move(t);
    return v;
  };
  auto qdq_pair = [&](int x, int scale, int zp, const std::string& base, AttrMap attrs) {
    const int q = g.add_value(fresh(g, base + "_quantized"));
    const int dq = g.add_value(fresh(g, base + "_dequantized"));
    add_node(base + "/QuantizeLinear", OpType::QuantizeLinear, {x, scale, zp}, q, attrs);
    add_node(base + "/DequantizeLinear", OpType::DequantizeLinear, {q, scale, zp}, dq, attrs);
    return dq;
  };

  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    Node& n = g.nodes[ni];
    TensorQuant xq;
    const NodePrecision p = QD_TRY(node_precision(g, n, opt, Precision::kFp32, &xq));
    if (p.precision != Precision::kInt8) continue;
    const int x = n.inputs[0], w = n.inputs[1];
    const Tensor* wt = g.constant(w);
    const std::string xname = g.values[x].name;
    const int axis = int8_weight_axis(n);
    auto wsit = opt.weight_scales.find(g.values[w].name);
    // The weight scales the reference computes (quantize_weights), or the model's.
    const std::vector<float> ws =
        wsit != opt.weight_scales.end() ? wsit->second : quantize_weights(*wt, axis).scales;
    const std::string wname = g.values[w].name;  // copies: add_value may reallocate g.values
    AttrMap per_axis;
    per_axis.set("axis", static_cast<int64_t>(axis));
    const int wscale = constant(wname + "_scale", Tensor::from_f32({static_cast<int64_t>(ws.size())}, ws));
    const int wzp = constant(wname + "_zero_point", Tensor(DType::kInt8, {static_cast<int64_t>(ws.size())}));
    const int wdq = qdq_pair(w, wscale, wzp, wname, per_axis);
    g.nodes[ni].inputs[1] = wdq;
    ++rep.weight_quantizers;
    if (!dq_of.count(x)) {
      Tensor zp(xq.asymmetric ? DType::kUInt8 : DType::kInt8, {});
      if (xq.asymmetric) zp.set_f64(0, xq.zero_point);
      const int s = constant(xname + "_scale", Tensor::scalar_f32(xq.scale));
      const int z = constant(xname + "_zero_point", std::move(zp));
      dq_of[x] = qdq_pair(x, s, z, xname, {});
      ++rep.activation_quantizers;
    }
    rep.int8_nodes.push_back(g.nodes[ni].name);
  }
  // Every reader of a quantized activation reads its dequantized value (one tensor, one format), except its
  // quantizer; graph outputs keep the float tensor.
  for (Node& n : g.nodes) {
    for (int& in : n.inputs) {
      auto it = dq_of.find(in);
      if (it != dq_of.end()) in = it->second;
    }
  }
  for (Node& n : added) g.nodes.push_back(std::move(n));
  QD_RETURN_IF_ERROR(g.topo_sort());
  g.relink();
  if (report) *report = std::move(rep);
  return g;
}

}  // namespace qd
