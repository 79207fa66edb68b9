#include "quant/qdq.h"

#include <cmath>

#include "quant/int8.h"

namespace qd {

bool has_qdq(const Graph& g) {
  for (const Node& n : g.nodes) {
    if (n.op == OpType::QuantizeLinear || n.op == OpType::DequantizeLinear) return true;
  }
  return false;
}

namespace {
// Said by the errors that a Q/DQ pair without a zero point (uint8) can end in.
constexpr char kNoZeroPointIsUint8[] = "a QuantizeLinear without a zero point quantizes to uint8, as ONNX defines it";
}  // namespace

std::string asymmetric_summary(const std::map<std::string, int>& zero_points) {
  const auto& [name, zp] = *zero_points.begin();
  return std::to_string(zero_points.size()) + " activations are quantized asymmetrically (uint8 with a zero point, "
         "e.g. tensor '" + name + "' with zero point " + std::to_string(zp) +
         (zp == 0 ? std::string("; ") + kNoZeroPointIsUint8 + ": give it an int8 zero point of 0 for symmetric int8"
                  : "") +
         ")";
}

namespace {

// A Q or DQ node's quantization: its constant scales, and for uint8 (asymmetric) quantization the zero point.
struct QParams {
  std::vector<float> scales;
  int uint8_zero_point = -1;  // -1: symmetric int8 (zero point 0)
  bool operator==(const QParams& o) const { return scales == o.scales && uint8_zero_point == o.uint8_zero_point; }
};

// The type a QuantizeLinear quantizes to: its zero point's; without one uint8, as ONNX defines it, or (opset 21) its
// output_dtype attribute's int8 or uint8. A DequantizeLinear of its output without a zero point takes the same.
Expected<DType> quantized_type(const Graph& g, const Node& q) {
  if (q.inputs.size() > 2 && q.inputs[2] >= 0) {
    if (const Tensor* zp = g.constant(q.inputs[2])) return zp->dtype();
  }
  const int64_t t = QD_TRY(q.attrs.get_int("output_dtype", 0));
  if (t == 0 || t == 2) return DType::kUInt8;  // TensorProto's UINT8
  if (t == 3) return DType::kInt8;              // INT8
  return unsupported("output_dtype " + std::to_string(t) + "; qdeploy quantizes to int8 or uint8")
      .at_node(q.name, "QuantizeLinear");
}

// `quantized`: the type of the pair's integers, which a missing zero point (0) takes.
Expected<QParams> qparams(const Graph& g, const Node& n, DType quantized) {
  const Tensor* s = g.constant(n.inputs[1]);
  if (!s) return unsupported("the scale is computed at run time; qdeploy needs constant scales").at_node(n.name, op_name(n.op));
  QParams p;
  p.scales.resize(static_cast<size_t>(s->numel()));
  for (int64_t i = 0; i < s->numel(); ++i) p.scales[i] = static_cast<float>(s->get_f64(i));
  for (float x : p.scales) {
    if (!(x > 0) || !std::isfinite(x)) {
      return invalid("scale " + std::to_string(x) + " is not positive and finite").at_node(n.name, op_name(n.op));
    }
  }
  if (n.inputs.size() < 3 || n.inputs[2] < 0) {
    if (quantized == DType::kUInt8) p.uint8_zero_point = 0;
  } else {
    const Tensor* zp = g.constant(n.inputs[2]);
    if (!zp) return unsupported("the zero point is computed at run time").at_node(n.name, op_name(n.op));
    if (zp->dtype() == DType::kUInt8) {
      if (zp->numel() != 1) return unsupported("per-axis uint8 zero points").at_node(n.name, op_name(n.op));
      p.uint8_zero_point = static_cast<int>(zp->get_i64(0));
    } else if (zp->dtype() != DType::kInt8) {
      return unsupported(std::string("zero point of type ") + dtype_name(zp->dtype()) +
                         "; qdeploy's INT8 is int8 with zero point 0, or uint8 with a zero point for activations")
          .at_node(n.name, op_name(n.op));
    } else {
      for (int64_t i = 0; i < zp->numel(); ++i) {
        if (zp->get_i64(i) != 0) {
          return unsupported("non-zero int8 zero point " + std::to_string(zp->get_i64(i)) +
                             "; qdeploy's int8 is symmetric (zero point 0): re-export the QAT model with symmetric "
                             "quantizers, or with uint8 ones for asymmetric activations").at_node(n.name, op_name(n.op));
        }
      }
    }
  }
  return p;
}

// The axis of a weight's output channels (one weight scale each) as the node reading it, directly or as the output
// of its DequantizeLinear `w`, sees them (int8_weight_axis); 0 when no Conv, Gemm or MatMul reads it as weights.
int weight_channel_axis(const Graph& g, int w) {
  for (const Node& n : g.nodes) {
    if (is_int8_compute(n.op) && n.inputs.size() > 1 && n.inputs[1] == w) return int8_weight_axis(n);
  }
  return 0;
}

}  // namespace

Expected<QdqScales> strip_qdq(Graph& g) {
  QdqScales out;
  std::vector<int> consumers_of_q(g.values.size(), 0);
  for (const Node& n : g.nodes) {
    for (int in : n.inputs) {
      if (in >= 0) ++consumers_of_q[in];
    }
  }
  std::map<int, int> replace;  // DQ output value -> float value it stands for
  std::vector<char> remove(g.nodes.size(), 0);
  std::map<int, size_t> q_of;  // Q output value -> Q node index
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].op == OpType::QuantizeLinear) q_of[g.nodes[i].outputs[0]] = i;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& dq = g.nodes[i];
    if (dq.op != OpType::DequantizeLinear) continue;
    auto qi = q_of.find(dq.inputs[0]);
    if (qi == q_of.end()) {
      // DQ of stored int8 weights (ONNX Runtime's QDQ format): the DQ output becomes the float weight it stands for,
      // with the DQ's scales as its weight scales. Other stored data (uint8, computed scales) runs as an op.
      const Tensor* data = g.constant(dq.inputs[0]);
      const Tensor* zp = dq.inputs.size() > 2 && dq.inputs[2] >= 0 ? g.constant(dq.inputs[2]) : nullptr;
      const bool int8_zp = dq.inputs.size() < 3 || dq.inputs[2] < 0 || (zp && zp->dtype() == DType::kInt8);
      if (!data || data->dtype() != DType::kInt8 || data->rank() == 0 || !g.is_constant(dq.inputs[1]) || !int8_zp) {
        continue;
      }
      const std::vector<float> s = QD_TRY(qparams(g, dq, DType::kInt8)).scales;
      const int64_t axis = QD_TRY(dq.attrs.get_int("axis", 1));
      const int wa = weight_channel_axis(g, dq.outputs[0]);
      if (static_cast<size_t>(wa) >= data->rank()) continue;
      const int64_t channels = data->shape()[wa];
      if (s.size() > 1 && (axis != wa || static_cast<int64_t>(s.size()) != channels)) continue;
      Tensor w(DType::kFloat32, data->shape());
      int64_t inner = 1;  // elements per step of the channel axis
      for (size_t d = static_cast<size_t>(wa) + 1; d < data->rank(); ++d) inner *= data->shape()[d];
      for (int64_t k = 0; k < data->numel(); ++k) {
        w.data<float>()[k] = data->data<int8_t>()[k] * s[s.size() > 1 ? (k / inner) % channels : 0];
      }
      const int w_value = dq.outputs[0];
      g.constants[w_value] = std::move(w);
      out.weight_scales[g.values[w_value].name] =
          s.size() == 1 ? std::vector<float>(static_cast<size_t>(channels), s[0]) : s;
      remove[i] = 1;
      continue;
    }
    const Node& q = g.nodes[qi->second];
    const DType quantized = QD_TRY(quantized_type(g, q));
    const QParams pq = QD_TRY(qparams(g, q, quantized));
    if (!(pq == QD_TRY(qparams(g, dq, quantized)))) {
      return invalid("QuantizeLinear '" + q.name + "' and DequantizeLinear '" + dq.name +
                     "' use different scales or zero points; a Q/DQ pair must share them");
    }
    const std::vector<float>& sq = pq.scales;
    const int x = q.inputs[0];
    const std::string& name = g.values[x].name;
    if (g.is_constant(x)) {
      const int64_t axis = QD_TRY(q.attrs.get_int("axis", 1));
      const int wa = weight_channel_axis(g, dq.outputs[0]);
      const Tensor* w = g.constant(x);
      if (sq.size() > 1 && (axis != wa || static_cast<size_t>(wa) >= w->rank())) {
        return unsupported("weight quantized along axis " + std::to_string(axis) + "; qdeploy expects per-output-"
                           "channel weight scales (axis " + std::to_string(wa) + " for the node that reads it)")
            .at_node(q.name, "QuantizeLinear");
      }
      if (pq.uint8_zero_point >= 0) {
        return unsupported(std::string("uint8 weights (") + kNoZeroPointIsUint8 +
                           "); qdeploy's weights are per-output-channel symmetric int8: give the weight quantizers an "
                           "int8 zero point of 0").at_node(q.name, "QuantizeLinear");
      }
      // A scalar constant (no channel axis) keeps its one scale.
      const size_t channels = static_cast<size_t>(wa) < w->rank() ? static_cast<size_t>(w->shape()[wa]) : 1;
      out.weight_scales[name] = sq.size() == 1 ? std::vector<float>(channels, sq[0]) : sq;
    } else {
      if (sq.size() != 1) return unsupported("per-axis activation scales").at_node(q.name, "QuantizeLinear");
      const int zp = pq.uint8_zero_point;
      auto zit = out.act_zero_points.find(name);
      const int seen_zp = zit == out.act_zero_points.end() ? -1 : zit->second;
      auto [it, inserted] = out.act_scales.emplace(name, sq[0]);
      if (!inserted && (zp >= 0 || seen_zp >= 0) && (zp != seen_zp || it->second != sq[0])) {
        return unsupported("tensor '" + name + "' has two quantizers, at least one asymmetric, that differ; an "
                           "asymmetric tensor needs one scale and zero point").at_node(q.name, "QuantizeLinear");
      }
      if (!inserted && it->second != sq[0]) {
        // Two quantizers on one tensor with different scales (placement 2 can do this): keep the larger range.
        it->second = std::max(it->second, sq[0]);
      }
      if (zp >= 0) out.act_zero_points[name] = zp;
    }
    replace[dq.outputs[0]] = x;
    remove[i] = 1;
    ++out.pairs;
  }
  // A Q is removed only when every reader of its output is a removed DQ.
  for (const auto& [qv, qi] : q_of) {
    int dq_readers = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (remove[i] && g.nodes[i].inputs[0] == qv) ++dq_readers;
    }
    if (dq_readers > 0 && dq_readers == consumers_of_q[qv]) remove[qi] = 1;
    else if (dq_readers > 0) {
      return unsupported("the output of QuantizeLinear '" + g.nodes[qi].name +
                         "' feeds something other than DequantizeLinear");
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (remove[i]) continue;
    Node n = std::move(g.nodes[i]);
    for (int& in : n.inputs) {
      auto r = replace.find(in);
      if (r != replace.end()) in = r->second;
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  for (int& o : g.outputs) {
    auto r = replace.find(o);
    if (r != replace.end()) o = r->second;
  }
  QD_RETURN_IF_ERROR(g.topo_sort());
  g.remove_dead();
  return out;
}

}  // namespace qd
