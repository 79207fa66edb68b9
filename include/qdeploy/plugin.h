// Custom ops ("plugins"): an op qdeploy does not ship, declared once as an OpDef. From the declaration follow the
// ONNX import of (domain, op_type) nodes with their attributes checked against the schema, shape inference, the CPU
// reference (the oracle: `--device cpu`, calibration, sensitivity and `compare` work unchanged), plans that store the
// node by domain/name/version with typed attributes, the generic test harness, and, where the op declares CUDA
// kernels, a GPU layer whose launch configurations the builder times. docs/plugins.md walks through writing one.
//
// Registration is explicit, never a static initializer: a program calls qdeploy::register_op(def), or a shared
// library exports the one C entry point QD_PLUGIN_ENTRY and is loaded with qdeploy::load_plugin("lib.so") (the CLI's
// `--plugin lib.so`, on every command that builds or loads). The types below are header-only, so a plugin library
// calls nothing in qdeploy: it fills an OpDef and hands it to the registrar. Plugin and host must be built with this
// same header (kPluginApiVersion is checked at registration).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "qdeploy/status.h"
#include "qdeploy/tensor.h"

namespace qdeploy {

// Bumped whenever a type below changes layout or meaning.
constexpr int kPluginApiVersion = 1;

// ---- attributes ----

enum class AttrType : int32_t { kInt = 1, kFloat = 2, kString = 3, kInts = 4, kFloats = 5 };

// One declared attribute: its type, its default (absent when required), the allowed range of a number (each element
// of a list) and the allowed length of a list. The importer rejects undeclared attributes, wrong types and values out
// of range, naming the node and the plugin; an INT given for a FLOAT attribute is converted.
struct AttrSpec {
  std::string name;
  AttrType type = AttrType::kInt;
  bool required = false;
  int64_t default_int = 0;
  float default_float = 0.f;
  std::string default_string;
  std::vector<int64_t> default_ints;
  std::vector<float> default_floats;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  int64_t min_size = 0, max_size = -1;  // lists: allowed number of elements (-1: any)
  std::string doc;

  static AttrSpec integer(std::string name, int64_t def, double lo, double hi, std::string doc) {
    AttrSpec s;
    s.name = std::move(name);
    s.type = AttrType::kInt;
    s.default_int = def;
    s.min = lo;
    s.max = hi;
    s.doc = std::move(doc);
    return s;
  }
  static AttrSpec real(std::string name, float def, double lo, double hi, std::string doc) {
    AttrSpec s;
    s.name = std::move(name);
    s.type = AttrType::kFloat;
    s.default_float = def;
    s.min = lo;
    s.max = hi;
    s.doc = std::move(doc);
    return s;
  }
};

using AttrVal = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>>;

// A node's attributes after the schema check: every declared attribute present with its declared type (defaults
// filled in), nothing else. The getters return 0 / empty for a name the schema does not declare.
class Attrs {
 public:
  void set(std::string name, AttrVal v) {
    for (auto& kv : v_) {
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    }
    v_.emplace_back(std::move(name), std::move(v));
  }
  const AttrVal* find(const std::string& name) const {
    for (const auto& kv : v_) {
      if (kv.first == name) return &kv.second;
    }
    return nullptr;
  }
  int64_t get_int(const std::string& name) const { return get<int64_t>(name); }
  float get_float(const std::string& name) const { return get<float>(name); }
  std::string get_string(const std::string& name) const { return get<std::string>(name); }
  std::vector<int64_t> get_ints(const std::string& name) const { return get<std::vector<int64_t>>(name); }
  std::vector<float> get_floats(const std::string& name) const { return get<std::vector<float>>(name); }
  const std::vector<std::pair<std::string, AttrVal>>& all() const { return v_; }

 private:
  template <typename T>
  T get(const std::string& name) const {
    const AttrVal* v = find(name);
    return v && std::holds_alternative<T>(*v) ? std::get<T>(*v) : T{};
  }
  std::vector<std::pair<std::string, AttrVal>> v_;
};

// ---- tensors ----

// A tensor as a kernel sees it. Dense row-major, except that consecutive rows of the last dim may lie row_stride
// elements apart (row_stride 0: dense, shape.back()). A CUDA kernel that accepts row_stride > shape.back() can read a
// column slice of a wider buffer in place (the fused-linear case: value and offsets side by side in one GEMM output).
// References always get dense tensors.
struct TensorView {
  DataType dtype = DataType::kFloat32;
  Dims shape;
  void* data = nullptr;  // host memory for the reference, device memory for CUDA kernels; nullptr in supports()
  int64_t row_stride = 0;

  int64_t ld() const { return row_stride ? row_stride : (shape.empty() ? 1 : shape.back()); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

// ---- inputs and outputs ----

struct IoSpec {
  std::string name;
  std::vector<DataType> dtypes;  // allowed element types
  bool optional = false;         // inputs: may be omitted (only trailing inputs)
  std::string doc;
};

// ---- test cases (the generic harness runs each through the reference and every CUDA kernel) ----

struct TestCase {
  std::string name;
  std::vector<std::pair<std::string, AttrVal>> attrs;  // overrides of the defaults
  std::vector<Dims> inputs;                            // input shapes
  // Inputs are drawn uniformly from [lo, hi] per input (default [-1, 1]).
  std::vector<std::pair<float, float>> ranges;
};

// ---- functions an op provides ----

// Output shapes from input shapes (all static). Errors say what is wrong with the node ("offset_mask has 64 channels;
// DCNv4 with group 4 and a 3x3 kernel needs at least 108"); qdeploy adds the node's name.
using InferShapesFn = Status (*)(const Attrs& attrs, const std::vector<Dims>& inputs, std::vector<Dims>* outputs);
// The reference kernel (required): float inputs arrive as float32 (qdeploy converts fp16 tensors around it) and float
// outputs are written as float32, dense, on the host. Simple and obviously right beats fast: it is the oracle.
using ReferenceFn = Status (*)(const Attrs& attrs, const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs);
// Multiply-accumulates of one run (inspect, cost reports); optional.
using MacsFn = int64_t (*)(const Attrs& attrs, const std::vector<Dims>& inputs);

// One CUDA kernel of an op. The builder asks supports() for the dtypes, shapes and row strides a node would give it
// (without a GPU, so `inspect --device cuda` can answer), then times every candidate of tactics() on the GPU and
// keeps the fastest per signature (op, attributes, shapes, dtypes, strides). Everything is a plain function of the
// attributes and tensor descriptions: nothing opaque is kept between build and load.
struct CudaKernelDef {
  std::string name;  // unique within the op, e.g. "fp16_x8"
  // OK when the kernel runs these inputs and outputs (dtype, shape, row strides; data is nullptr); otherwise why not.
  Status (*supports)(const Attrs& attrs, const std::vector<TensorView>& in, const std::vector<TensorView>& out) = nullptr;
  // Launch-configuration candidates for these tensors (at least one when supports() is OK).
  std::vector<int64_t> (*tactics)(const Attrs& attrs, const std::vector<TensorView>& in,
                                  const std::vector<TensorView>& out) = nullptr;
  // A tactic's name in profiles and plans (optional; the number otherwise).
  std::string (*tactic_name)(int64_t tactic) = nullptr;
  // Device scratch bytes a tactic needs (optional: none).
  size_t (*workspace)(const Attrs& attrs, int64_t tactic, const std::vector<TensorView>& in,
                      const std::vector<TensorView>& out) = nullptr;
  // Enqueues the kernel on `stream` (a cudaStream_t) with device pointers; must not synchronize or allocate.
  Status (*launch)(const Attrs& attrs, int64_t tactic, const std::vector<TensorView>& in,
                   const std::vector<TensorView>& out, void* workspace, void* stream) = nullptr;
};

// How the op takes part in INT8 builds. kFloatIsland: it runs in float between a DequantizeLinear and a
// QuantizeLinear (DESIGN.md's INT8 contract for any op without an INT8 kernel).
enum class PluginInt8 { kFloatIsland };

// The declaration of one op.
struct OpDef {
  int api_version = kPluginApiVersion;  // leave as is: checked at registration
  std::string domain;                   // the ONNX node's domain, e.g. "ai.qdeploy"; never "" or "ai.onnx"
  std::string name;                     // the ONNX op_type, e.g. "DCNv4"
  int version = 1;                      // matched against the model's opset_import for the domain
  std::string doc;
  std::vector<IoSpec> inputs, outputs;
  // Per output: the input whose dtype it takes (-1: its first allowed dtype).
  std::vector<int> output_dtype_from;
  std::vector<AttrSpec> attrs;
  PluginInt8 int8 = PluginInt8::kFloatIsland;
  // Every input and output has the batch as dim 0 and items do not mix (lets an engine run a batch as parts).
  bool batch_per_item = false;
  InferShapesFn infer_shapes = nullptr;  // required
  ReferenceFn reference = nullptr;       // required
  MacsFn macs = nullptr;
  std::vector<TestCase> tests;            // what the generic harness runs (at least one)
  std::vector<CudaKernelDef> cuda_kernels;  // may be empty: the op then runs on the CPU reference only
};

// What a plugin library's entry point registers its ops with.
class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;
  // Checks the declaration (names, counts, dtype rules, defaults inside their ranges, required functions, API
  // version) and registers it; an error says what is wrong. The same domain/name/version twice is an error, except
  // that a library may replace a built-in op (a newer build of the same plugin).
  virtual Status add(OpDef def) = 0;
};

// Registers an op declared in this program (an embedded plugin).
Status register_op(OpDef def);
// Loads a plugin library (dlopen) and calls its entry point. Loading the same file twice is a no-op.
Status load_plugin(const std::string& path);
// The ops qdeploy ships as plugins (DCNv4); the front end calls it before it imports a model or loads a plan.
// Idempotent.
void register_builtin_plugins();
// "domain::name@version (source)" of every registered plugin op; source is "built in", "program" or the library path.
std::vector<std::string> registered_plugin_ops();

}  // namespace qdeploy

// The one symbol a plugin library exports: registers its ops and returns 0, or returns nonzero after writing why into
// `error` (at most error_size bytes, NUL-terminated).
#define QD_PLUGIN_ENTRY qd_register_ops
extern "C" {
typedef int (*qd_register_ops_fn)(qdeploy::PluginRegistrar* registrar, char* error, size_t error_size);
}
