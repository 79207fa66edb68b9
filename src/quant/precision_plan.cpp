#include "quant/precision_plan.h"

#include <cmath>

#include "quant/int8.h"

namespace qd {

bool is_int8_compute(OpType op) { return op == OpType::Conv || op == OpType::Gemm || op == OpType::MatMul; }

bool has_int8_form(const Graph& g, const Node& n) {
  if (!is_int8_compute(n.op) || n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0) return false;
  const Tensor* wt = g.constant(n.inputs[1]);
  const DType xt = g.values[n.inputs[0]].dtype;
  if (!wt || wt->dtype() != DType::kFloat32 || g.is_constant(n.inputs[0])) return false;
  if (xt != DType::kFloat32 && xt != DType::kUndefined) return false;
  if (n.op == OpType::MatMul) return wt->shape().size() == 2;
  if (n.op == OpType::Gemm) {
    const auto trans_a = n.attrs.get_int("transA", 0);
    const auto alpha = n.attrs.get_float("alpha", 1.f), beta = n.attrs.get_float("beta", 1.f);
    return trans_a && *trans_a == 0 && alpha && *alpha == 1.f && beta && *beta == 1.f;
  }
  return true;
}

Expected<NodePrecision> node_precision(const Graph& g, const Node& n, const Int8Options& opt,
                                       Precision float_precision, TensorQuant* input) {
  if (!is_int8_compute(n.op)) return NodePrecision{float_precision, PrecisionReason::kNoInt8Compute};
  if (!has_int8_form(g, n)) return NodePrecision{float_precision, PrecisionReason::kNotQuantizable};
  if (opt.float_node_names.count(n.name) || matches_any(n.name, opt.float_nodes)) {
    return NodePrecision{float_precision, PrecisionReason::kAsked};
  }
  const std::string& xname = g.values[n.inputs[0]].name;
  auto sit = opt.act_scales.find(xname);
  if (sit == opt.act_scales.end()) return NodePrecision{float_precision, PrecisionReason::kNoScale};
  const std::string& wname = g.values[n.inputs[1]].name;
  if (weights_left_float(opt.weight_scales, wname)) {
    return NodePrecision{float_precision, PrecisionReason::kNoWeightScale};
  }
  if (!(sit->second > 0) || !std::isfinite(sit->second)) {
    return invalid("tensor '" + xname + "' has an invalid scale " + std::to_string(sit->second));
  }
  // Weight layout: Conv [M, C/g, k...] channels on axis 0; Gemm/MatMul B [K, N] (axis 1), a Gemm's transposed
  // [N, K] (axis 0).
  const Tensor& wt = *g.constant(n.inputs[1]);
  const int axis = int8_weight_axis(n);
  auto wsit = opt.weight_scales.find(wname);
  if (wsit != opt.weight_scales.end() && static_cast<int64_t>(wsit->second.size()) != wt.shape()[axis]) {
    return invalid("weight '" + wname + "' has " + std::to_string(wt.shape()[axis]) + " channels but " +
                   std::to_string(wsit->second.size()) + " scales");
  }
  *input = TensorQuant{sit->second, 0, false};
  auto zit = opt.act_zero_points.find(xname);
  if (zit != opt.act_zero_points.end()) *input = TensorQuant{sit->second, zit->second, true};
  return NodePrecision{Precision::kInt8, PrecisionReason::kQuantized};
}

Expected<PrecisionPlan> compute_precision(const Graph& g, const Int8Options& opt, Precision float_precision) {
  PrecisionPlan plan;
  plan.float_precision = float_precision;
  plan.nodes.reserve(g.nodes.size());
  for (const Node& n : g.nodes) {
    TensorQuant q;
    plan.nodes.push_back(QD_TRY(node_precision(g, n, opt, float_precision, &q)));
    if (plan.nodes.back().precision == Precision::kInt8) plan.tensors[n.inputs[0]] = q;
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
    case PrecisionReason::kNoInt8Compute: break;
  }
  return precision_name(p.precision);
}

}  // namespace qd
