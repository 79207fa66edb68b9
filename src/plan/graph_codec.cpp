// Layout (all little-endian, see plan/byte_io.h):
//   graph:  str name, i32 opset, u32 n + values, u32 n + nodes, u32 n + input ids, u32 n + output ids,
//           u32 n + constants (i32 value id, tensor)
//   value:  str name, i32 dtype, u8 has_shape, shape, u32 n + dim names
//   node:   str name, str op (ONNX spelling; a plugin op as domain::name@version), i32 opset,
//           u32 n + attrs (str name, u8 kind, payload),
//           u32 n + input ids, u32 n + output ids   (ids are i32; -1 marks an omitted input or output)
//   tensor: i32 dtype (0: an empty attribute tensor, nothing follows), shape, u64 byte count, bytes
#include "plan/graph_codec.h"

#include <set>
#include <type_traits>

#include "ops/op.h"
#include "ops/plugin_registry.h"
#include "plan/byte_io.h"

namespace qd {

namespace {

// Attribute kinds on disk: fixed numbers, independent of the order of AttrValue's alternatives.
enum AttrKind : uint8_t { kInt = 1, kFloat = 2, kString = 3, kInts = 4, kFloats = 5, kStrings = 6, kTensor = 7 };

constexpr int32_t kMaxDType = static_cast<int32_t>(DType::kUInt64);

Status write_tensor(ByteWriter& w, const Tensor& t) {
  if (t.empty()) {
    w.i32(0);
    return Status::ok();
  }
  if (dtype_size(t.dtype()) == 0) {
    return unsupported(std::string("a plan cannot hold a tensor of type ") + dtype_name(t.dtype()));
  }
  if (t.rank() > kMaxPlanRank) return unsupported("a plan cannot hold a tensor of rank " + std::to_string(t.rank()));
  w.i32(static_cast<int32_t>(t.dtype()));
  w.shape(t.shape());
  w.u64(t.nbytes());
  w.raw(t.raw(), t.nbytes());
  return Status::ok();
}

Tensor read_tensor(ByteReader& r) {
  const int32_t dt = r.i32();
  if (!r.ok() || dt == 0) return {};
  const DType dtype = static_cast<DType>(dt);
  if (dt < 0 || dt > kMaxDType || dtype_size(dtype) == 0) {
    r.fail("tensor of unknown or unsupported dtype " + std::to_string(dt));
    return {};
  }
  const Shape shape = r.shape("tensor shape");
  const uint64_t nbytes = r.u64();
  if (!r.ok()) return {};
  auto numel = checked_numel(shape);
  if (!numel) {
    r.fail("tensor of shape " + shape_str(shape) + ": " + numel.status().message());
    return {};
  }
  // numel <= 2^40 and dtype_size <= 8: no overflow.
  if (nbytes != static_cast<uint64_t>(*numel) * dtype_size(dtype)) {
    r.fail("tensor of shape " + shape_str(shape) + " and type " + dtype_name(dtype) + " needs " +
           std::to_string(static_cast<uint64_t>(*numel) * dtype_size(dtype)) + " bytes, but " +
           std::to_string(nbytes) + " are stored");
    return {};
  }
  const uint8_t* p = r.raw(nbytes, "tensor data");  // before allocating: the input must hold the bytes
  if (!p) return {};
  auto t = Tensor::make(dtype, shape);
  if (!t) {
    r.fail(t.status().message());
    return {};
  }
  if (nbytes) std::memcpy(t->raw(), p, nbytes);
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (t->data<uint8_t>()[i] > 1) {
        r.fail("bool tensor holds a byte other than 0 or 1");
        return {};
      }
    }
  }
  return std::move(*t);
}

Status write_attr(ByteWriter& w, const std::string& name, const AttrValue& a) {
  w.str(name);
  Status st;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          w.u8(kInt);
          w.i64(x);
        } else if constexpr (std::is_same_v<T, float>) {
          w.u8(kFloat);
          w.f32(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          w.u8(kString);
          w.str(x);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          w.u8(kInts);
          w.u32(static_cast<uint32_t>(x.size()));
          for (int64_t v : x) w.i64(v);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          w.u8(kFloats);
          w.u32(static_cast<uint32_t>(x.size()));
          for (float v : x) w.f32(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          w.u8(kStrings);
          w.strs(x);
        } else {
          static_assert(std::is_same_v<T, Tensor>);
          w.u8(kTensor);
          st = write_tensor(w, x);
        }
      },
      a);
  return st;
}

AttrValue read_attr_value(ByteReader& r) {
  const uint8_t kind = r.u8();
  switch (kind) {
    case kInt: return r.i64();
    case kFloat: return r.f32();
    case kString: return r.str("string attribute");
    case kInts: {
      std::vector<int64_t> v(r.count("ints", 8));
      for (auto& x : v) x = r.i64();
      return v;
    }
    case kFloats: {
      std::vector<float> v(r.count("floats", 4));
      for (auto& x : v) x = r.f32();
      return v;
    }
    case kStrings: return r.strs("strings attribute");
    case kTensor: return read_tensor(r);
    default:
      r.fail("unknown attribute kind " + std::to_string(kind));
      return int64_t{0};
  }
}

void write_ids(ByteWriter& w, const std::vector<int>& ids) {
  w.u32(static_cast<uint32_t>(ids.size()));
  for (int id : ids) w.i32(id);
}

// Ids in [lo, n_values).
std::vector<int> read_ids(ByteReader& r, const char* what, int lo, int n_values) {
  std::vector<int> ids(r.count(what, 4));
  for (auto& id : ids) {
    id = r.i32();
    if (r.ok() && (id < lo || id >= n_values)) {
      r.fail(std::string(what) + ": value id " + std::to_string(id) + " is out of range (the graph has " +
             std::to_string(n_values) + " values)");
    }
  }
  return r.ok() ? ids : std::vector<int>{};
}

}  // namespace

Expected<std::string> encode_graph(const Graph& g) {
  ByteWriter w;
  w.str(g.name);
  w.i32(g.opset);
  w.u32(static_cast<uint32_t>(g.values.size()));
  for (const Value& v : g.values) {
    if (v.shape.size() > kMaxPlanRank) {
      return unsupported("value '" + v.name + "' has rank " + std::to_string(v.shape.size()) +
                         "; plans hold ranks up to " + std::to_string(kMaxPlanRank));
    }
    w.str(v.name);
    w.i32(static_cast<int32_t>(v.dtype));
    w.u8(v.has_shape ? 1 : 0);
    w.shape(v.shape);
    w.strs(v.dim_names);
  }
  w.u32(static_cast<uint32_t>(g.nodes.size()));
  for (const Node& n : g.nodes) {
    w.str(n.name);
    w.str(plan_op_name(n.op));  // a plugin op as domain::name@version
    w.i32(n.opset);
    w.u32(static_cast<uint32_t>(n.attrs.all().size()));
    for (const auto& [name, a] : n.attrs.all()) {
      Status st = write_attr(w, name, a);
      if (!st.is_ok()) return st.at_node(n.name, op_name(n.op));
    }
    write_ids(w, n.inputs);
    write_ids(w, n.outputs);
  }
  write_ids(w, g.inputs);
  write_ids(w, g.outputs);
  // Constants in id order: the same graph always encodes to the same bytes.
  std::map<int, const Tensor*> constants;
  for (const auto& [id, t] : g.constants) constants[id] = &t;
  w.u32(static_cast<uint32_t>(constants.size()));
  for (const auto& [id, t] : constants) {
    w.i32(id);
    Status st = write_tensor(w, *t);
    if (!st.is_ok()) return st.prefix("constant '" + g.values[id].name + "'");
  }
  return w.take();
}

Expected<Graph> decode_graph(const std::string& bytes) {
  ByteReader r(bytes, "plan section 'graph'");
  Graph g;
  g.name = r.str("graph name");
  g.opset = r.i32();

  const uint32_t nv = r.count("values", 17);
  if (nv > static_cast<uint32_t>(INT32_MAX)) r.fail("too many values");
  g.values.reserve(nv);
  std::set<std::string> names;
  for (uint32_t i = 0; i < nv && r.ok(); ++i) {
    std::string name = r.str("value name");
    const int32_t dt = r.i32();
    const uint8_t has_shape = r.u8();
    Shape shape = r.shape("value shape");
    std::vector<std::string> dim_names = r.strs("dim names");
    if (!r.ok()) break;
    if (dt < 0 || dt > kMaxDType) r.fail("value '" + name + "' has an unknown dtype " + std::to_string(dt));
    if (has_shape > 1) r.fail("value '" + name + "': bad has_shape flag");
    if (!name.empty() && !names.insert(name).second) r.fail("value name '" + name + "' is used twice");
    if (dim_names.size() > shape.size()) r.fail("value '" + name + "' has more dim names than dims");
    const int id = g.add_value(name);
    Value& v = g.values[id];
    v.dtype = static_cast<DType>(dt);
    v.has_shape = has_shape == 1;
    v.shape = std::move(shape);
    v.dim_names = std::move(dim_names);
  }
  if (!r.ok()) return r.status();
  const int n_values = static_cast<int>(nv);

  const uint32_t nn = r.count("nodes", 24);
  g.nodes.reserve(nn);
  for (uint32_t i = 0; i < nn && r.ok(); ++i) {
    Node n;
    n.name = r.str("node name");
    const std::string op = r.str("op name");
    n.opset = r.i32();
    if (!r.ok()) break;
    std::optional<OpType> type;
    if (op.find("::") != std::string::npos) {
      if (const PluginOp* p = find_plugin_op(op)) type = p->id;
      if (!type) {
        return unsupported("node '" + n.name + "' uses the plugin op " + op + ", which is not registered: load the " +
                           "plugin library that declares it with --plugin LIB.so");
      }
    } else {
      type = op_from_name(op);
    }
    if (!type) {
      return unsupported("node '" + n.name + "' uses op '" + op + "', which this qdeploy does not support (the plan " +
                         "was written by another version): rebuild the plan with `qdeploy build`");
    }
    n.op = *type;
    const uint32_t na = r.count("attributes", 5);
    for (uint32_t k = 0; k < na && r.ok(); ++k) {
      std::string name = r.str("attribute name");
      AttrValue v = read_attr_value(r);
      if (r.ok() && n.attrs.has(name)) r.fail("node '" + n.name + "': attribute '" + name + "' is given twice");
      n.attrs.set(name, std::move(v));
    }
    n.inputs = read_ids(r, "node inputs", -1, n_values);
    n.outputs = read_ids(r, "node outputs", -1, n_values);
    if (!r.ok()) break;
    if (op_schema(n.op).max_inputs < 0) {
      for (int in : n.inputs) {
        if (in < 0) return invalid("node '" + n.name + "' (" + op + "): the inputs of a variadic op cannot be omitted");
      }
    }
    g.nodes.push_back(std::move(n));
  }
  g.inputs = read_ids(r, "graph inputs", 0, n_values);
  g.outputs = read_ids(r, "graph outputs", 0, n_values);
  const uint32_t nc = r.count("constants", 8);
  for (uint32_t i = 0; i < nc && r.ok(); ++i) {
    const int32_t id = r.i32();
    if (r.ok() && (id < 0 || id >= n_values)) r.fail("constant id " + std::to_string(id) + " is out of range");
    Tensor t = read_tensor(r);
    if (!r.ok()) break;
    if (!g.constants.emplace(id, std::move(t)).second) r.fail("constant id " + std::to_string(id) + " repeats");
  }
  r.expect_end();
  if (!r.ok()) return r.status();

  std::set<int> inputs;
  for (int v : g.inputs) {
    if (!inputs.insert(v).second) return invalid("graph input '" + g.values[v].name + "' is listed twice");
    if (g.is_constant(v)) return invalid("graph input '" + g.values[v].name + "' is also a constant");
  }
  if (g.outputs.empty()) return invalid("the graph has no outputs");
  g.relink();
  Status st = g.verify();
  if (!st.is_ok()) {  // verify() calls bad ids internal errors; in a file they are bad input
    return Status(StatusCode::kInvalidArgument, "plan section 'graph': " + st.message()).at_node(st.node(), st.op());
  }
  return g;
}

}  // namespace qd
