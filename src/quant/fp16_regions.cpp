#include "quant/fp16_regions.h"

#include <map>

#include "core/half.h"

namespace qd {

namespace {

constexpr int64_t kOnnxFloat = 1, kOnnxFloat16 = 10;

// Ops that compute in the type of their data input and write it to their first output (Split: every output).
bool computes_in_data_type(OpType op) {
  switch (op) {
    case OpType::Abs: case OpType::Acos: case OpType::Acosh: case OpType::Asin: case OpType::Asinh:
    case OpType::Atan: case OpType::Atanh: case OpType::Ceil: case OpType::Celu: case OpType::Clip:
    case OpType::Cos: case OpType::Cosh: case OpType::Elu: case OpType::Erf: case OpType::Exp: case OpType::Floor:
    case OpType::Gelu: case OpType::HardSigmoid: case OpType::HardSwish: case OpType::Identity:
    case OpType::LeakyRelu: case OpType::Log: case OpType::Mish: case OpType::Neg: case OpType::Reciprocal:
    case OpType::Relu: case OpType::Round: case OpType::Selu: case OpType::Sigmoid: case OpType::Sign:
    case OpType::Sin: case OpType::Sinh: case OpType::Softplus: case OpType::Softsign: case OpType::Swish:
    case OpType::Sqrt: case OpType::Tan: case OpType::Tanh: case OpType::ThresholdedRelu:
    case OpType::Add: case OpType::Div: case OpType::Max: case OpType::Mean: case OpType::Min: case OpType::Mul:
    case OpType::Pow: case OpType::PRelu: case OpType::Sub: case OpType::Sum: case OpType::Where:
    case OpType::Conv: case OpType::ConvTranspose: case OpType::Gemm: case OpType::MatMul:
    case OpType::Flatten: case OpType::Reshape: case OpType::Squeeze: case OpType::Unsqueeze:
    case OpType::DepthToSpace: case OpType::SpaceToDepth: case OpType::Transpose: case OpType::Concat:
    case OpType::Split: case OpType::Slice: case OpType::Gather: case OpType::Expand: case OpType::Tile:
    case OpType::Pad: case OpType::Resize: case OpType::Upsample:
    case OpType::AveragePool: case OpType::GlobalAveragePool: case OpType::GlobalMaxPool: case OpType::MaxPool:
    case OpType::BatchNormalization: case OpType::GroupNormalization: case OpType::InstanceNormalization:
    case OpType::LayerNormalization: case OpType::LRN: case OpType::LogSoftmax: case OpType::Softmax:
    case OpType::ReduceL2: case OpType::ReduceMax: case OpType::ReduceMean: case OpType::ReduceMin:
    case OpType::ReduceSum:
      return true;
    default:
      return false;
  }
}

int data_input(OpType op) { return op == OpType::Where ? 1 : 0; }

// Inputs that stay float32 in an FP16 node: Resize's roi and scales, Upsample's scales (scales are float32 only).
bool float32_slot(const Node& n, size_t i) {
  return (n.op == OpType::Resize && (i == 1 || i == 2)) || (n.op == OpType::Upsample && i == 1);
}

bool is_cast_to(const Node& n, int64_t to) {
  return n.op == OpType::Cast && n.inputs.size() == 1 && n.outputs.size() == 1 && *n.attrs.get_int("to", 0) == to;
}

// The element type of every value where it follows from the inputs, constants and ops (kUndefined elsewhere);
// nodes in topological order.
std::vector<DType> known_dtypes(const Graph& g) {
  std::vector<DType> t(g.values.size(), DType::kUndefined);
  for (int v : g.inputs) t[v] = g.values[v].dtype;
  for (const auto& [v, c] : g.constants) t[v] = c.dtype();
  auto in_t = [&](const Node& n, size_t i) {
    return i < n.inputs.size() && n.inputs[i] >= 0 ? t[n.inputs[i]] : DType::kUndefined;
  };
  for (const Node& n : g.nodes) {
    if (n.outputs.empty() || n.outputs[0] < 0) continue;
    DType out = DType::kUndefined;
    switch (n.op) {
      case OpType::Cast: {
        const int64_t to = *n.attrs.get_int("to", 0);
        if (!dtype_from_onnx(static_cast<int32_t>(to), &out)) out = DType::kUndefined;
        break;
      }
      case OpType::DequantizeLinear: out = in_t(n, 1); break;
      case OpType::QuantizeLinear: out = n.inputs.size() > 2 && n.inputs[2] >= 0 ? in_t(n, 2) : DType::kUInt8; break;
      case OpType::Shape: case OpType::Size: case OpType::ArgMax: case OpType::ArgMin: case OpType::NonZero:
        out = DType::kInt64;
        break;
      case OpType::Equal: case OpType::Greater: case OpType::GreaterOrEqual: case OpType::Less:
      case OpType::LessOrEqual: case OpType::Not: case OpType::And: case OpType::Or: case OpType::Xor:
        out = DType::kBool;
        break;
      default:
        if (computes_in_data_type(n.op)) {
          bool all_known = true;
          for (int in : n.inputs) all_known = all_known && (in < 0 || t[in] != DType::kUndefined);
          if (all_known) out = in_t(n, data_input(n.op));
        }
    }
    if (out == DType::kUndefined) continue;
    const size_t outs = n.op == OpType::Split ? n.outputs.size() : 1;
    for (size_t i = 0; i < outs; ++i) {
      if (n.outputs[i] >= 0) t[n.outputs[i]] = out;
    }
  }
  return t;
}

std::string fresh_name(const Graph& g, const std::string& base) {
  std::string n = base;
  for (int k = 1; g.find_value(n) >= 0; ++k) n = base + "_" + std::to_string(k);
  return n;
}

}  // namespace

Expected<Graph> cast_float_regions_to_fp16(const Graph& src, const std::set<std::string>& keep_fp32,
                                           Fp16RegionReport* report) {
  Graph g = src;
  Fp16RegionReport rep;
  const std::vector<DType> t = known_dtypes(g);
  std::vector<char> half_node(g.nodes.size(), 0);
  std::vector<char> half_value(g.values.size(), 0);  // written in FP16 by a half node
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!computes_in_data_type(n.op) || keep_fp32.count(n.name)) continue;
    const size_t d = data_input(n.op);
    if (d >= n.inputs.size() || n.inputs[d] < 0 || t[n.inputs[d]] != DType::kFloat32) continue;
    bool all_known = true;
    for (int in : n.inputs) all_known = all_known && (in < 0 || t[in] != DType::kUndefined);
    if (!all_known) continue;
    half_node[i] = 1;
    ++rep.fp16_nodes;
    const size_t outs = n.op == OpType::Split ? n.outputs.size() : 1;
    for (size_t k = 0; k < outs; ++k) {
      if (n.outputs[k] >= 0 && t[n.outputs[k]] == DType::kFloat32) half_value[n.outputs[k]] = 1;
    }
  }
  std::vector<Node> added;
  auto cast_node = [&](int in, int out, int64_t to) {
    Node c;
    c.name = g.values[out].name + (to == kOnnxFloat16 ? "/CastToFp16" : "/CastToFp32");
    c.op = OpType::Cast;
    c.opset = g.opset ? g.opset : 13;
    c.attrs.set("to", to);
    c.inputs = {in};
    c.outputs = {out};
    added.push_back(std::move(c));
  };
  // A region's tensor read in float32 (a float32 node, a float32 slot, a graph output): the node writes
  // "<name>_fp16", the Cast back writes the original name, and the half nodes read the FP16 tensor.
  const size_t n_values = g.values.size();
  std::vector<int> half_of(n_values, -1);  // float32 value -> its FP16 copy
  std::vector<char> read_as_fp32(n_values, 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int v = n.inputs[k];
      if (v >= 0 && half_value[v] && (!half_node[i] || float32_slot(n, k))) read_as_fp32[v] = 1;
    }
  }
  for (int v : g.outputs) {
    if (half_value[v]) read_as_fp32[v] = 1;
  }
  for (size_t v = 0; v < n_values; ++v) {
    if (!half_value[v]) continue;
    if (!read_as_fp32[v]) {  // read by half nodes alone: it just becomes FP16
      g.values[v].dtype = DType::kFloat16;
      continue;
    }
    const int h = g.add_value(fresh_name(g, g.values[v].name + "_fp16"));
    g.values[h].dtype = DType::kFloat16;
    half_of[v] = h;
    ++rep.casts_to_fp32;
  }
  // Rewire: the producers of renamed region tensors write the FP16 copy; half nodes read FP16 copies (new Casts for
  // float32 tensors), float32 slots and float32 nodes read the float32 tensors.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (int& o : n.outputs) {
      if (o >= 0 && o < static_cast<int>(n_values) && read_as_fp32[o]) {
        cast_node(half_of[o], o, kOnnxFloat);
        o = half_of[o];
      }
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!half_node[i]) continue;
    for (size_t k = 0; k < g.nodes[i].inputs.size(); ++k) {
      const int v = g.nodes[i].inputs[k];
      if (v < 0 || v >= static_cast<int>(n_values) || float32_slot(g.nodes[i], k)) continue;
      if (read_as_fp32[v]) {  // a region tensor read by another half node: its FP16 copy
        g.nodes[i].inputs[k] = half_of[v];
      } else if (t[v] == DType::kFloat32 && !half_value[v]) {  // a float32 tensor entering the region
        if (half_of[v] < 0) {
          half_of[v] = g.add_value(fresh_name(g, g.values[v].name + "_fp16"));
          g.values[half_of[v]].dtype = DType::kFloat16;
          cast_node(v, half_of[v], kOnnxFloat16);
          ++rep.casts_to_fp16;
        }
        g.nodes[i].inputs[k] = half_of[v];
      }
    }
  }
  for (Node& n : added) g.nodes.push_back(std::move(n));
  QD_RETURN_IF_ERROR(g.topo_sort());
  g.relink();
  if (report) *report = rep;
  return g;
}

int widen_fp16_casts(Graph& g) {
  bool qdq = false;
  for (const Node& n : g.nodes) qdq = qdq || n.op == OpType::QuantizeLinear || n.op == OpType::DequantizeLinear;
  if (!qdq) return 0;
  for (int v : g.inputs) {
    if (g.values[v].dtype == DType::kFloat16) return 0;
  }
  const std::vector<DType> t = known_dtypes(g);
  for (int v : g.outputs) {
    if (t[v] == DType::kFloat16) return 0;
  }
  g.relink();
  std::vector<int> alias(g.values.size(), -1);  // removed cast's output -> the value its readers read instead
  std::vector<char> remove(g.nodes.size(), 0);
  int removed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (is_cast_to(n, kOnnxFloat16) && n.inputs[0] >= 0 && t[n.inputs[0]] == DType::kFloat32) {
      alias[n.outputs[0]] = n.inputs[0];  // readers of the FP16 copy read the float32 tensor
      remove[i] = 1;
    } else if (is_cast_to(n, kOnnxFloat) && n.inputs[0] >= 0 && t[n.inputs[0]] == DType::kFloat16) {
      const int h = n.inputs[0], f = n.outputs[0];
      const int p = g.values[h].producer;
      bool graph_output = false;
      for (int o : g.outputs) graph_output = graph_output || o == h;
      if (p < 0 || graph_output) {  // an FP16 constant (widened below) or an output: readers read it
        alias[f] = h;
      } else {  // the producer writes the float32 name; readers of the FP16 tensor read that
        for (int& o : g.nodes[p].outputs) {
          if (o == h) o = f;
        }
        alias[h] = f;
      }
      remove[i] = 1;
    }
  }
  auto resolve = [&](int v) {
    while (v >= 0 && alias[v] >= 0) v = alias[v];
    return v;
  };
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (remove[i]) {
      ++removed;
      continue;
    }
    Node n = std::move(g.nodes[i]);
    for (int& in : n.inputs) in = resolve(in);
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  for (int& o : g.outputs) o = resolve(o);
  for (auto& [v, c] : g.constants) {
    if (c.dtype() != DType::kFloat16) continue;
    Tensor w(DType::kFloat32, c.shape());
    for (int64_t k = 0; k < c.numel(); ++k) w.data<float>()[k] = half_to_float(c.data<uint16_t>()[k]);
    c = std::move(w);
    g.values[v].dtype = DType::kFloat32;
  }
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].dtype == DType::kFloat16) g.values[v].dtype = DType::kFloat32;
  }
  g.relink();
  g.remove_dead();
  return removed;
}

}  // namespace qd
