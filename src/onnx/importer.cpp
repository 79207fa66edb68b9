#include "onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/file_io.h"
#include "onnx.pb.h"
#include "onnx/tensor_proto.h"

namespace qd {

namespace {

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Attribute -> AttrValue. Graph attributes (If/Loop bodies) are rejected by the caller, whose ops are unsupported.
Expected<AttrValue> convert_attr(const onnx::AttributeProto& a, const std::string& model_dir) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return AttrValue(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::FLOAT: return AttrValue(a.f());
    case onnx::AttributeProto::STRING: return AttrValue(a.s());
    case onnx::AttributeProto::INTS: return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::FLOATS: return AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::STRINGS: return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case onnx::AttributeProto::TENSOR: {
      auto t = tensor_from_proto(a.t(), model_dir);
      if (!t) return t.status();
      return AttrValue(std::move(*t));
    }
    default: break;
  }
  // Files written by old exporters may leave `type` unset: infer it from the one field that is filled.
  if (a.type() == onnx::AttributeProto::UNDEFINED) {
    if (a.has_i()) return AttrValue(static_cast<int64_t>(a.i()));
    if (a.has_f()) return AttrValue(a.f());
    if (a.has_s()) return AttrValue(a.s());
    if (a.ints_size()) return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    if (a.floats_size()) return AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
  }
  return unsupported("attribute '" + a.name() + "' has a type qdeploy does not support (graphs, sparse tensors)");
}

// A Constant node's value as a tensor.
Expected<Tensor> constant_value(const onnx::NodeProto& n, const std::string& model_dir) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "value") return tensor_from_proto(a.t(), model_dir);
    if (a.name() == "value_float") return Tensor::scalar_f32(a.f());
    if (a.name() == "value_int") return Tensor::scalar_i64(a.i());
    if (a.name() == "value_floats") {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      return Tensor::from_f32({static_cast<int64_t>(v.size())}, v);
    }
    if (a.name() == "value_ints") return Tensor::from_i64(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    if (a.name() == "sparse_value") return unsupported("sparse Constant values");
    if (a.name() == "value_string" || a.name() == "value_strings") return unsupported("string Constant values");
  }
  return invalid("Constant node has no value attribute");
}

Status read_value_info(const onnx::ValueInfoProto& vi, Value* v) {
  if (!vi.type().has_tensor_type()) return unsupported("input '" + vi.name() + "' is not a tensor (sequences/maps)");
  const auto& tt = vi.type().tensor_type();
  if (!dtype_from_onnx(tt.elem_type(), &v->dtype)) {
    return unsupported("input '" + vi.name() + "' has element type code " + std::to_string(tt.elem_type()));
  }
  if (!tt.has_shape()) return Status::ok();
  if (tt.shape().dim_size() > 8) return invalid("input '" + vi.name() + "' has rank > 8");
  v->has_shape = true;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0 || d.dim_value() > (int64_t{1} << 32)) {
        return invalid("input '" + vi.name() + "' has invalid dim " + std::to_string(d.dim_value()));
      }
      v->shape.push_back(d.dim_value());
      v->dim_names.emplace_back();
    } else {
      v->shape.push_back(-1);
      v->dim_names.push_back(d.dim_param());
    }
  }
  return Status::ok();
}

}  // namespace

Expected<Graph> import_onnx_bytes(const std::string& bytes, const std::string& model_dir, const std::string& what) {
  auto fail = [&](Status s) { return s.prefix(what); };
  onnx::ModelProto model;
  {
    google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                  static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
    stream.SetRecursionLimit(64);
    if (bytes.size() > INT32_MAX || !model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
      return fail(invalid("not a valid ONNX model: the protobuf data is truncated or corrupt"));
    }
  }
  if (!model.has_graph()) return fail(invalid("the model has no graph"));
  Graph g;
  g.name = model.graph().name();
  for (const auto& op : model.opset_import()) {
    if (is_default_domain(op.domain())) g.opset = static_cast<int>(std::min<int64_t>(op.version(), 1 << 20));
  }
  const bool uses_default_domain = std::any_of(model.graph().node().begin(), model.graph().node().end(),
                                               [](const onnx::NodeProto& n) { return is_default_domain(n.domain()); });
  if (g.opset == 0 && uses_default_domain) {
    return fail(invalid("the model declares no opset for the default ONNX domain"));
  }
  if (g.opset != 0 && (g.opset < kMinOpset || g.opset > kMaxOpset)) {
    return fail(unsupported("opset " + std::to_string(g.opset) + " is not supported (qdeploy reads opsets " +
                            std::to_string(kMinOpset) + "-" + std::to_string(kMaxOpset) +
                            "); re-export the model with opset_version=" + std::to_string(kMaxOpset)));
  }
  const auto& gp = model.graph();
  // Initializers become constants.
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return fail(invalid("an initializer has no name"));
    if (g.find_value(init.name()) >= 0) return fail(invalid("initializer '" + init.name() + "' is defined twice"));
    auto t = tensor_from_proto(init, model_dir);
    if (!t) return fail(t.status());
    g.constants[g.add_value(init.name())] = std::move(*t);
  }
  for (const auto& in : gp.input()) {
    if (g.find_value(in.name()) >= 0) continue;  // opset < 9 lists initializers among the inputs
    if (in.name().empty()) return fail(invalid("a graph input has no name"));
    const int v = g.add_value(in.name());
    QD_RETURN_IF_ERROR(fail(read_value_info(in, &g.values[v])));
    g.inputs.push_back(v);
  }
  // Nodes: collect every unsupported one before failing, so the user sees the whole list.
  std::vector<std::string> unsupported_nodes;
  int index = 0;
  for (const auto& np : gp.node()) {
    const std::string name = np.name().empty() ? np.op_type() + "_" + std::to_string(index) : np.name();
    ++index;
    if (!is_default_domain(np.domain())) {
      unsupported_nodes.push_back("'" + name + "' (" + np.domain() + "::" + np.op_type() + ")");
      continue;
    }
    if (np.op_type() == "Constant") {
      if (np.output_size() != 1 || np.output(0).empty()) return fail(invalid("Constant node '" + name + "' must have one output"));
      if (g.find_value(np.output(0)) >= 0) return fail(invalid("value '" + np.output(0) + "' is defined twice"));
      auto t = constant_value(np, model_dir);
      if (!t) return fail(Status(t.status()).at_node(name, "Constant"));
      g.constants[g.add_value(np.output(0))] = std::move(*t);
      continue;
    }
    auto op = op_from_name(np.op_type());
    if (!op) {
      unsupported_nodes.push_back("'" + name + "' (" + np.op_type() + ", opset " + std::to_string(g.opset) + ")");
      continue;
    }
    Node n;
    n.name = name;
    n.op = *op;
    n.opset = g.opset;
    for (const auto& a : np.attribute()) {
      auto v = convert_attr(a, model_dir);
      if (!v) return fail(Status(v.status()).at_node(name, np.op_type()));
      n.attrs.set(a.name(), std::move(*v));
    }
    for (const auto& in : np.input()) {
      if (in.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      int v = g.find_value(in);
      if (v < 0) v = g.add_value(in);  // defined by a later node (checked by topo_sort) or dangling
      n.inputs.push_back(v);
    }
    for (const auto& out : np.output()) {
      if (out.empty()) {
        n.outputs.push_back(-1);
        continue;
      }
      int v = g.find_value(out);
      if (v < 0) v = g.add_value(out);
      n.outputs.push_back(v);
    }
    g.nodes.push_back(std::move(n));
  }
  if (!unsupported_nodes.empty()) {
    std::string list;
    for (const auto& u : unsupported_nodes) list += "\n  " + u;
    return fail(unsupported(std::to_string(unsupported_nodes.size()) + " node(s) use ops qdeploy does not support:" +
                            list + "\n(see docs/operators.md for the supported ops)"));
  }
  for (const auto& out : gp.output()) {
    const int v = g.find_value(out.name());
    if (v < 0) return fail(invalid("graph output '" + out.name() + "' is not produced by any node"));
    g.outputs.push_back(v);
  }
  if (g.outputs.empty()) return fail(invalid("the graph has no outputs"));
  // Values referenced but defined nowhere are reported by topo_sort (dangling edges), as are cycles.
  Status st = g.topo_sort();
  if (!st.is_ok()) return fail(st);
  return g;
}

Expected<Graph> import_onnx_file(const std::string& path) {
  auto bytes = read_file(path, uint64_t{2} << 30);
  if (!bytes) return bytes.status();
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return import_onnx_bytes(*bytes, dir, path);
}

}  // namespace qd
