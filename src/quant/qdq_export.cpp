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
    const bool conv = n.op == OpType::Conv, gemm = n.op == OpType::Gemm;
    if (!conv && !gemm) continue;
    const int x = n.inputs[0], w = n.inputs[1];
    const Tensor* wt = g.constant(w);
    if (!wt || wt->dtype() != DType::kFloat32) continue;
    if (gemm && (*n.attrs.get_int("transA", 0) != 0 || *n.attrs.get_float("alpha", 1.f) != 1.f ||
                 *n.attrs.get_float("beta", 1.f) != 1.f)) {
      continue;
    }
    if (opt.float_node_names.count(n.name) || matches_any(n.name, opt.float_nodes)) continue;
    const std::string xname = g.values[x].name;
    auto sit = opt.act_scales.find(xname);
    if (sit == opt.act_scales.end() || weights_left_float(opt.weight_scales, g.values[w].name)) continue;
    if (!(sit->second > 0) || !std::isfinite(sit->second)) {
      return invalid("tensor '" + xname + "' has an invalid scale " + std::to_string(sit->second));
    }
    const bool trans_b = gemm && *n.attrs.get_int("transB", 0) != 0;
    const int axis = conv || trans_b ? 0 : 1;
    auto wsit = opt.weight_scales.find(g.values[w].name);
    if (wsit != opt.weight_scales.end() && static_cast<int64_t>(wsit->second.size()) != wt->shape()[axis]) {
      return invalid("weight '" + g.values[w].name + "' has " + std::to_string(wt->shape()[axis]) +
                     " channels but " + std::to_string(wsit->second.size()) + " scales");
    }
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
      auto zit = opt.act_zero_points.find(xname);
      Tensor zp(zit == opt.act_zero_points.end() ? DType::kInt8 : DType::kUInt8, {});
      if (zit != opt.act_zero_points.end()) zp.set_f64(0, zit->second);
      const int s = constant(xname + "_scale", Tensor::scalar_f32(sit->second));
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
