// Small helpers for building ONNX models in tests with the generated protobuf classes (header-only, so that the
// unit tests, the CLI tests and the fuzz tools can share it).
#pragma once

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "onnx.pb.h"

namespace qd::test::onnxb {

inline onnx::TensorProto tensor_f32(const std::string& name, const std::vector<int64_t>& dims,
                                    const std::vector<float>& values, bool raw = true) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  if (raw) {
    t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  } else {
    for (float v : values) t.add_float_data(v);
  }
  return t;
}

inline onnx::TensorProto tensor_i64(const std::string& name, const std::vector<int64_t>& dims,
                                    const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

// `n` float values 0.01 * (i % 17) - 0.08: small, deterministic, not all equal.
inline std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
  return v;
}

// A graph input; dims < 0 become the symbolic dim "N".
inline onnx::ValueInfoProto* add_input(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                                       int elem_type = onnx::TensorProto::FLOAT) {
  auto* vi = g->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d >= 0) dim->set_dim_value(d);
    else dim->set_dim_param("N");
  }
  return vi;
}

inline onnx::ValueInfoProto* add_output(onnx::GraphProto* g, const std::string& name,
                                        int elem_type = onnx::TensorProto::FLOAT) {
  auto* vi = g->add_output();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
  return vi;
}

inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + std::to_string(g->node_size() - 1) : name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

inline onnx::AttributeProto* attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
  return a;
}

inline onnx::AttributeProto* attr_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return a;
}

inline onnx::AttributeProto* attr_float(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
  return a;
}

inline onnx::AttributeProto* attr_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
  return a;
}

inline onnx::ModelProto empty_model(int64_t opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("qdeploy-tests");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("test");
  return m;
}

// x[1,3,8,8] -> Conv(w[4,3,3,3], b[4], pads 1) "conv" -> Relu "relu" -> y[1,4,8,8].
inline onnx::ModelProto conv_relu_model(int64_t opset = 13) {
  onnx::ModelProto m = empty_model(opset);
  auto* g = m.mutable_graph();
  add_input(g, "x", {1, 3, 8, 8});
  *g->add_initializer() = tensor_f32("w", {4, 3, 3, 3}, ramp(4 * 3 * 3 * 3));
  *g->add_initializer() = tensor_f32("b", {4}, {0.1f, -0.1f, 0.2f, 0.f}, /*raw=*/false);
  auto* conv = add_node(g, "Conv", {"x", "w", "b"}, {"c"}, "conv");
  attr_ints(conv, "kernel_shape", {3, 3});
  attr_ints(conv, "pads", {1, 1, 1, 1});
  attr_ints(conv, "strides", {1, 1});
  add_node(g, "Relu", {"c"}, {"y"}, "relu");
  add_output(g, "y");
  return m;
}

// x[1,3,8,8] -> Conv "conv" -> c; Add(c, skip[1,4,8,8]) "add" -> y: a residual-style join with two graph inputs.
inline onnx::ModelProto conv_add_model(int64_t opset = 13) {
  onnx::ModelProto m = empty_model(opset);
  auto* g = m.mutable_graph();
  add_input(g, "x", {1, 3, 8, 8});
  add_input(g, "skip", {1, 4, 8, 8});
  *g->add_initializer() = tensor_f32("w", {4, 3, 3, 3}, ramp(4 * 3 * 3 * 3));
  auto* conv = add_node(g, "Conv", {"x", "w"}, {"c"}, "conv");
  attr_ints(conv, "pads", {1, 1, 1, 1});
  add_node(g, "Add", {"c", "skip"}, {"y"}, "add");
  add_output(g, "y");
  return m;
}

inline std::string serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

inline std::string write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

inline std::string write_model(const std::string& dir, const onnx::ModelProto& m,
                               const std::string& file = "model.onnx") {
  return write_bytes(dir + "/" + file, serialize(m));
}

}  // namespace qd::test::onnxb
