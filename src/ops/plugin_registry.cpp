// The plugin tail of the op table, the schema check of plugin attributes, and the adapters that run a plugin's shape
// inference and reference through the InferCtx / KernelCtx interface of every op.
#include "ops/plugin_registry.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "core/half.h"

namespace qd {

namespace {

struct Registry {
  std::mutex mu;  // writers only
  std::atomic<PluginOp*> ops[kMaxPluginOps] = {};
  std::atomic<int> count{0};
  std::vector<PluginOp*> replaced;  // kept alive (and reachable): a reader may still hold one
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: ids and function pointers outlive every graph
  return *r;
}

std::string type_name(qdeploy::AttrType t) {
  switch (t) {
    case qdeploy::AttrType::kInt: return "INT";
    case qdeploy::AttrType::kFloat: return "FLOAT";
    case qdeploy::AttrType::kString: return "STRING";
    case qdeploy::AttrType::kInts: return "INTS";
    case qdeploy::AttrType::kFloats: return "FLOATS";
  }
  return "?";
}

std::string value_type_name(const AttrValue& v) {
  static const char* const kNames[] = {"INT", "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS", "TENSOR"};
  return kNames[v.index()];
}

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

bool valid_ident(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  }
  return true;
}

Status check_range(const qdeploy::AttrSpec& s, double v, const std::string& what) {
  if (std::isnan(v) || v < s.min || v > s.max) {
    return invalid(what + " = " + num(v) + " is outside the allowed range [" + num(s.min) + ", " + num(s.max) + "]");
  }
  return Status::ok();
}

Status check_size(const qdeploy::AttrSpec& s, size_t n) {
  if (static_cast<int64_t>(n) < s.min_size || (s.max_size >= 0 && static_cast<int64_t>(n) > s.max_size)) {
    return invalid("attribute '" + s.name + "' has " + std::to_string(n) + " elements; allowed: " +
                   std::to_string(s.min_size) + " to " + (s.max_size < 0 ? "any" : std::to_string(s.max_size)));
  }
  return Status::ok();
}

// The value of spec s from an IR attribute, converted and checked.
Expected<qdeploy::AttrVal> convert(const qdeploy::AttrSpec& s, const AttrValue& v) {
  const std::string what = "attribute '" + s.name + "'";
  auto wrong = [&] {
    return invalid(what + " is " + value_type_name(v) + "; the op declares it " + type_name(s.type));
  };
  switch (s.type) {
    case qdeploy::AttrType::kInt: {
      if (!std::holds_alternative<int64_t>(v)) return wrong();
      const int64_t x = std::get<int64_t>(v);
      QD_RETURN_IF_ERROR(check_range(s, static_cast<double>(x), what));
      return qdeploy::AttrVal(x);
    }
    case qdeploy::AttrType::kFloat: {
      float x;
      if (std::holds_alternative<float>(v)) {
        x = std::get<float>(v);
      } else if (std::holds_alternative<int64_t>(v)) {
        x = static_cast<float>(std::get<int64_t>(v));
      } else {
        return wrong();
      }
      QD_RETURN_IF_ERROR(check_range(s, x, what));
      return qdeploy::AttrVal(x);
    }
    case qdeploy::AttrType::kString:
      if (!std::holds_alternative<std::string>(v)) return wrong();
      return qdeploy::AttrVal(std::get<std::string>(v));
    case qdeploy::AttrType::kInts: {
      if (!std::holds_alternative<std::vector<int64_t>>(v)) return wrong();
      const auto& x = std::get<std::vector<int64_t>>(v);
      QD_RETURN_IF_ERROR(check_size(s, x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        QD_RETURN_IF_ERROR(check_range(s, static_cast<double>(x[i]), what + "[" + std::to_string(i) + "]"));
      }
      return qdeploy::AttrVal(x);
    }
    case qdeploy::AttrType::kFloats: {
      std::vector<float> x;
      if (std::holds_alternative<std::vector<float>>(v)) {
        x = std::get<std::vector<float>>(v);
      } else if (std::holds_alternative<std::vector<int64_t>>(v)) {
        for (int64_t i : std::get<std::vector<int64_t>>(v)) x.push_back(static_cast<float>(i));
      } else {
        return wrong();
      }
      QD_RETURN_IF_ERROR(check_size(s, x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        QD_RETURN_IF_ERROR(check_range(s, x[i], what + "[" + std::to_string(i) + "]"));
      }
      return qdeploy::AttrVal(std::move(x));
    }
  }
  return wrong();
}

AttrValue default_value(const qdeploy::AttrSpec& s) {
  switch (s.type) {
    case qdeploy::AttrType::kInt: return s.default_int;
    case qdeploy::AttrType::kFloat: return s.default_float;
    case qdeploy::AttrType::kString: return s.default_string;
    case qdeploy::AttrType::kInts: return s.default_ints;
    case qdeploy::AttrType::kFloats: return s.default_floats;
  }
  return int64_t{0};
}

const PluginOp& op_of(OpType op) {
  const PluginOp* p = plugin_op(op);
  if (!p) {
    static const PluginOp kNone{};
    return kNone;
  }
  return *p;
}

// Every Dims of the present inputs (plugins take no omitted inputs but trailing optional ones, which are dropped).
Expected<size_t> given_inputs(const qdeploy::OpDef& def, const Node& n) {
  size_t count = n.inputs.size();
  while (count > 0 && n.inputs[count - 1] < 0) --count;
  for (size_t i = 0; i < count; ++i) {
    if (n.inputs[i] < 0) return invalid("input " + std::to_string(i) + " (" + def.inputs[i].name + ") is omitted");
  }
  for (size_t i = count; i < def.inputs.size(); ++i) {
    if (!def.inputs[i].optional) return invalid("required input " + std::to_string(i) + " (" + def.inputs[i].name + ") is missing");
  }
  return count;
}

Status infer_plugin(InferCtx& c) {
  const PluginOp& p = op_of(c.node.op);
  if (!p.def.infer_shapes) return internal("no plugin op is registered under this id");
  const qdeploy::OpDef& def = p.def;
  const qdeploy::Attrs attrs = QD_TRY(resolve_plugin_attrs(def, c.node.attrs));
  const size_t nin = QD_TRY(given_inputs(def, c.node));
  std::vector<qdeploy::Dims> in(nin);
  for (size_t i = 0; i < nin; ++i) {
    const auto& allowed = def.inputs[i].dtypes;
    if (std::find(allowed.begin(), allowed.end(), to_plugin_dtype(c.dtype(i))) == allowed.end()) {
      std::string list;
      for (auto t : allowed) list += std::string(list.empty() ? "" : ", ") + dtype_name(from_plugin_dtype(t));
      return invalid("input " + std::to_string(i) + " (" + def.inputs[i].name + ") is " + dtype_name(c.dtype(i)) +
                     "; " + def.name + " takes " + list);
    }
    in[i] = c.shape(i);
  }
  std::vector<qdeploy::Dims> out;
  QD_RETURN_IF_ERROR(from_plugin_status(def.infer_shapes(attrs, in, &out)));
  if (out.size() != def.outputs.size()) {
    return internal("the plugin's shape inference gave " + std::to_string(out.size()) + " output shapes for " +
                    std::to_string(def.outputs.size()) + " outputs");
  }
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    for (int64_t d : out[i]) {
      if (d < 0) return internal("the plugin's shape inference gave a negative dim for output " + std::to_string(i));
    }
    const int from = i < def.output_dtype_from.size() ? def.output_dtype_from[i] : -1;
    const DType t = from >= 0 && static_cast<size_t>(from) < nin ? c.dtype(from)
                                                                  : from_plugin_dtype(def.outputs[i].dtypes[0]);
    c.set_output(i, t, out[i]);
  }
  return Status::ok();
}

// A dense fp32 copy of a float16 tensor (the reference sees floats as fp32).
Tensor to_f32(const Tensor& t) {
  Tensor f = *Tensor::make(DType::kFloat32, t.shape());
  const auto* src = static_cast<const uint16_t*>(t.raw());
  auto* dst = static_cast<float*>(f.raw());
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = half_to_float(src[i]);
  return f;
}

Status run_plugin(KernelCtx& k) {
  const PluginOp& p = op_of(k.node.op);
  if (!p.def.reference) return internal("no plugin op is registered under this id");
  const qdeploy::Attrs attrs = QD_TRY(resolve_plugin_attrs(p.def, k.node.attrs));
  std::vector<Tensor> temps;
  temps.reserve(k.in.size() + k.out.size());
  std::vector<qdeploy::TensorView> in, out;
  size_t nin = k.in.size();
  while (nin > 0 && !k.in[nin - 1]) --nin;
  for (size_t i = 0; i < nin; ++i) {
    const Tensor* t = k.in[i];
    if (!t) return invalid("input " + std::to_string(i) + " is omitted");
    if (t->dtype() == DType::kFloat16) {
      temps.push_back(to_f32(*t));
      t = &temps.back();
    }
    in.push_back({to_plugin_dtype(t->dtype()), t->shape(), const_cast<void*>(t->raw()), 0});
  }
  std::vector<std::pair<Tensor*, Tensor*>> back;  // fp32 temporary -> fp16 output
  for (Tensor* t : k.out) {
    if (!t) {
      out.push_back({});
      continue;
    }
    Tensor* w = t;
    if (t->dtype() == DType::kFloat16) {
      temps.push_back(*Tensor::make(DType::kFloat32, t->shape()));
      w = &temps.back();
      back.emplace_back(w, t);
    }
    out.push_back({to_plugin_dtype(w->dtype()), w->shape(), w->raw(), 0});
  }
  QD_RETURN_IF_ERROR(from_plugin_status(p.def.reference(attrs, in, out)));
  for (auto [f, h] : back) {
    const auto* src = static_cast<const float*>(f->raw());
    auto* dst = static_cast<uint16_t*>(h->raw());
    for (int64_t i = 0; i < h->numel(); ++i) dst[i] = float_to_half(src[i]);
  }
  return Status::ok();
}

// The OpSchema through which the rest of qdeploy sees the op.
void fill_schema(PluginOp& e) {
  const qdeploy::OpDef& d = e.def;
  e.schema.name = d.name.c_str();
  e.schema.min_inputs = 0;
  for (const auto& in : d.inputs) e.schema.min_inputs += in.optional ? 0 : 1;
  e.schema.max_inputs = static_cast<int>(d.inputs.size());
  e.schema.min_outputs = e.schema.max_outputs = static_cast<int>(d.outputs.size());
  e.schema.infer = &infer_plugin;
  e.schema.run = &run_plugin;
  e.schema.traits = {OpKind::kCompute, Int8Rule::kFloat, BatchRule::kNone, MacsRule::kNone, CudaFamily::kReferenceOnly};
}

}  // namespace

std::string plugin_qualified_name(const std::string& domain, const std::string& name, int version) {
  return domain + "::" + name + "@" + std::to_string(version);
}

Status check_op_def(const qdeploy::OpDef& def) {
  const std::string who = "plugin op " + plugin_qualified_name(def.domain, def.name, def.version);
  auto bad = [&](const std::string& m) { return invalid(who + ": " + m); };
  if (def.api_version != qdeploy::kPluginApiVersion) {
    return bad("built against plugin API version " + std::to_string(def.api_version) + ", but this qdeploy has " +
               std::to_string(qdeploy::kPluginApiVersion) + "; rebuild the plugin against this qdeploy's headers");
  }
  if (!valid_ident(def.domain) || def.domain == "ai.onnx") {
    return bad("the domain must be a non-empty name of letters, digits, '_', '.' and '-' other than ai.onnx");
  }
  if (!valid_ident(def.name)) return bad("the name must be letters, digits, '_', '.' and '-'");
  if (def.version < 1) return bad("the version must be 1 or more");
  if (def.outputs.empty()) return bad("declares no outputs");
  bool optional_seen = false;
  for (size_t i = 0; i < def.inputs.size(); ++i) {
    if (def.inputs[i].dtypes.empty()) return bad("input " + std::to_string(i) + " allows no dtype");
    if (optional_seen && !def.inputs[i].optional) return bad("a required input follows an optional one");
    optional_seen |= def.inputs[i].optional;
  }
  for (size_t i = 0; i < def.outputs.size(); ++i) {
    if (def.outputs[i].dtypes.empty()) return bad("output " + std::to_string(i) + " allows no dtype");
    if (def.outputs[i].optional) return bad("outputs cannot be optional");
  }
  if (!def.output_dtype_from.empty() && def.output_dtype_from.size() != def.outputs.size()) {
    return bad("output_dtype_from has " + std::to_string(def.output_dtype_from.size()) + " entries for " +
               std::to_string(def.outputs.size()) + " outputs");
  }
  for (int from : def.output_dtype_from) {
    if (from < -1 || from >= static_cast<int>(def.inputs.size())) return bad("output_dtype_from names no input");
  }
  std::set<std::string> names;
  for (const auto& s : def.attrs) {
    if (!valid_ident(s.name) || !names.insert(s.name).second) {
      return bad("attribute name '" + s.name + "' is empty, malformed or declared twice");
    }
    if (s.min > s.max) return bad("attribute '" + s.name + "' has an empty range");
    if (!s.required) {
      auto v = convert(s, default_value(s));
      if (!v) return bad("the default of " + v.status().message());
    }
  }
  if (!def.infer_shapes) return bad("has no shape inference (infer_shapes)");
  if (!def.reference) return bad("has no reference kernel (reference): every op needs one, it is the oracle");
  if (def.tests.empty()) return bad("declares no test cases (tests): the generic harness runs them");
  for (const auto& t : def.tests) {
    AttrMap m;
    for (const auto& [name, v] : t.attrs) m.set(name, std::visit([](const auto& x) { return AttrValue(x); }, v));
    auto r = resolve_plugin_attrs(def, m);
    if (!r) return bad("test case '" + t.name + "': " + r.status().message());
    if (t.inputs.size() > def.inputs.size()) return bad("test case '" + t.name + "' has too many inputs");
  }
  std::set<std::string> kernels;
  for (const auto& k : def.cuda_kernels) {
    if (k.name.empty() || !kernels.insert(k.name).second) return bad("a CUDA kernel name is empty or repeats");
    if (!k.supports || !k.tactics || !k.launch) {
      return bad("CUDA kernel '" + k.name + "' lacks supports(), tactics() or launch()");
    }
  }
  return Status::ok();
}

Expected<OpType> register_plugin_op(qdeploy::OpDef def, const std::string& source) {
  QD_RETURN_IF_ERROR(check_op_def(def));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto entry = std::make_unique<PluginOp>();
  entry->qualified = plugin_qualified_name(def.domain, def.name, def.version);
  entry->source = source;
  entry->def = std::move(def);
  const int n = r.count.load();
  for (int i = 0; i < n; ++i) {
    PluginOp* old = r.ops[i].load();
    if (old->qualified != entry->qualified) continue;
    if (old->source != "built in" || source == "built in") {
      return invalid("plugin op " + entry->qualified + " is registered twice (by " + old->source + " and by " +
                     source + "); load one of them");
    }
    // A library replaces the built-in op in place: same id, so graphs already holding it stay valid.
    entry->id = old->id;
    fill_schema(*entry);
    r.replaced.push_back(old);
    r.ops[i].store(entry.release());
    return r.ops[i].load()->id;
  }
  if (n >= kMaxPluginOps) return unsupported("more than " + std::to_string(kMaxPluginOps) + " plugin ops");
  entry->id = static_cast<OpType>(static_cast<int>(OpType::kCount) + 1 + n);
  fill_schema(*entry);
  r.ops[n].store(entry.release());
  r.count.store(n + 1);
  return r.ops[n].load()->id;
}

bool is_plugin_op(OpType op) { return static_cast<int>(op) > static_cast<int>(OpType::kCount); }

const PluginOp* plugin_op(OpType op) {
  const int i = static_cast<int>(op) - static_cast<int>(OpType::kCount) - 1;
  Registry& r = registry();
  if (i < 0 || i >= r.count.load()) return nullptr;
  return r.ops[i].load();
}

const PluginOp* find_plugin_op(const std::string& domain, const std::string& name, int max_version) {
  const PluginOp* best = nullptr;
  for (const PluginOp* p : plugin_ops()) {
    if (p->def.domain != domain || p->def.name != name) continue;
    if (max_version > 0 && p->def.version > max_version) continue;
    if (!best || p->def.version > best->def.version) best = p;
  }
  return best;
}

const PluginOp* find_plugin_op(const std::string& qualified) {
  for (const PluginOp* p : plugin_ops()) {
    if (p->qualified == qualified) return p;
  }
  return nullptr;
}

bool plugin_domain_known(const std::string& domain) {
  for (const PluginOp* p : plugin_ops()) {
    if (p->def.domain == domain) return true;
  }
  return false;
}

std::vector<const PluginOp*> plugin_ops() {
  Registry& r = registry();
  const int n = r.count.load();
  std::vector<const PluginOp*> v;
  for (int i = 0; i < n; ++i) v.push_back(r.ops[i].load());
  return v;
}

std::string plan_op_name(OpType op) {
  if (const PluginOp* p = plugin_op(op)) return p->qualified;
  return op_name(op);
}

Expected<qdeploy::Attrs> resolve_plugin_attrs(const qdeploy::OpDef& def, const AttrMap& attrs) {
  qdeploy::Attrs out;
  for (const auto& entry : attrs.all()) {
    const std::string& name = entry.first;  // a named reference: clang 14 cannot capture a structured binding
    auto it = std::find_if(def.attrs.begin(), def.attrs.end(), [&](const auto& s) { return s.name == name; });
    if (it == def.attrs.end()) {
      std::string list;
      for (const auto& s : def.attrs) list += std::string(list.empty() ? "" : ", ") + s.name;
      return invalid("attribute '" + name + "' is not declared by " +
                     plugin_qualified_name(def.domain, def.name, def.version) + " (it declares: " +
                     (list.empty() ? "none" : list) + ")");
    }
  }
  for (const auto& s : def.attrs) {
    qdeploy::AttrVal v;
    if (attrs.has(s.name)) {
      v = QD_TRY(convert(s, attrs.all().at(s.name)));
    } else if (s.required) {
      return invalid("required attribute '" + s.name + "' (" + type_name(s.type) + ") is missing");
    } else {
      v = QD_TRY(convert(s, default_value(s)));
    }
    out.set(s.name, std::move(v));
  }
  return out;
}

AttrMap to_attr_map(const qdeploy::Attrs& attrs) {
  AttrMap m;
  for (const auto& [name, v] : attrs.all()) m.set(name, std::visit([](const auto& x) { return AttrValue(x); }, v));
  return m;
}

Status from_plugin_status(const qdeploy::Status& s) {
  if (s.is_ok()) return Status::ok();
  return Status(static_cast<StatusCode>(static_cast<int>(s.code())), s.message());
}

qdeploy::Status to_plugin_status(const Status& s) {
  if (s.is_ok()) return qdeploy::Status::ok();
  return qdeploy::Status(static_cast<qdeploy::StatusCode>(static_cast<int>(s.code())), s.to_string());
}

DType from_plugin_dtype(qdeploy::DataType t) { return static_cast<DType>(static_cast<int32_t>(t)); }
qdeploy::DataType to_plugin_dtype(DType t) { return static_cast<qdeploy::DataType>(static_cast<int32_t>(t)); }

}  // namespace qd
