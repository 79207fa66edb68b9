#include "onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "core/file_io.h"
#include "onnx.pb.h"
#include "onnx/tensor_proto.h"
#include "ops/op.h"
#include "ops/plugin_registry.h"
#include "quant/fp16_regions.h"

namespace qd {

namespace {

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

const char* attr_type_name(int t) {
  switch (t) {
    case onnx::AttributeProto::FLOAT: return "a float";
    case onnx::AttributeProto::INT: return "an int";
    case onnx::AttributeProto::STRING: return "a string";
    case onnx::AttributeProto::TENSOR: return "a tensor";
    case onnx::AttributeProto::GRAPH: return "a graph";
    case onnx::AttributeProto::SPARSE_TENSOR: return "a sparse tensor";
    case onnx::AttributeProto::TYPE_PROTO: return "a type";
    case onnx::AttributeProto::FLOATS: return "a list of floats";
    case onnx::AttributeProto::INTS: return "a list of ints";
    case onnx::AttributeProto::STRINGS: return "a list of strings";
    case onnx::AttributeProto::TENSORS: return "a list of tensors";
    case onnx::AttributeProto::GRAPHS: return "a list of graphs";
    case onnx::AttributeProto::SPARSE_TENSORS: return "a list of sparse tensors";
    case onnx::AttributeProto::TYPE_PROTOS: return "a list of types";
    default: return "of no type";
  }
}

// Attribute -> AttrValue. Graph attributes (If/Loop bodies) are rejected: qdeploy supports no control flow.
Expected<AttrValue> convert_attr(const onnx::AttributeProto& a, const std::string& model_dir) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return AttrValue(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::FLOAT: return AttrValue(a.f());
    case onnx::AttributeProto::STRING: return AttrValue(a.s());
    case onnx::AttributeProto::INTS: return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::FLOATS: return AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::STRINGS: return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case onnx::AttributeProto::TENSOR: {
      auto t = tensor_from_proto(a.t(), model_dir, "attribute '" + a.name() + "': tensor");
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
    if (a.strings_size()) return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    if (a.has_t()) {
      auto t = tensor_from_proto(a.t(), model_dir, "attribute '" + a.name() + "': tensor");
      if (!t) return t.status();
      return AttrValue(std::move(*t));
    }
    return invalid("attribute '" + a.name() + "' has no type and no value");
  }
  return unsupported("attribute '" + a.name() + "' is " + attr_type_name(a.type()) +
                     "; qdeploy does not support graph, sparse-tensor, type or tensor-list attributes");
}

// A Constant node's value as a tensor (exactly one value_* attribute, of the type its name says).
Expected<Tensor> constant_value(const onnx::NodeProto& n, const std::string& model_dir) {
  const onnx::AttributeProto* value = nullptr;
  for (const auto& a : n.attribute()) {
    if (a.name().rfind("value", 0) != 0 && a.name() != "sparse_value") continue;
    if (value) return invalid("Constant node has more than one value attribute ('" + value->name() + "', '" + a.name() + "')");
    value = &a;
  }
  if (!value) return invalid("Constant node has no value attribute");
  const auto& a = *value;
  auto want = [&](onnx::AttributeProto::AttributeType t) -> Status {
    if (a.type() == t || a.type() == onnx::AttributeProto::UNDEFINED) return Status::ok();
    return invalid("Constant attribute '" + a.name() + "' should be " + attr_type_name(t) + " but is " +
                   attr_type_name(a.type()));
  };
  if (a.name() == "value") {
    QD_RETURN_IF_ERROR(want(onnx::AttributeProto::TENSOR));
    return tensor_from_proto(a.t(), model_dir, "Constant value");
  }
  if (a.name() == "value_float") {
    QD_RETURN_IF_ERROR(want(onnx::AttributeProto::FLOAT));
    return Tensor::scalar_f32(a.f());
  }
  if (a.name() == "value_int") {
    QD_RETURN_IF_ERROR(want(onnx::AttributeProto::INT));
    return Tensor::scalar_i64(a.i());
  }
  if (a.name() == "value_floats") {
    QD_RETURN_IF_ERROR(want(onnx::AttributeProto::FLOATS));
    std::vector<float> v(a.floats().begin(), a.floats().end());
    return Tensor::from_f32({static_cast<int64_t>(v.size())}, v);
  }
  if (a.name() == "value_ints") {
    QD_RETURN_IF_ERROR(want(onnx::AttributeProto::INTS));
    return Tensor::from_i64(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
  }
  if (a.name() == "sparse_value") return unsupported("sparse Constant values are not supported");
  if (a.name() == "value_string" || a.name() == "value_strings") return unsupported("string Constant values are not supported");
  return invalid("Constant node has an unknown attribute '" + a.name() + "'");
}

Status read_value_info(const onnx::ValueInfoProto& vi, Value* v) {
  const std::string what = "graph input '" + vi.name() + "'";
  if (!vi.has_type()) return invalid(what + " has no type; declare it as a tensor with an element type and shape");
  if (!vi.type().has_tensor_type()) return unsupported(what + " is not a tensor (sequences, maps and optionals are not supported)");
  const auto& tt = vi.type().tensor_type();
  if (tt.elem_type() == onnx::TensorProto::UNDEFINED) return invalid(what + " has no element type");
  if (!dtype_from_onnx(tt.elem_type(), &v->dtype)) return unsupported(what + ": " + unsupported_type_message(tt.elem_type()));
  if (!tt.has_shape()) return Status::ok();
  if (tt.shape().dim_size() > 8) return invalid(what + " has rank " + std::to_string(tt.shape().dim_size()) + "; at most 8 is supported");
  v->has_shape = true;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0 || d.dim_value() > (int64_t{1} << 32)) {
        return invalid(what + " has invalid dim " + std::to_string(d.dim_value()));
      }
      v->shape.push_back(d.dim_value());
      v->dim_names.emplace_back();
    } else {
      v->shape.push_back(-1);
      v->dim_names.push_back(d.dim_param());
    }
  }
  // The fixed dims alone must not already exceed the element limit (the symbolic ones are checked once bound).
  Shape fixed;
  for (int64_t d : v->shape) fixed.push_back(d < 0 ? 1 : d);
  if (!checked_numel(fixed)) return invalid(what + " has more than 2^40 elements (shape " + shape_str(v->shape) + ")");
  return Status::ok();
}

// Model-local functions (FunctionProto; the dynamo exporter writes them unless it inlines) are expanded in place:
// a call's formal inputs and outputs become the caller's values, the body's other values get the call's name as a
// prefix, and attributes referenced by ref_attr_name take the call's value or the function's default.
class FunctionInliner {
  // A function's attribute defaults (FunctionProto.attribute_proto, field 11). Debian's onnx.proto (onnx 1.12)
  // predates the field, so protobuf keeps it among the message's unknown fields, which are read here.
  static std::vector<onnx::AttributeProto> attribute_defaults(const onnx::FunctionProto& f) {
    std::vector<onnx::AttributeProto> out;
    const std::string& raw = f.unknown_fields();
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(raw.data()), static_cast<int>(raw.size()));
    for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
      if (tag == ((11u << 3) | 2u)) {  // field 11, length-delimited
        uint32_t len = 0;
        std::string bytes;
        onnx::AttributeProto a;
        if (!in.ReadVarint32(&len) || !in.ReadString(&bytes, static_cast<int>(len)) || !a.ParseFromString(bytes)) break;
        out.push_back(std::move(a));
      } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
        break;
      }
    }
    return out;
  }

 public:
  explicit FunctionInliner(const onnx::ModelProto& m) {
    for (const auto& f : m.functions()) functions_[{f.domain(), f.name()}] = {&f, attribute_defaults(f)};
  }
  bool empty() const { return functions_.empty(); }

  // Appends `n`, or its expansion when it calls a local function, to `out`.
  Status expand(const onnx::NodeProto& n, const std::string& name, int depth, std::vector<onnx::NodeProto>* out) {
    auto it = functions_.find({n.domain(), n.op_type()});
    if (it == functions_.end()) {
      out->push_back(n);
      if (out->back().name().empty()) out->back().set_name(name);
      return Status::ok();
    }
    const onnx::FunctionProto& f = *it->second.proto;
    const std::string where = "node '" + name + "' (call of local function " + n.domain() + "::" + n.op_type() + ")";
    if (depth >= kMaxDepth) return invalid(where + ": local functions nest deeper than " + std::to_string(kMaxDepth) + " (recursive?)");
    if (n.input_size() > f.input_size() || n.output_size() > f.output_size()) {
      return invalid(where + ": " + std::to_string(n.input_size()) + " inputs and " + std::to_string(n.output_size()) +
                     " outputs, but the function declares " + std::to_string(f.input_size()) + " and " +
                     std::to_string(f.output_size()));
    }
    std::map<std::string, std::string> rename;  // formal name -> actual name ("" = omitted optional input)
    for (int i = 0; i < f.input_size(); ++i) rename[f.input(i)] = i < n.input_size() ? n.input(i) : "";
    for (int i = 0; i < f.output_size(); ++i) {
      rename[f.output(i)] = i < n.output_size() ? n.output(i) : name + "/" + f.output(i);
    }
    std::map<std::string, const onnx::AttributeProto*> attrs;
    for (const auto& a : it->second.defaults) attrs[a.name()] = &a;
    for (const auto& a : n.attribute()) attrs[a.name()] = &a;
    auto mapped = [&](const std::string& v) {
      if (v.empty()) return v;
      auto r = rename.find(v);
      return r != rename.end() ? r->second : name + "/" + v;
    };
    int index = 0;
    for (const auto& body : f.node()) {
      onnx::NodeProto c = body;
      c.set_name(name + "/" + (body.name().empty() ? body.op_type() + "_" + std::to_string(index) : body.name()));
      ++index;
      for (auto& in : *c.mutable_input()) in = mapped(in);
      for (auto& o : *c.mutable_output()) o = mapped(o);
      // Attribute references: take the call's (or default) value under the body's attribute name, or drop it.
      google::protobuf::RepeatedPtrField<onnx::AttributeProto> resolved;
      for (const auto& a : c.attribute()) {
        if (a.ref_attr_name().empty()) {
          *resolved.Add() = a;
          continue;
        }
        auto r = attrs.find(a.ref_attr_name());
        if (r == attrs.end()) continue;
        onnx::AttributeProto v = *r->second;
        v.set_name(a.name());
        *resolved.Add() = std::move(v);
      }
      *c.mutable_attribute() = std::move(resolved);
      QD_RETURN_IF_ERROR(expand(c, c.name(), depth + 1, out));
      if (out->size() > kMaxNodes) return invalid(where + ": expanding local functions gives more than " + std::to_string(kMaxNodes) + " nodes");
    }
    return Status::ok();
  }

 private:
  static constexpr int kMaxDepth = 32;
  static constexpr size_t kMaxNodes = size_t{1} << 20;  // far above real models, bounded for hostile nesting
  struct Function {
    const onnx::FunctionProto* proto;
    std::vector<onnx::AttributeProto> defaults;  // parsed once, not per call
  };
  std::map<std::pair<std::string, std::string>, Function> functions_;
};

// What to tell the user about a node of a domain qdeploy has no ops in.
std::string domain_hint(const std::string& domain, const std::string& op_type) {
  if (const PluginOp* p = find_plugin_op(domain, op_type, 0)) {
    return " [registered only as " + p->qualified + ", newer than the model's opset for the domain]";
  }
  if (plugin_domain_known(domain)) {
    return " [no registered plugin declares this op of the domain: load the library that does with --plugin LIB.so]";
  }
  if (domain.rfind("pkg.onnxscript", 0) == 0) {
    return " [an onnxscript function the exporter did not inline: export with torch.onnx.export(..., dynamo=True, "
           "optimize=True), or inline it with onnx.inliner.inline_local_functions]";
  }
  if (domain == "com.microsoft") return " [an ONNX Runtime contrib op: export without ONNX Runtime's optimizations or fusions]";
  if (domain == "trt" || domain == "com.nvidia") return " [a TensorRT plugin op]";
  return " [a custom op: load the plugin library that declares it with --plugin LIB.so (docs/plugins.md)]";
}

}  // namespace

Expected<Graph> import_onnx_bytes(const std::string& bytes, const std::string& model_dir, const std::string& what) {
  auto fail = [&](Status s) { return s.prefix(what); };
  if (bytes.empty()) return fail(invalid("the file is empty; expected an ONNX model (a protobuf ModelProto)"));
  onnx::ModelProto model;
  {
    if (bytes.size() > INT32_MAX) return fail(invalid("the model is larger than 2 GiB; store the weights as external data"));
    google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                  static_cast<int>(bytes.size()));
    stream.SetRecursionLimit(64);
    if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
      return fail(invalid("not a valid ONNX model: the protobuf data is truncated, corrupt or nested too deeply"));
    }
  }
  if (!model.has_graph()) return fail(invalid("the model has no graph (is this an ONNX model file?)"));
  Graph g;
  g.name = model.graph().name();
  std::map<std::string, int64_t> domain_opset;
  int64_t opset = 0;
  for (const auto& op : model.opset_import()) {
    domain_opset[op.domain()] = op.version();
    if (is_default_domain(op.domain())) opset = op.version();
  }
  const bool uses_default_domain = std::any_of(model.graph().node().begin(), model.graph().node().end(),
                                               [](const onnx::NodeProto& n) { return is_default_domain(n.domain()); });
  if (opset == 0 && uses_default_domain) {
    return fail(invalid("the model declares no opset for the default ONNX domain (opset_import is missing)"));
  }
  if (opset != 0 && (opset < kMinOpset || opset > kMaxOpset)) {
    return fail(unsupported("opset " + std::to_string(opset) + " is not supported (qdeploy reads opsets " +
                            std::to_string(kMinOpset) + "-" + std::to_string(kMaxOpset) +
                            "); re-export the model with opset_version=" + std::to_string(kMaxOpset)));
  }
  g.opset = static_cast<int>(opset);
  const auto& gp = model.graph();
  // What defined each name, so that a second definition is an error naming both.
  std::unordered_map<std::string, std::string> defined;
  // Initializers become constants.
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return fail(invalid("an initializer has no name"));
    if (!defined.emplace(init.name(), "an initializer").second) {
      return fail(invalid("initializer '" + init.name() + "' is defined twice"));
    }
    auto t = tensor_from_proto(init, model_dir, "initializer");
    if (!t) return fail(t.status());
    g.constants[g.add_value(init.name())] = std::move(*t);
  }
  for (const auto& in : gp.input()) {
    if (in.name().empty()) return fail(invalid("a graph input has no name"));
    auto it = defined.find(in.name());
    if (it != defined.end()) {
      if (it->second == "an initializer") continue;  // opset < 9 lists initializers among the inputs
      return fail(invalid("graph input '" + in.name() + "' is listed twice"));
    }
    defined.emplace(in.name(), "a graph input");
    const int v = g.add_value(in.name());
    QD_RETURN_IF_ERROR(fail(read_value_info(in, &g.values[v])));
    g.inputs.push_back(v);
  }
  // Local functions expanded first (a model without them keeps its nodes as they are).
  FunctionInliner inliner(model);
  std::vector<onnx::NodeProto> expanded;
  if (!inliner.empty()) {
    int i = 0;
    for (const auto& np : gp.node()) {
      const std::string name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
      ++i;
      QD_RETURN_IF_ERROR(fail(inliner.expand(np, name, 0, &expanded)));
    }
  }
  // Nodes: collect every unsupported one before failing, so the user sees the whole list.
  std::vector<std::string> unsupported_nodes;
  int index = 0;
  auto node_list = [&]() -> std::vector<const onnx::NodeProto*> {
    std::vector<const onnx::NodeProto*> list;
    if (inliner.empty()) {
      for (const auto& np : gp.node()) list.push_back(&np);
    } else {
      for (const auto& np : expanded) list.push_back(&np);
    }
    return list;
  }();
  for (const onnx::NodeProto* npp : node_list) {
    const onnx::NodeProto& np = *npp;
    const std::string name = np.name().empty() ? np.op_type() + "_" + std::to_string(index) : np.name();
    ++index;
    for (const auto& out : np.output()) {
      if (out.empty()) continue;
      auto [it, fresh] = defined.emplace(out, "node '" + name + "'");
      if (!fresh) {
        return fail(invalid("value '" + out + "' is defined twice: by " + it->second + " and by node '" + name + "' (" +
                            np.op_type() + "); every value must have exactly one producer"));
      }
    }
    const PluginOp* plugin = nullptr;
    if (!is_default_domain(np.domain())) {
      auto d = domain_opset.find(np.domain());
      const int64_t domain_version = d == domain_opset.end() ? 0 : d->second;
      plugin = find_plugin_op(np.domain(), np.op_type(), static_cast<int>(std::min<int64_t>(domain_version, INT32_MAX)));
      if (!plugin) {
        unsupported_nodes.push_back("'" + name + "' (" + np.domain() + "::" + np.op_type() + ", " +
                                    (d == domain_opset.end() ? std::string("no opset declared for this domain")
                                                             : "opset " + std::to_string(d->second)) + ")" +
                                    domain_hint(np.domain(), np.op_type()));
        continue;
      }
    }
    if (np.op_type() == "Constant") {
      if (np.output_size() != 1 || np.output(0).empty()) {
        return fail(invalid("must have one output").at_node(name, "Constant"));
      }
      auto t = constant_value(np, model_dir);
      if (!t) return fail(Status(t.status()).at_node(name, "Constant"));
      int v = g.find_value(np.output(0));  // may already be read by a node listed earlier
      if (v < 0) v = g.add_value(np.output(0));
      g.constants[v] = std::move(*t);
      continue;
    }
    auto op = plugin ? std::optional<OpType>(plugin->id) : op_from_name(np.op_type());
    if (!op) {
      unsupported_nodes.push_back("'" + name + "' (" + np.op_type() + ", opset " + std::to_string(g.opset) + ")");
      continue;
    }
    Node n;
    n.name = name;
    n.op = *op;
    n.opset = plugin ? plugin->def.version : g.opset;
    // A plugin node's errors name the op as domain::name@version and where it came from (built in or a library).
    const std::string op_label = plugin ? plugin->qualified + ", plugin " + plugin->source : np.op_type();
    for (const auto& a : np.attribute()) {
      if (n.attrs.has(a.name())) {
        return fail(invalid("attribute '" + a.name() + "' is given twice").at_node(name, op_label));
      }
      auto v = convert_attr(a, model_dir);
      if (!v) return fail(Status(v.status()).at_node(name, op_label));
      n.attrs.set(a.name(), std::move(*v));
    }
    if (plugin) {  // checked against the declared schema; the graph keeps every attribute, defaults filled in
      auto attrs = resolve_plugin_attrs(plugin->def, n.attrs);
      if (!attrs) return fail(Status(attrs.status()).at_node(name, op_label));
      n.attrs = to_attr_map(*attrs);
    }
    const bool variadic = op_schema(*op).max_inputs < 0;
    for (const auto& in : np.input()) {
      if (in.empty()) {
        // An empty name marks an omitted optional input; the members of a variadic list (Sum, Concat, ...) are never
        // optional.
        if (variadic) {
          return fail(invalid("input " + std::to_string(n.inputs.size()) + " is empty; the inputs of " + np.op_type() +
                              " cannot be omitted").at_node(name, np.op_type()));
        }
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
    constexpr size_t kMaxListed = 50;  // a model of thousands of custom nodes still gets a readable message
    for (size_t i = 0; i < unsupported_nodes.size() && i < kMaxListed; ++i) list += "\n  " + unsupported_nodes[i];
    if (unsupported_nodes.size() > kMaxListed) {
      list += "\n  ... and " + std::to_string(unsupported_nodes.size() - kMaxListed) + " more";
    }
    return fail(unsupported(std::to_string(unsupported_nodes.size()) + " node(s) use ops qdeploy does not support:" +
                            list + "\n(see docs/operators.md for the supported ops)"));
  }
  for (const auto& out : gp.output()) {
    const int v = g.find_value(out.name());
    if (v < 0 || !defined.count(out.name())) {
      return fail(invalid("graph output '" + out.name() + "' is not produced by any node, initializer or graph input"));
    }
    g.outputs.push_back(v);
  }
  if (g.outputs.empty()) return fail(invalid("the graph has no outputs"));
  // Values referenced but defined nowhere are reported by topo_sort (dangling edges), as are cycles.
  Status st = g.topo_sort();
  if (!st.is_ok()) return fail(st);
  // A Q/DQ model's FP16 casts (a strongly typed export) go: qdeploy computes its float layers as for any model.
  widen_fp16_casts(g);
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
