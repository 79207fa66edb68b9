// Helpers for the NN / reduction / normalization / quantization op tests: run one op directly (inference + reference
// kernel, as the reference backend does), and run an ONNX node-test folder with adjustments the conformance runner
// cannot make (runtime inputs turned into constants, pre-opset-7 models read as opset 7).
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "ir/attr.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "ops/interpret.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "test_util.h"

namespace qd::test {

// Runs `op` on `inputs` (an empty Tensor marks an omitted optional input) and returns `num_outputs` outputs.
// Errors from inference or the kernel come back as the Status. When an output would hold more than `max_elements`,
// only inference runs and the outputs come back empty (for robustness tests over random shapes).
inline Expected<std::vector<Tensor>> run_op(OpType op, const AttrMap& attrs, const std::vector<Tensor>& inputs,
                                            int num_outputs = 1, int opset = 17,
                                            int64_t max_elements = int64_t{1} << 40) {
  Node n;
  n.name = "node";
  n.op = op;
  n.opset = opset;
  n.attrs = attrs;
  std::vector<DType> types;
  std::vector<Shape> shapes;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool present = !inputs[i].empty();
    n.inputs.push_back(present ? static_cast<int>(i) : -1);
    types.push_back(present ? inputs[i].dtype() : DType::kUndefined);
    shapes.push_back(present ? inputs[i].shape() : Shape{});
    ptrs.push_back(present ? &inputs[i] : nullptr);
  }
  for (int o = 0; o < num_outputs; ++o) n.outputs.push_back(1000 + o);
  InferCtx ctx(n, types, shapes, ptrs);
  QD_RETURN_IF_ERROR(infer_node(ctx));
  for (int o = 0; o < num_outputs; ++o) {
    if (QD_TRY(checked_numel(ctx.out_shape(o))) > max_elements) return std::vector<Tensor>(num_outputs);
  }
  return run_node(ctx, ptrs);
}

inline Tensor tensor_f32(const Shape& s, const std::vector<float>& v) { return Tensor::from_f32(s, v); }

template <typename T>
Tensor tensor_of(DType dt, const Shape& s, const std::vector<T>& v) {
  Tensor t(dt, s);
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), static_cast<double>(v[i]));
  return t;
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_f64(i);
  return v;
}

inline const char* kNodeTestDir = "/usr/share/libonnx-testdata/data";

// Runs an ONNX backend test folder (model.onnx + test_data_set_*). Inputs listed in `as_constants` become constants
// (initializers) instead of runtime inputs; a model whose default opset is below 7 is read as opset 7 (only for ops
// whose semantics did not change). Returns "" when every output matches within the conformance tolerance, "skip: ..."
// when the data is not installed, else what differs.
inline std::string run_node_test(const std::string& dir, const std::vector<int>& as_constants = {}) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) return "skip: " + dir + " not installed (Debian package libonnx-testdata)";
  auto bytes = read_file(dir + "/model.onnx");
  if (!bytes) return bytes.status().to_string();
  onnx::ModelProto m;
  if (!m.ParseFromString(*bytes)) return "cannot parse model";
  for (auto& op : *m.mutable_opset_import()) {
    if ((op.domain().empty() || op.domain() == "ai.onnx") && op.version() < kMinOpset) op.set_version(kMinOpset);
  }
  std::string patched;
  m.SerializeToString(&patched);
  auto g0 = import_onnx_bytes(patched, "", dir);
  if (!g0) return g0.status().to_string();
  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path().string());
  }
  if (sets.empty()) return "no test data sets";
  auto load = [](const std::string& path) -> Expected<Tensor> {
    auto b = read_file(path);
    if (!b) return b.status();
    onnx::TensorProto p;
    if (!p.ParseFromString(*b)) return invalid(path + ": not a TensorProto");
    return tensor_from_proto(p, "");
  };
  for (const auto& set : sets) {
    Graph g = *g0;
    std::map<std::string, Tensor> feeds;
    std::map<std::string, Shape> shapes;
    std::vector<int> runtime_inputs;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      auto t = load(set + "/input_" + std::to_string(i) + ".pb");
      if (!t) return t.status().to_string();
      const int v = g.inputs[i];
      if (std::find(as_constants.begin(), as_constants.end(), static_cast<int>(i)) != as_constants.end()) {
        g.constants[v] = *t;
        continue;
      }
      runtime_inputs.push_back(v);
      feeds[g.values[v].name] = *t;
      shapes[g.values[v].name] = t->shape();
    }
    g.inputs = runtime_inputs;
    PrepareOptions opt;
    opt.input_shapes = shapes;
    Status st = prepare_graph(g, opt);
    if (!st.is_ok()) return "prepare: " + st.to_string();
    auto outs = run_reference(g, feeds);
    if (!outs) return "run: " + outs.status().to_string();
    for (size_t i = 0; i < outs->size(); ++i) {
      auto want = load(set + "/output_" + std::to_string(i) + ".pb");
      if (!want) return want.status().to_string();
      const Tensor& got = (*outs)[i];
      if (got.dtype() != want->dtype() || got.shape() != want->shape()) {
        return "output " + std::to_string(i) + ": got " + dtype_name(got.dtype()) + " " + shape_str(got.shape()) +
               ", expected " + dtype_name(want->dtype()) + " " + shape_str(want->shape());
      }
      for (int64_t k = 0; k < got.numel(); ++k) {
        const double a = got.get_f64(k), b = want->get_f64(k);
        const bool ok = std::isnan(b) ? std::isnan(a) : std::fabs(a - b) <= 1e-5 + 1e-3 * std::fabs(b);
        if (!ok) {
          return "output " + std::to_string(i) + " element " + std::to_string(k) + ": " + std::to_string(a) +
                 " vs expected " + std::to_string(b);
        }
      }
    }
  }
  return "";
}

}  // namespace qd::test

// Runs a node test and fails (or skips when the test data is not installed).
#define QD_EXPECT_NODE_TEST(subdir, ...)                                                      \
  do {                                                                                        \
    const std::string qd_r = ::qd::test::run_node_test(                                       \
        std::string(::qd::test::kNodeTestDir) + "/" + (subdir), ##__VA_ARGS__);              \
    if (qd_r.rfind("skip:", 0) == 0) GTEST_SKIP() << qd_r;                                    \
    EXPECT_EQ(qd_r, "") << (subdir);                                                          \
  } while (0)
