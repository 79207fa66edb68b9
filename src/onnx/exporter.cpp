#include "onnx/exporter.h"

#include <algorithm>
#include <climits>

#include "core/file_io.h"
#include "onnx.pb.h"

namespace qd {

namespace {

// The IR version that introduced each opset (onnx/helper.py's table), so older readers accept the file.
int64_t ir_version_for(int opset) {
  if (opset <= 8) return 3;
  if (opset == 9) return 4;
  if (opset == 10) return 5;
  if (opset == 11) return 6;
  if (opset <= 14) return 7;
  return 8;
}

// DType codes are ONNX's TensorProto codes (core/dtype.h), so they are written as they are.
void to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));  // little-endian, as ONNX stores it
}

void to_proto(const std::string& name, const AttrValue& v, onnx::AttributeProto* a) {
  a->set_name(name);
  if (auto* i = std::get_if<int64_t>(&v)) {
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*i);
  } else if (auto* f = std::get_if<float>(&v)) {
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(*f);
  } else if (auto* s = std::get_if<std::string>(&v)) {
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(*s);
  } else if (auto* is = std::get_if<std::vector<int64_t>>(&v)) {
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : *is) a->add_ints(x);
  } else if (auto* fs = std::get_if<std::vector<float>>(&v)) {
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float x : *fs) a->add_floats(x);
  } else if (auto* ss = std::get_if<std::vector<std::string>>(&v)) {
    a->set_type(onnx::AttributeProto::STRINGS);
    for (const auto& x : *ss) a->add_strings(x);
  } else {
    a->set_type(onnx::AttributeProto::TENSOR);
    to_proto(std::get<Tensor>(v), "", a->mutable_t());
  }
}

// Type and shape of a graph input or output, as far as the graph knows them.
void to_proto(const Value& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name);
  auto* tt = p->mutable_type()->mutable_tensor_type();
  // An output whose type was never inferred is written as float32, the type of every CNN output qdeploy handles.
  tt->set_elem_type(static_cast<int32_t>(v.dtype == DType::kUndefined ? DType::kFloat32 : v.dtype));
  if (!v.has_shape) return;
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < v.shape.size(); ++i) {
    auto* d = shape->add_dim();
    const std::string& sym = i < v.dim_names.size() ? v.dim_names[i] : std::string();
    if (v.shape[i] >= 0) d->set_dim_value(v.shape[i]);
    else if (!sym.empty()) d->set_dim_param(sym);
  }
}

}  // namespace

Expected<std::string> export_onnx_bytes(const Graph& g) {
  onnx::ModelProto m;
  const int opset = g.opset ? g.opset : 13;
  m.set_ir_version(ir_version_for(opset));
  m.set_producer_name("qdeploy");
  m.set_producer_version(QD_VERSION);
  m.add_opset_import()->set_version(opset);
  auto* gp = m.mutable_graph();
  gp->set_name(g.name.empty() ? "qdeploy" : g.name);
  // Initializers in value order, so the same graph always gives the same bytes.
  std::vector<int> consts;
  for (const auto& [v, t] : g.constants) consts.push_back(v);
  std::sort(consts.begin(), consts.end());
  for (int v : consts) to_proto(g.constants.at(v), g.values[v].name, gp->add_initializer());
  for (int v : g.inputs) to_proto(g.values[v], gp->add_input());
  for (int v : g.outputs) to_proto(g.values[v], gp->add_output());
  for (const Node& n : g.nodes) {
    auto* np = gp->add_node();
    np->set_name(n.name);
    np->set_op_type(op_name(n.op));
    for (int in : n.inputs) np->add_input(in >= 0 ? g.values[in].name : std::string());
    for (int out : n.outputs) np->add_output(out >= 0 ? g.values[out].name : std::string());
    for (const auto& [name, v] : n.attrs.all()) to_proto(name, v, np->add_attribute());
  }
  if (m.ByteSizeLong() > static_cast<size_t>(INT_MAX)) {
    return unsupported("the model is larger than 2 GiB; qdeploy does not write external data yet");
  }
  return m.SerializeAsString();
}

Status export_onnx_file(const Graph& g, const std::string& path) {
  const std::string bytes = QD_TRY(export_onnx_bytes(g));
  return write_file_atomic(path, bytes);
}

}  // namespace qd
