#include "quant/precision_plan.h"

#include <cmath>

#include "quant/int8.h"

namespace qd {

Expected<PrecisionPlan> compute_precision(const Graph& g, const Int8Options& opt, Precision float_precision) {
  PrecisionPlan plan;
  plan.float_precision = float_precision;
  plan.nodes.assign(g.nodes.size(), NodePrecision{float_precision, PrecisionReason::kNotConvGemm});
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    const bool conv = n.op == OpType::Conv;
    const bool gemm = n.op == OpType::Gemm;
    if (!conv && !gemm) continue;
    NodePrecision& p = plan.nodes[ni];
    p.reason = PrecisionReason::kNotQuantizable;
    const int x = n.inputs[0];
    const int w = n.inputs[1];
    const Tensor* wt = g.constant(w);
    if (!wt || wt->dtype() != DType::kFloat32 || g.values[x].dtype != DType::kFloat32) continue;
    if (gemm && (n.attrs.get_int("transA", 0).has_value() && *n.attrs.get_int("transA", 0) != 0)) continue;
    if (gemm && (*n.attrs.get_float("alpha", 1.f) != 1.f || *n.attrs.get_float("beta", 1.f) != 1.f)) continue;
    if (opt.float_node_names.count(n.name) || matches_any(n.name, opt.float_nodes)) {
      p.reason = PrecisionReason::kAsked;
      continue;
    }
    const std::string& xname = g.values[x].name;
    auto sit = opt.act_scales.find(xname);
    if (sit == opt.act_scales.end()) {
      p.reason = PrecisionReason::kNoScale;
      continue;
    }
    const std::string& wname = g.values[w].name;
    if (weights_left_float(opt.weight_scales, wname)) {
      p.reason = PrecisionReason::kNoWeightScale;
      continue;
    }
    if (!(sit->second > 0) || !std::isfinite(sit->second)) {
      return invalid("tensor '" + xname + "' has an invalid scale " + std::to_string(sit->second));
    }
    // Weight layout: Conv [M, C/g, k...] channels on axis 0; Gemm B [K, N] (axis 1) or transposed [N, K] (axis 0).
    const int axis = int8_weight_axis(n);
    auto wsit = opt.weight_scales.find(wname);
    if (wsit != opt.weight_scales.end() && static_cast<int64_t>(wsit->second.size()) != wt->shape()[axis]) {
      return invalid("weight '" + wname + "' has " + std::to_string(wt->shape()[axis]) + " channels but " +
                     std::to_string(wsit->second.size()) + " scales");
    }
    p = {Precision::kInt8, PrecisionReason::kQuantized};
    TensorQuant& q = plan.tensors[x];
    q.scale = sit->second;
    auto zit = opt.act_zero_points.find(xname);
    if (zit != opt.act_zero_points.end()) {
      q.zero_point = zit->second;
      q.asymmetric = true;
    }
  }
  return plan;
}

std::string precision_words(const NodePrecision& p) {
  switch (p.reason) {
    case PrecisionReason::kQuantized: return "int8";
    case PrecisionReason::kNotQuantizable: return "float (not quantizable)";
    case PrecisionReason::kAsked: return "float (asked)";
    case PrecisionReason::kNoScale: return "float (no scale)";
    case PrecisionReason::kNoWeightScale: return "float (no weight scale)";
    case PrecisionReason::kNotConvGemm: break;
  }
  return precision_name(p.precision);
}

}  // namespace qd
