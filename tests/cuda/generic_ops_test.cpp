// The generic CUDA kernels (src/backends/cuda/kernels) against the reference backend. One harness: a case describes a
// node (op, attributes, opset, inputs with shapes, types, ranges or given data, constant or not); the harness draws
// seeded random inputs, runs the reference kernel (ops::run_node) and the CUDA kernel on device copies, and compares.
// Each case runs with float data stored as fp32, and again as fp16 (inputs rounded to fp16 before the reference sees
// them, so both compute on the same values). Tolerances: fp32 max |err| <= 1e-5 * max(1, max|ref|) unless a case says
// otherwise; fp16 <= 2e-3 * max(1, max|ref|) (the output's own rounding is 2^-11 relative); integer and bool outputs
// exactly. Every output element is compared (the outputs are filled with 0xff bytes before the launch, so an element
// a kernel forgets shows up as NaN or -1). The worst error per op is printed at the end.
// Tests that need a GPU skip without one; the kUnsupported checks run everywhere (no device call happens).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "cuda/gpu_test.h"
#include "backends/cuda/kernels/eltwise_chain.h"
#include "backends/cuda/kernels/generic.h"
#include "core/half.h"
#include "ops/op.h"

namespace qd {
namespace {

using cuda::TensorSpec;

using test::has_gpu;

// ---------------------------------------------------------------- case descriptions

struct In {
  Shape shape;
  DType dtype = DType::kFloat32;
  bool constant = false;   // a graph constant (what sets shapes: Reshape's shape, Slice's starts, Resize's scales...)
  Tensor value;            // given data (else random)
  double lo = -1, hi = 1;  // random range (integers: inclusive)
  bool integers = false;   // random float data with integer values (ties, equality)
  bool omitted = false;
  bool keep_f32 = false;  // stays float32 when the case runs with fp16 storage
};

struct Case {
  std::string name;
  OpType op;
  AttrMap attrs;
  std::vector<In> in;
  int outputs = 1;
  int opset = 17;
  bool fp16 = true;  // also run with float data stored as fp16
  double tol32 = 1e-5, tol16 = 2e-3;
  std::vector<int> f32_outputs;  // float outputs that stay float32 in fp16 mode
  bool misalign = false;         // also run with input/output pointers off 16-byte alignment
};

// Shorthands.
In data(Shape s, double lo = -1, double hi = 1) {
  In i;
  i.shape = std::move(s);
  i.lo = lo;
  i.hi = hi;
  return i;
}
In typed(Shape s, DType t, double lo = -5, double hi = 5) {
  In i = data(std::move(s), lo, hi);
  i.dtype = t;
  return i;
}
In ints_f(Shape s, double lo = -2, double hi = 2) {  // integer-valued floats
  In i = data(std::move(s), lo, hi);
  i.integers = true;
  return i;
}
In given(Tensor t, bool constant = false) {
  In i;
  i.shape = t.shape();
  i.dtype = t.dtype();
  i.value = std::move(t);
  i.constant = constant;
  return i;
}
In cst_i64(const std::vector<int64_t>& v) { return given(Tensor::from_i64(v), true); }
In cst_f32(const Shape& s, const std::vector<float>& v, bool keep_f32 = false) {
  In i = given(Tensor::from_f32(s, v), true);
  i.keep_f32 = keep_f32;
  return i;
}
In scalar_f32(float v) { return cst_f32({}, {v}); }
In none() {
  In i;
  i.omitted = true;
  return i;
}

AttrValue I(int64_t v) { return v; }
AttrValue F(float v) { return v; }
AttrValue S(const char* v) { return std::string(v); }
AttrValue Is(std::vector<int64_t> v) { return v; }
AttrValue Fs(std::vector<float> v) { return v; }
AttrMap attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

Case mk(std::string name, OpType op, std::vector<In> in, AttrMap a = {}) {
  Case c;
  c.name = std::move(name);
  c.op = op;
  c.in = std::move(in);
  c.attrs = std::move(a);
  return c;
}

// ---------------------------------------------------------------- host data

Tensor random_tensor(const In& in, uint32_t seed) {
  Tensor t(in.dtype, in.shape);
  std::mt19937 rng(seed);
  if (in.dtype == DType::kBool) {
    std::bernoulli_distribution b(0.5);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = b(rng) ? 1 : 0;
  } else if (is_float(in.dtype) && !in.integers) {
    std::uniform_real_distribution<double> u(in.lo, in.hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
  } else {
    std::uniform_int_distribution<int64_t> u(static_cast<int64_t>(in.lo), static_cast<int64_t>(in.hi));
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>(u(rng)));
  }
  return t;
}

Tensor to_half(const Tensor& f) {
  Tensor h(DType::kFloat16, f.shape());
  for (int64_t i = 0; i < f.numel(); ++i) h.data<uint16_t>()[i] = float_to_half(f.data<float>()[i]);
  return h;
}
Tensor rounded_to_half(const Tensor& f) {
  Tensor r(DType::kFloat32, f.shape());
  for (int64_t i = 0; i < f.numel(); ++i) r.data<float>()[i] = half_to_float(float_to_half(f.data<float>()[i]));
  return r;
}

uint32_t seed_of(const std::string& s, size_t k) {
  uint32_t h = 2166136261u;
  for (char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
  return h ^ static_cast<uint32_t>(k * 0x9e3779b9u);
}

// ---------------------------------------------------------------- device side

struct DevBuf {
  void* base = nullptr;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : base(o.base) { o.base = nullptr; }
  ~DevBuf() {
    if (base) cudaFree(base);
  }
};

#define CUDA_OK(expr)                                                                           \
  do {                                                                                          \
    cudaError_t e_ = (expr);                                                                    \
    if (e_ != cudaSuccess) return internal(std::string(#expr) + ": " + cudaGetErrorString(e_)); \
  } while (0)

// What one run of the CUDA kernel needs and gives back.
struct DeviceRun {
  std::vector<Tensor> outputs;  // host copies, in the output specs' dtypes
};

// Builds the one-node graph, makes the kernel and runs it on device copies of `inputs` (device dtypes).
// With make_only, stops once the kernel is made (no launch).
Expected<DeviceRun> run_cuda(const Node& node_in, const std::vector<Tensor>& inputs, const std::vector<bool>& omitted,
                             const std::vector<const Tensor*>& constants, const std::vector<TensorSpec>& out_specs,
                             bool misalign, bool make_only) {
  Graph g;
  Node node = node_in;
  std::vector<TensorSpec> in_specs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (omitted[i]) {
      node.inputs[i] = -1;
      in_specs.push_back(TensorSpec{});
      continue;
    }
    const int id = g.add_value("in" + std::to_string(i));
    g.values[id].dtype = inputs[i].dtype();
    g.values[id].shape = inputs[i].shape();
    g.values[id].has_shape = true;
    if (constants[i])
      g.constants[id] = *constants[i];
    else
      g.inputs.push_back(id);
    node.inputs[i] = id;
    in_specs.push_back(TensorSpec{inputs[i].dtype(), inputs[i].shape()});
  }
  for (size_t o = 0; o < out_specs.size(); ++o) {
    const int id = g.add_value("out" + std::to_string(o));
    g.values[id].dtype = out_specs[o].dtype;
    g.values[id].shape = out_specs[o].shape;
    g.values[id].has_shape = true;
    node.outputs[o] = id;
    g.outputs.push_back(id);
  }
  g.nodes.push_back(node);
  auto made = cuda::make_generic_kernel(g, g.nodes[0], in_specs, out_specs);
  if (!made) return made.status();
  if (make_only) return DeviceRun{};
  cuda::GenericKernel& k = **made;

  // Device copies; misaligned runs shift every pointer by one element (never 16-byte aligned then).
  std::vector<DevBuf> bufs;
  std::vector<const void*> in_ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (omitted[i]) {
      in_ptrs.push_back(nullptr);
      continue;
    }
    const size_t shift = misalign ? dtype_size(inputs[i].dtype()) : 0;
    DevBuf b;
    CUDA_OK(cudaMalloc(&b.base, inputs[i].nbytes() + 64));
    char* p = static_cast<char*>(b.base) + shift;
    if (inputs[i].nbytes()) CUDA_OK(cudaMemcpy(p, inputs[i].raw(), inputs[i].nbytes(), cudaMemcpyHostToDevice));
    in_ptrs.push_back(p);
    bufs.push_back(std::move(b));
  }
  std::vector<void*> out_ptrs;
  std::vector<size_t> out_bytes;
  for (const TensorSpec& s : out_specs) {
    const size_t bytes = static_cast<size_t>(numel(s.shape)) * dtype_size(s.dtype);
    const size_t shift = misalign ? dtype_size(s.dtype) : 0;
    DevBuf b;
    CUDA_OK(cudaMalloc(&b.base, bytes + 64));
    CUDA_OK(cudaMemset(b.base, 0xff, bytes + 64));  // unwritten elements read as NaN / -1 / 255
    out_ptrs.push_back(static_cast<char*>(b.base) + shift);
    out_bytes.push_back(bytes);
    bufs.push_back(std::move(b));
  }
  DevBuf ws;
  if (k.workspace_bytes()) {
    CUDA_OK(cudaMalloc(&ws.base, k.workspace_bytes()));
    k.set_workspace(ws.base);
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  Status st = k.launch(in_ptrs, out_ptrs, stream);
  const cudaError_t sync = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (!st.is_ok()) return st;
  CUDA_OK(sync);
  DeviceRun r;
  for (size_t o = 0; o < out_specs.size(); ++o) {
    Tensor t(out_specs[o].dtype, out_specs[o].shape);
    if (out_bytes[o]) CUDA_OK(cudaMemcpy(t.raw(), out_ptrs[o], out_bytes[o], cudaMemcpyDeviceToHost));
    r.outputs.push_back(std::move(t));
  }
  return r;
}

// ---------------------------------------------------------------- comparison

struct Compare {
  bool ok = true;
  double worst = 0;  // max |err| / max(1, max|ref|) over float outputs
  std::string what;  // the first mismatch
};

Compare compare(const Tensor& ref, const Tensor& got, double tol, const std::string& label) {
  Compare c;
  if (ref.shape() != got.shape()) {
    c.ok = false;
    c.what = label + ": shape " + shape_str(got.shape()) + ", expected " + shape_str(ref.shape());
    return c;
  }
  const bool exact = !is_float(ref.dtype());
  double scale = 1;
  for (int64_t i = 0; exact ? false : i < ref.numel(); ++i) {
    const double v = std::fabs(ref.get_f64(i));
    if (std::isfinite(v)) scale = std::max(scale, v);
  }
  for (int64_t i = 0; i < ref.numel(); ++i) {
    bool bad;
    double err = 0;
    if (exact) {
      bad = ref.get_i64(i) != got.get_i64(i);
    } else {
      const double r = ref.get_f64(i), g = got.get_f64(i);
      if (std::isnan(r) || std::isnan(g))
        bad = std::isnan(r) != std::isnan(g);
      else if (std::isinf(r) || std::isinf(g))
        bad = r != g;
      else {
        err = std::fabs(r - g) / scale;
        bad = err > tol;
      }
      c.worst = std::max(c.worst, err);
    }
    if (bad && c.ok) {
      c.ok = false;
      c.what = label + ": element " + std::to_string(i) + " is " + std::to_string(got.get_f64(i)) + ", expected " +
               std::to_string(ref.get_f64(i));
    }
  }
  return c;
}

// Worst relative error per op and storage, printed when the program ends.
struct Worst {
  double err = 0;
  int cases = 0;
};
std::map<std::string, Worst>& worst_table() {
  static std::map<std::string, Worst> t;
  return t;
}
class WorstReport : public ::testing::Environment {
 public:
  void TearDown() override {
    if (worst_table().empty()) return;
    std::cout << "generic CUDA kernels, worst |err| / max(1, max|ref|) per op:\n";
    for (const auto& [k, w] : worst_table()) {
      std::printf("  %-28s %9.2e  (%d runs)\n", k.c_str(), w.err, w.cases);
    }
  }
};
const auto* const kReport = ::testing::AddGlobalTestEnvironment(new WorstReport);

// ---------------------------------------------------------------- the harness

// Runs one case with the given float storage; returns a description of the first failure ("" when it passes).
// `compare_with`: an op whose reference the kernel's outputs are compared to instead (the harness's self-check).
// `make_only`: only create the kernel (without a GPU, failing device allocations are accepted then).
std::string run_case(const Case& c, bool half, bool misalign, const Case* compare_with = nullptr,
                     bool make_only = false) {
  Node node;
  node.name = c.name;
  node.op = c.op;
  node.opset = c.opset;
  node.attrs = c.attrs;
  const size_t n_in = c.in.size();
  // Inputs: the reference's (float32; rounded to fp16 values in fp16 mode) and the device's (fp16 in fp16 mode).
  std::vector<Tensor> ref_in(n_in), dev_in(n_in);
  std::vector<bool> omitted(n_in);
  std::vector<const Tensor*> ref_ptrs(n_in, nullptr), constants(n_in, nullptr);
  for (size_t i = 0; i < n_in; ++i) {
    const In& in = c.in[i];
    omitted[i] = in.omitted;
    node.inputs.push_back(in.omitted ? -1 : static_cast<int>(i));
    if (in.omitted) continue;
    Tensor t = in.value.empty() ? random_tensor(in, seed_of(c.name, i)) : in.value;
    const bool to16 = half && t.dtype() == DType::kFloat32 && !in.keep_f32;
    ref_in[i] = to16 ? rounded_to_half(t) : t;
    dev_in[i] = to16 ? to_half(t) : t;
    ref_ptrs[i] = &ref_in[i];
    if (in.constant) constants[i] = &ref_in[i];
  }
  for (int o = 0; o < c.outputs; ++o) node.outputs.push_back(100 + o);
  // The reference.
  std::vector<Tensor> ref_out;
  {
    Node rn = node;
    if (compare_with) {
      rn.op = compare_with->op;
      rn.attrs = compare_with->attrs;
    }
    std::vector<DType> types(n_in, DType::kUndefined);
    std::vector<Shape> shapes(n_in);
    for (size_t i = 0; i < n_in; ++i) {
      if (ref_ptrs[i]) {
        types[i] = ref_ptrs[i]->dtype();
        shapes[i] = ref_ptrs[i]->shape();
      }
    }
    InferCtx ctx(rn, types, shapes, ref_ptrs);
    Status st = infer_node(ctx);
    if (!st.is_ok()) return "reference inference: " + st.to_string();
    auto outs = run_node(ctx, ref_ptrs);
    if (!outs) return "reference: " + outs.status().to_string();
    ref_out = std::move(*outs);
  }
  // Output specs: the reference's, with float32 stored as fp16 in fp16 mode.
  std::vector<TensorSpec> out_specs;
  for (int o = 0; o < c.outputs; ++o) {
    DType t = ref_out[o].dtype();
    const bool keep = std::find(c.f32_outputs.begin(), c.f32_outputs.end(), o) != c.f32_outputs.end();
    if (half && t == DType::kFloat32 && !keep) t = DType::kFloat16;
    out_specs.push_back(TensorSpec{t, ref_out[o].shape()});
  }
  auto run = run_cuda(node, dev_in, omitted, constants, out_specs, misalign, make_only);
  if (!run) {
    const std::string m = run.status().to_string();
    if (make_only && !has_gpu() && m.find("cuda") != std::string::npos) return "";  // e.g. a table upload
    return "CUDA: " + m;
  }
  if (make_only) return "";
  const double tol = half ? c.tol16 : c.tol32;
  Worst& w = worst_table()[std::string(op_name(c.op)) + (half ? " fp16" : " fp32")];
  ++w.cases;
  for (int o = 0; o < c.outputs; ++o) {
    const Compare cmp = compare(ref_out[o], run->outputs[o], tol, "output " + std::to_string(o));
    w.err = std::max(w.err, cmp.worst);
    if (!cmp.ok) return cmp.what;
  }
  return "";
}

bool has_float_data(const Case& c) {
  for (const In& in : c.in) {
    if (!in.omitted && in.dtype == DType::kFloat32 && !in.keep_f32) return true;
  }
  return false;
}

// Runs every case in fp32 (and fp16, and misaligned, where the case asks); one failure line per failing run.
void run_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    for (int half = 0; half < 2; ++half) {
      if (half && (!c.fp16 || !has_float_data(c))) continue;
      for (int mis = 0; mis < (c.misalign ? 2 : 1); ++mis) {
        const std::string r = run_case(c, half != 0, mis != 0);
        EXPECT_EQ(r, "") << c.name << (half ? " [fp16]" : " [fp32]") << (mis ? " [misaligned]" : "");
      }
    }
  }
}

// ---------------------------------------------------------------- shapes used by many cases

const std::vector<Shape> kUnaryShapes = {{}, {7}, {3, 5}, {2, 3, 4, 5}, {1, 1, 257}, {2, 64, 33, 35}, {0, 4}};
constexpr int64_t kBig = 2 * 64 * 33 * 35;  // > 2^16 elements
static_assert(kBig > (1 << 16), "large cases must exceed 2^16 elements");

// ================================================================ elementwise

std::vector<Case> unary_cases() {
  struct U {
    OpType op;
    double lo, hi;
    AttrMap a;
  };
  const std::vector<U> ops = {
      {OpType::Relu, -2, 2, {}},
      {OpType::Sigmoid, -8, 8, {}},
      {OpType::Tanh, -4, 4, {}},
      {OpType::Exp, -3, 3, {}},
      {OpType::Log, 0.1, 3, {}},
      {OpType::Sqrt, 0, 4, {}},
      {OpType::Abs, -2, 2, {}},
      {OpType::Neg, -2, 2, {}},
      {OpType::Reciprocal, 0.5, 2, {}},
      {OpType::Floor, -3, 3, {}},
      {OpType::Ceil, -3, 3, {}},
      {OpType::Erf, -2, 2, {}},
      {OpType::Softplus, -40, 40, {}},
      {OpType::Softsign, -3, 3, {}},
      {OpType::HardSwish, -5, 5, {}},
      {OpType::Mish, -5, 5, {}},
      {OpType::Sin, -3, 3, {}},
      {OpType::Cos, -3, 3, {}},
      {OpType::Tan, -1, 1, {}},
      {OpType::Asin, -0.9, 0.9, {}},
      {OpType::Acos, -0.9, 0.9, {}},
      {OpType::Atan, -3, 3, {}},
      {OpType::Sinh, -2, 2, {}},
      {OpType::Cosh, -2, 2, {}},
      {OpType::Asinh, -3, 3, {}},
      {OpType::Acosh, 1.1, 3, {}},
      {OpType::Atanh, -0.9, 0.9, {}},
      {OpType::Sign, -2, 2, {}},
      {OpType::LeakyRelu, -2, 2, attrs({{"alpha", F(0.2f)}})},
      {OpType::LeakyRelu, -2, 2, {}},
      {OpType::Elu, -3, 3, attrs({{"alpha", F(0.7f)}})},
      {OpType::Selu, -3, 3, {}},
      {OpType::Celu, -3, 3, attrs({{"alpha", F(0.7f)}})},
      {OpType::ThresholdedRelu, -2, 2, attrs({{"alpha", F(0.3f)}})},
      {OpType::HardSigmoid, -5, 5, attrs({{"alpha", F(0.3f)}, {"beta", F(0.4f)}})},
      {OpType::HardSigmoid, -5, 5, {}},
      {OpType::Gelu, -5, 5, {}},
      {OpType::Gelu, -5, 5, attrs({{"approximate", AttrValue(std::string("tanh"))}})},
      {OpType::Swish, -8, 8, {}},
      {OpType::Swish, -8, 8, attrs({{"alpha", F(1.7f)}})},
  };
  std::vector<Case> cases;
  size_t k = 0;
  for (const U& u : ops) {
    // Each op on four of the shapes (always the large one), rotating through the rest.
    std::vector<Shape> shapes = {
        kUnaryShapes[k % 7], kUnaryShapes[(k + 2) % 7], kUnaryShapes[(k + 4) % 7], {2, 64, 33, 35}};
    ++k;
    for (const Shape& s : shapes) {
      Case c = mk(std::string(op_name(u.op)) + "_" + shape_str(s), u.op, {data(s, u.lo, u.hi)}, u.a);
      if (u.op == OpType::Sign) c.in[0].integers = true;
      c.misalign = numel(s) > 8;
      cases.push_back(c);
    }
  }
  // Round: ties go to even.
  cases.push_back(mk("Round_ties", OpType::Round,
                     {given(Tensor::from_f32({12}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.49f, -0.51f, 3.7f, -3.2f,
                                                    1e6f + 0.5f, 0.f}))}));
  cases.push_back(mk("Round_big", OpType::Round, {data({kBig}, -50, 50)}));
  return cases;
}
// The elementwise chains' division by a fixed divisor (their operands' index terms, 32-bit indices below 2^31):
// exact for divisors of every size, at the ends of the range and at multiples of the divisor (host side; the device's
// __umulhi is the same product). Runs without a GPU.
TEST(FastDiv, QuotientsExact) {
  std::mt19937 rng(7);
  std::vector<int64_t> divisors = {1, 2, 3, 5, 7, 12, 80, 255, 6400, 12800, 38400, 65535, 65536, 65537, 1000003,
                                   (int64_t{1} << 30) + 1, (int64_t{1} << 31) - 1, int64_t{1} << 31,
                                   (int64_t{1} << 31) + 5, int64_t{1} << 40};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % ((i % 2) ? 100000 : (1u << 31)));
  const uint32_t top = (1u << 31) - 1;
  for (const int64_t d : divisors) {
    uint32_t magic = 0;
    uint8_t shift = 0;
    cuda::fast_divisor(d, &magic, &shift);
    std::vector<uint32_t> ns = {0, 1, top, top - 1};
    for (int k = 0; k < 2000; ++k) ns.push_back(rng() & top);
    if (d <= top) {
      const uint32_t du = static_cast<uint32_t>(d);
      for (const uint32_t q : {1u, 2u, top / du}) {
        if (static_cast<uint64_t>(q) * du <= top) ns.push_back(q * du), ns.push_back(q * du - 1);
      }
    }
    for (const uint32_t n : ns) {
      ASSERT_EQ(cuda::fast_div(n, magic, shift), static_cast<uint32_t>(n / d)) << n << " / " << d;
    }
  }
}

TEST(CudaGenericOps, Unary) {
  SKIP_WITHOUT_GPU();
  run_cases(unary_cases());
}

std::vector<Case> clip_not_and_integer_unary_cases() {
  std::vector<Case> cases;
  for (const Shape& s : std::vector<Shape>{{7}, {2, 3, 4, 5}, {2, 64, 33, 35}, {0, 3}}) {
    const std::string sn = shape_str(s);
    cases.push_back(mk("Clip_both_" + sn, OpType::Clip, {data(s, -2, 2), scalar_f32(-0.5f), scalar_f32(0.7f)}));
    cases.push_back(mk("Clip_min_" + sn, OpType::Clip, {data(s, -2, 2), scalar_f32(-0.5f)}));
    cases.push_back(mk("Clip_max_" + sn, OpType::Clip, {data(s, -2, 2), none(), scalar_f32(0.25f)}));
    cases.push_back(mk("Clip_none_" + sn, OpType::Clip, {data(s, -2, 2)}));
    cases.push_back(mk("Clip_min_above_max_" + sn, OpType::Clip, {data(s, -2, 2), scalar_f32(0.5f), scalar_f32(-0.25f)}));
    Case old = mk("Clip_opset6_" + sn, OpType::Clip, {data(s, -2, 2)}, attrs({{"min", F(-0.3f)}, {"max", F(0.6f)}}));
    old.opset = 6;
    cases.push_back(old);
    cases.push_back(mk("Clip_runtime_bounds_" + sn, OpType::Clip, {data(s, -2, 2), data({}, -1, 0), data({}, 0, 1)}));
    cases.push_back(mk("Not_" + sn, OpType::Not, {typed(s, DType::kBool)}));
    for (DType t : {DType::kInt32, DType::kInt64, DType::kInt8}) {
      const std::string tn = std::string(dtype_name(t)) + "_" + sn;
      cases.push_back(mk("Abs_" + tn, OpType::Abs, {typed(s, t, -100, 100)}));
      cases.push_back(mk("Neg_" + tn, OpType::Neg, {typed(s, t, -100, 100)}));
      cases.push_back(mk("Sign_" + tn, OpType::Sign, {typed(s, t, -3, 3)}));
    }
    Tensor lo(DType::kInt32, {}), hi(DType::kInt32, {});
    lo.set_f64(0, -7);
    hi.set_f64(0, 12);
    cases.push_back(
        mk("Clip_int32_" + sn, OpType::Clip, {typed(s, DType::kInt32, -50, 50), given(lo, true), given(hi, true)}));
  }
  for (Case& c : cases) c.misalign = true;
  return cases;
}
TEST(CudaGenericOps, ClipNotAndIntegerUnary) {
  SKIP_WITHOUT_GPU();
  run_cases(clip_not_and_integer_unary_cases());
}

std::vector<Case> cast_cases() {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kInt64,
                                    DType::kInt8,    DType::kUInt8,   DType::kBool};
  std::vector<Case> cases;
  for (DType from : types) {
    for (DType to : types) {
      for (const Shape& s : std::vector<Shape>{{3, 50}, {kBig}}) {
        // Values beyond the narrow integer types, in range for the source type.
        In x = typed(s, from, -300, 300);
        if (is_float(from)) x.lo = -300.7, x.hi = 300.7;
        if (from == DType::kInt8) x.lo = -128, x.hi = 127;
        if (from == DType::kUInt8) x.lo = 0, x.hi = 255;
        Case c = mk(std::string("Cast_") + dtype_name(from) + "_to_" + dtype_name(to) + "_" + shape_str(s),
                    OpType::Cast, {x}, attrs({{"to", I(static_cast<int64_t>(to))}}));
        c.fp16 = false;  // the types are the point here
        cases.push_back(c);
      }
    }
  }
  // Special float values.
  Tensor sp = Tensor::from_f32({8}, {NAN, INFINITY, -INFINITY, 1e20f, -1e20f, -0.f, 0.99f, -0.99f});
  for (DType to : types) {
    Case c = mk(std::string("Cast_special_to_") + dtype_name(to), OpType::Cast, {given(sp)},
                attrs({{"to", I(static_cast<int64_t>(to))}}));
    c.fp16 = false;
    cases.push_back(c);
  }
  Case like = mk("CastLike_f32_to_i64", OpType::CastLike, {data({4, 9}, -9, 9), typed({1}, DType::kInt64)});
  like.fp16 = false;
  cases.push_back(like);
  return cases;
}
TEST(CudaGenericOps, Cast) {
  SKIP_WITHOUT_GPU();
  run_cases(cast_cases());
}

// Broadcast pairs: [a shape, b shape].
const std::vector<std::pair<Shape, Shape>> kPairs = {
    {{2, 3, 4, 5}, {2, 3, 4, 5}},
    {{2, 3, 4, 5}, {}},
    {{}, {2, 3, 4, 5}},
    {{2, 3, 4, 5}, {5}},
    {{2, 3, 4, 5}, {3, 1, 1}},
    {{2, 1, 4, 1}, {1, 3, 1, 5}},
    {{1}, {1}},
    {{0, 3}, {3}},
    {{2, 64, 33, 35}, {64, 1, 1}},
    {{7, 1}, {1, 9}},
    {{2, 1, 3, 1, 2, 1, 3}, {1, 2, 1, 3, 1, 2, 1}},
    {{2, 64, 33, 35}, {2, 64, 33, 35}},
};

std::vector<Case> binary_cases() {
  struct B {
    OpType op;
    double alo, ahi, blo, bhi;
    AttrMap a;
  };
  const std::vector<B> arith = {
      {OpType::Add, -2, 2, -2, 2, {}},
      {OpType::Sub, -2, 2, -2, 2, {}},
      {OpType::Mul, -2, 2, -2, 2, {}},
      {OpType::Div, -2, 2, 0.5, 2, {}},
      {OpType::Pow, 0.5, 2, -2, 2, {}},
      {OpType::PRelu, -2, 2, -1, 1, {}},
      {OpType::Max, -2, 2, -2, 2, {}},
      {OpType::Min, -2, 2, -2, 2, {}},
      {OpType::Mod, -5, 5, 1, 3, attrs({{"fmod", I(1)}})},
      {OpType::Mod, -5, 5, -3, -1, attrs({{"fmod", I(1)}})},
  };
  std::vector<Case> cases;
  size_t k = 0;
  for (const B& b : arith) {
    for (size_t p = 0; p < kPairs.size(); ++p) {
      if (p % 2 != k % 2 && p != 8) continue;  // half the pairs per op (alternating), always the large broadcast
      const auto& [sa, sb] = kPairs[p];
      Case c = mk(std::string(op_name(b.op)) + "_" + shape_str(sa) + "_" + shape_str(sb), b.op,
                  {data(sa, b.alo, b.ahi), data(sb, b.blo, b.bhi)}, b.a);
      if (b.op == OpType::PRelu && !sb.empty() && sb.size() > sa.size()) continue;  // slope must broadcast to X
      c.misalign = p == 0 || p == 1;
      if (b.op == OpType::Pow) c.tol16 = 4e-3;  // pow of fp16 bases: x^2 doubles the relative error of x
      cases.push_back(c);
    }
    ++k;
  }
  // Integer arithmetic (division by zero defined as 0; Python's modulo sign).
  for (DType t : {DType::kInt32, DType::kInt64}) {
    const std::string tn = dtype_name(t);
    for (OpType op : {OpType::Add, OpType::Sub, OpType::Mul, OpType::Div, OpType::Mod, OpType::Max, OpType::Min}) {
      cases.push_back(
          mk(std::string(op_name(op)) + "_" + tn, op, {typed({2, 3, 4, 5}, t, -20, 20), typed({4, 5}, t, -3, 3)}));
    }
    cases.push_back(
        mk("fmod_" + tn, OpType::Mod, {typed({6, 7}, t, -20, 20), typed({7}, t, -3, 3)}, attrs({{"fmod", I(1)}})));
    cases.push_back(mk("Pow_" + tn, OpType::Pow, {typed({5, 6}, t, -3, 3), typed({6}, t, 0, 3)}));
  }
  // Float Mod with the divisor's sign, and Pow with an integer exponent.
  cases.push_back(mk("Mod_float", OpType::Mod, {data({5, 40}, -6, 6), ints_f({40}, 1, 3)}));
  cases.push_back(mk("Mod_float_neg", OpType::Mod, {data({5, 40}, -6, 6), ints_f({40}, -3, -1)}));
  cases.push_back(mk("Pow_int_exponent", OpType::Pow, {data({3, 20}, 0.5, 2), typed({20}, DType::kInt64, -3, 3)}));
  cases.push_back(mk("Pow_int32_exponent", OpType::Pow, {data({3, 20}, -2, 2), typed({1}, DType::kInt32, 2, 2)}));
  // Comparisons (integer-valued floats make equal pairs common) and logic.
  for (OpType op : {OpType::Equal, OpType::Less, OpType::LessOrEqual, OpType::Greater, OpType::GreaterOrEqual}) {
    for (size_t p = 0; p < kPairs.size(); p += 3) {
      const auto& [sa, sb] = kPairs[p];
      cases.push_back(
          mk(std::string(op_name(op)) + "_" + shape_str(sa) + "_" + shape_str(sb), op, {ints_f(sa), ints_f(sb)}));
    }
    cases.push_back(mk(std::string(op_name(op)) + "_int64", op,
                       {typed({4, 7}, DType::kInt64, -2, 2), typed({7}, DType::kInt64, -2, 2)}));
    cases.push_back(mk(std::string(op_name(op)) + "_int32", op,
                       {typed({4, 7}, DType::kInt32, -2, 2), typed({4, 1}, DType::kInt32, -2, 2)}));
  }
  cases.push_back(mk("Equal_bool", OpType::Equal, {typed({5, 6}, DType::kBool), typed({6}, DType::kBool)}));
  for (OpType op : {OpType::And, OpType::Or, OpType::Xor}) {
    for (size_t p = 0; p < kPairs.size(); p += 2) {
      const auto& [sa, sb] = kPairs[p];
      cases.push_back(mk(std::string(op_name(op)) + "_" + shape_str(sa) + "_" + shape_str(sb), op,
                         {typed(sa, DType::kBool), typed(sb, DType::kBool)}));
    }
  }
  return cases;
}
TEST(CudaGenericOps, Binary) {
  SKIP_WITHOUT_GPU();
  run_cases(binary_cases());
}

std::vector<Case> variadic_and_where_cases() {
  std::vector<Case> cases;
  cases.push_back(mk("Sum_3", OpType::Sum, {data({2, 3, 4}), data({3, 1}), data({4})}));
  cases.push_back(mk("Sum_1", OpType::Sum, {data({5, 6})}));
  cases.push_back(mk("Sum_big", OpType::Sum, {data({2, 64, 33, 35}), data({64, 1, 1}), data({2, 64, 33, 35})}));
  cases.push_back(mk("Mean_4", OpType::Mean, {data({2, 3, 4}), data({2, 3, 4}), data({1}), data({3, 4})}));
  cases.push_back(mk("Max_1", OpType::Max, {data({9})}));
  cases.push_back(mk("Max_3", OpType::Max, {data({4, 1, 6}), data({5, 1}), data({4, 5, 6})}));
  cases.push_back(mk("Min_3", OpType::Min, {data({4, 1, 6}), data({5, 1}), data({})}));
  cases.push_back(mk("Max_nan", OpType::Max, {given(Tensor::from_f32({4}, {NAN, 1.f, 2.f, NAN})), data({4})}));
  cases.push_back(
      mk("Min_8", OpType::Min,
         {data({3, 4}), data({4}), data({3, 1}), data({}), data({3, 4}), data({1, 4}), data({3, 4}), data({4})}));
  cases.push_back(mk("Sum_int32", OpType::Sum, {typed({3, 4}, DType::kInt32), typed({4}, DType::kInt32)}));
  cases.push_back(mk("Max_int64", OpType::Max, {typed({3, 4}, DType::kInt64), typed({3, 1}, DType::kInt64)}));
  cases.push_back(mk("Sum_empty", OpType::Sum, {data({0, 4}), data({4})}));
  // Where: every operand broadcast, float (fp32/fp16) and other widths.
  const std::vector<std::vector<Shape>> where_shapes = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                                                        {{3, 1}, {1, 4}, {}},
                                                        {{4}, {2, 3, 4}, {3, 1}},
                                                        {{2, 64, 33, 35}, {64, 1, 1}, {}},
                                                        {{0, 2}, {2}, {2}}};
  for (const auto& s : where_shapes) {
    const std::string n = shape_str(s[0]) + "_" + shape_str(s[1]) + "_" + shape_str(s[2]);
    cases.push_back(mk("Where_" + n, OpType::Where, {typed(s[0], DType::kBool), data(s[1]), data(s[2])}));
    cases.push_back(mk("Where_i64_" + n, OpType::Where,
                       {typed(s[0], DType::kBool), typed(s[1], DType::kInt64), typed(s[2], DType::kInt64)}));
    cases.push_back(mk("Where_i8_" + n, OpType::Where,
                       {typed(s[0], DType::kBool), typed(s[1], DType::kInt8), typed(s[2], DType::kInt8)}));
  }
  return cases;
}
TEST(CudaGenericOps, VariadicAndWhere) {
  SKIP_WITHOUT_GPU();
  run_cases(variadic_and_where_cases());
}

// ================================================================ data movement

std::vector<Case> reshape_like_cases() {
  std::vector<Case> cases;
  cases.push_back(mk("Reshape", OpType::Reshape, {data({2, 3, 4}), cst_i64({4, -1})}));
  cases.push_back(mk("Reshape_zero", OpType::Reshape, {data({2, 3, 4}), cst_i64({0, 12})}));
  cases.push_back(mk("Reshape_i64", OpType::Reshape, {typed({6, 5}, DType::kInt64), cst_i64({30})}));
  cases.push_back(mk("Reshape_empty", OpType::Reshape, {data({0, 5}), cst_i64({5, 0})}, attrs({{"allowzero", I(1)}})));
  cases.push_back(mk("Reshape_big", OpType::Reshape, {data({2, 64, 33, 35}), cst_i64({128, -1})}));
  cases.push_back(mk("Flatten", OpType::Flatten, {data({2, 3, 4, 5})}, attrs({{"axis", I(2)}})));
  cases.push_back(mk("Squeeze", OpType::Squeeze, {data({1, 3, 1, 5}), cst_i64({0, 2})}));
  cases.push_back(mk("Unsqueeze", OpType::Unsqueeze, {data({3, 5}), cst_i64({0, -1})}));
  cases.push_back(mk("Identity", OpType::Identity, {typed({7, 3}, DType::kInt32)}));
  Case dropout = mk("Dropout_mask", OpType::Dropout, {data({4, 6})});
  dropout.outputs = 2;
  cases.push_back(dropout);
  return cases;
}
TEST(CudaGenericOps, ReshapeLike) {
  SKIP_WITHOUT_GPU();
  run_cases(reshape_like_cases());
}

std::vector<Case> strided_copies_cases() {
  std::vector<Case> cases;
  struct T {
    Shape s;
    std::vector<int64_t> perm;  // empty: the default (reversed dims)
    DType t;
  };
  const std::vector<T> transposes = {
      {{2, 3, 4}, {}, DType::kFloat32},
      {{2, 3, 4, 5}, {0, 2, 3, 1}, DType::kFloat32},
      {{2, 16, 24, 40}, {0, 2, 3, 1}, DType::kFloat32},
      {{2, 24, 40, 16}, {0, 3, 1, 2}, DType::kFloat32},
      {{1, 32, 33, 17}, {0, 3, 2, 1}, DType::kFloat32},
      {{64, 65}, {1, 0}, DType::kFloat32},
      {{3, 40, 50}, {2, 1, 0}, DType::kInt8},
      {{2, 3, 2, 3, 2, 3}, {5, 4, 3, 2, 1, 0}, DType::kFloat32},
      {{2, 64, 33, 35}, {0, 2, 3, 1}, DType::kFloat32},
      {{9, 70}, {1, 0}, DType::kInt64},
      {{1, 1, 5, 1}, {3, 2, 1, 0}, DType::kFloat32},
      {{0, 3, 4}, {1, 2, 0}, DType::kFloat32},
      {{3, 300, 9}, {1, 0, 2}, DType::kFloat32},
      {{2, 3, 4, 5, 6, 7, 8}, {6, 0, 5, 1, 4, 2, 3}, DType::kFloat32},
  };
  for (const T& t : transposes) {
    AttrMap a;
    if (!t.perm.empty()) a.set("perm", t.perm);
    cases.push_back(
        mk("Transpose_" + shape_str(t.s) + "_" + dtype_name(t.t), OpType::Transpose, {typed(t.s, t.t, -9, 9)}, a));
  }
  // Slice: clamped bounds, negative steps, empty results, the opset-9 attribute form.
  cases.push_back(
      mk("Slice_axes", OpType::Slice, {data({5, 6, 7}), cst_i64({1, -5}), cst_i64({4, 100}), cst_i64({0, 2})}));
  cases.push_back(mk("Slice_neg_step", OpType::Slice,
                     {data({5, 6, 7}), cst_i64({-1}), cst_i64({-100}), cst_i64({1}), cst_i64({-2})}));
  cases.push_back(mk("Slice_step3", OpType::Slice,
                     {data({5, 16, 7}), cst_i64({0, 1}), cst_i64({16, 7}), cst_i64({1, 2}), cst_i64({3, 2})}));
  cases.push_back(mk("Slice_empty", OpType::Slice, {data({5, 6}), cst_i64({4}), cst_i64({2}), cst_i64({0})}));
  cases.push_back(mk("Slice_i64", OpType::Slice, {typed({10}, DType::kInt64), cst_i64({-3}), cst_i64({1000})}));
  cases.push_back(mk("Slice_big", OpType::Slice,
                     {data({2, 64, 33, 35}), cst_i64({0, 1}), cst_i64({64, 34}), cst_i64({1, 3}), cst_i64({2, 1})}));
  Case s9 = mk("Slice_opset9", OpType::Slice, {data({4, 8})},
               attrs({{"starts", Is({1, 2})}, {"ends", Is({3, -1})}, {"axes", Is({0, 1})}}));
  s9.opset = 9;
  cases.push_back(s9);
  // Expand, DepthToSpace, SpaceToDepth.
  cases.push_back(mk("Expand", OpType::Expand, {data({3, 1}), cst_i64({2, 3, 4})}));
  cases.push_back(mk("Expand_scalar", OpType::Expand, {data({1}), cst_i64({5, 5})}));
  cases.push_back(mk("Expand_mid", OpType::Expand, {typed({2, 1, 6}, DType::kInt64), cst_i64({2, 4, 6})}));
  cases.push_back(mk("Expand_big", OpType::Expand, {data({64, 1, 35}), cst_i64({2, 64, 33, 35})}));
  cases.push_back(mk("DepthToSpace_DCR", OpType::DepthToSpace, {data({1, 8, 3, 5})}, attrs({{"blocksize", I(2)}})));
  cases.push_back(mk("DepthToSpace_CRD", OpType::DepthToSpace, {data({2, 18, 3, 4})},
                     attrs({{"blocksize", I(3)}, {"mode", S("CRD")}})));
  cases.push_back(mk("SpaceToDepth", OpType::SpaceToDepth, {data({2, 3, 4, 6})}, attrs({{"blocksize", I(2)}})));
  cases.push_back(mk("SpaceToDepth_crd", OpType::SpaceToDepth, {data({2, 3, 4, 6})},
                     attrs({{"blocksize", I(2)}, {"mode", S("CRD")}})));
  return cases;
}
TEST(CudaGenericOps, StridedCopies) {
  SKIP_WITHOUT_GPU();
  run_cases(strided_copies_cases());
}

std::vector<Case> concat_split_gather_tile_cases() {
  std::vector<Case> cases;
  cases.push_back(
      mk("Concat_axis1", OpType::Concat, {data({2, 3, 4}), data({2, 5, 4}), data({2, 1, 4})}, attrs({{"axis", I(1)}})));
  cases.push_back(mk("Concat_axis0", OpType::Concat, {data({2, 3}), data({4, 3})}, attrs({{"axis", I(0)}})));
  cases.push_back(
      mk("Concat_last", OpType::Concat, {data({2, 3, 3}), data({2, 3, 1}), data({2, 3, 5})}, attrs({{"axis", I(-1)}})));
  cases.push_back(mk("Concat_empty_part", OpType::Concat, {data({2, 0, 4}), data({2, 3, 4})}, attrs({{"axis", I(1)}})));
  cases.push_back(mk("Concat_i64", OpType::Concat, {typed({3}, DType::kInt64), typed({2}, DType::kInt64)},
                     attrs({{"axis", I(0)}})));
  cases.push_back(mk("Concat_i8_odd", OpType::Concat, {typed({3, 3, 5}, DType::kInt8), typed({3, 2, 5}, DType::kInt8)},
                     attrs({{"axis", I(1)}})));
  cases.push_back(
      mk("Concat_big", OpType::Concat, {data({2, 64, 33, 35}), data({2, 16, 33, 35})}, attrs({{"axis", I(1)}})));
  Case split = mk("Split_input", OpType::Split, {data({6, 4}), cst_i64({2, 4})}, attrs({{"axis", I(0)}}));
  split.outputs = 2;
  cases.push_back(split);
  Case split3 = mk("Split_equal", OpType::Split, {data({2, 9, 5})}, attrs({{"axis", I(1)}}));
  split3.outputs = 3;
  cases.push_back(split3);
  Case split_last =
      mk("Split_last_i8", OpType::Split, {typed({4, 7}, DType::kInt8), cst_i64({3, 0, 4})}, attrs({{"axis", I(-1)}}));
  split_last.outputs = 3;
  cases.push_back(split_last);
  Case split_big = mk("Split_big", OpType::Split, {data({2, 64, 33, 35}), cst_i64({10, 54})}, attrs({{"axis", I(1)}}));
  split_big.outputs = 2;
  cases.push_back(split_big);
  // Gather: negative indices, each axis, scalar index, int32 indices.
  Tensor idx(DType::kInt64, {2, 3});
  const int64_t iv[] = {0, -1, 2, 1, -3, 0};
  for (int i = 0; i < 6; ++i) idx.data<int64_t>()[i] = iv[i];
  for (int64_t axis : {0, 1, 2, -1}) {
    cases.push_back(mk("Gather_axis" + std::to_string(axis), OpType::Gather, {data({5, 4, 3}), given(idx)},
                       attrs({{"axis", I(axis)}})));
  }
  Tensor one = Tensor::scalar_i64(-2);
  cases.push_back(mk("Gather_scalar", OpType::Gather, {data({5, 4}), given(one, true)}, attrs({{"axis", I(0)}})));
  cases.push_back(mk("Gather_i32", OpType::Gather, {typed({6, 5}, DType::kInt64), typed({7}, DType::kInt32, -6, 5)},
                     attrs({{"axis", I(0)}})));
  cases.push_back(mk("Gather_big", OpType::Gather, {data({2, 64, 33, 35}), typed({5}, DType::kInt64, -33, 32)},
                     attrs({{"axis", I(2)}})));
  cases.push_back(mk("Gather_rows", OpType::Gather, {data({100, 64}), typed({30}, DType::kInt64, 0, 99)}));
  // Tile.
  cases.push_back(mk("Tile", OpType::Tile, {data({2, 3}), cst_i64({2, 3})}));
  cases.push_back(mk("Tile_3d", OpType::Tile, {typed({1, 4, 1}, DType::kInt8), cst_i64({3, 1, 2})}));
  cases.push_back(mk("Tile_zero", OpType::Tile, {data({2, 3}), cst_i64({0, 3})}));
  cases.push_back(mk("Tile_big", OpType::Tile, {data({1, 64, 33, 35}), cst_i64({2, 1, 1, 1})}));
  return cases;
}
TEST(CudaGenericOps, ConcatSplitGatherTile) {
  SKIP_WITHOUT_GPU();
  run_cases(concat_split_gather_tile_cases());
}

std::vector<Case> pad_and_precomputed_cases() {
  std::vector<Case> cases;
  const std::vector<int64_t> pads4 = {0, 0, 1, 2, 0, 0, 2, 1};
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    cases.push_back(
        mk(std::string("Pad_") + mode, OpType::Pad, {data({1, 3, 5, 6}), cst_i64(pads4)}, attrs({{"mode", S(mode)}})));
    cases.push_back(mk(std::string("Pad_crop_") + mode, OpType::Pad, {data({2, 4, 7}), cst_i64({0, -1, 3, 0, 2, -2})},
                       attrs({{"mode", S(mode)}})));
    cases.push_back(mk(std::string("Pad_big_") + mode, OpType::Pad, {data({2, 64, 33, 35}), cst_i64(pads4)},
                       attrs({{"mode", S(mode)}})));
  }
  cases.push_back(mk("Pad_value", OpType::Pad, {data({3, 4}), cst_i64({1, 1, 2, 0}), scalar_f32(2.5f)}));
  cases.push_back(mk("Pad_i64", OpType::Pad, {typed({3, 4}, DType::kInt64), cst_i64({1, 0, 0, 3})}));
  cases.push_back(mk("Pad_axes", OpType::Pad, {data({3, 4, 5}), cst_i64({1, 2, 3, 4}), none(), cst_i64({0, 2})}));
  Case p2 = mk("Pad_opset2", OpType::Pad, {data({3, 4})}, attrs({{"pads", Is({0, 1, 2, 3})}, {"value", F(-1.5f)}}));
  p2.opset = 2;
  cases.push_back(p2);
  cases.push_back(mk("Pad_empty_axis", OpType::Pad, {data({0, 3}), cst_i64({1, 0, 1, 0})}));
  // Outputs known when the kernel is created.
  cases.push_back(mk("Shape", OpType::Shape, {data({2, 3, 4})}));
  cases.push_back(mk("Shape_slice", OpType::Shape, {data({2, 3, 4, 5})}, attrs({{"start", I(1)}, {"end", I(-1)}})));
  cases.push_back(mk("Size", OpType::Size, {data({2, 3, 4})}));
  cases.push_back(mk("ConstantOfShape", OpType::ConstantOfShape, {cst_i64({2, 3})}));
  Case r =
      mk("Range", OpType::Range,
         {given(Tensor::scalar_i64(2), true), given(Tensor::scalar_i64(11), true), given(Tensor::scalar_i64(3), true)});
  cases.push_back(r);
  cases.push_back(mk("EyeLike", OpType::EyeLike, {data({4, 6})}, attrs({{"k", I(1)}})));
  return cases;
}
TEST(CudaGenericOps, PadAndPrecomputed) {
  SKIP_WITHOUT_GPU();
  run_cases(pad_and_precomputed_cases());
}

// ================================================================ pooling, resize

std::vector<Case> pooling_cases() {
  std::vector<Case> cases;
  struct P {
    std::string name;
    Shape s;
    AttrMap a;
  };
  const std::vector<P> windows = {
      {"k3s2p1",
       {1, 3, 9, 10},
       attrs({{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}})},
      {"ceil", {1, 2, 10, 11}, attrs({{"kernel_shape", Is({3, 2})}, {"strides", Is({2, 2})}, {"ceil_mode", I(1)}})},
      {"dil",
       {2, 2, 11, 12},
       attrs({{"kernel_shape", Is({2, 3})}, {"dilations", Is({2, 2})}, {"pads", Is({1, 0, 2, 1})}})},
      {"1d", {2, 3, 17}, attrs({{"kernel_shape", Is({4})}, {"strides", Is({3})}, {"pads", Is({1, 2})}})},
      {"3d", {1, 2, 5, 6, 7}, attrs({{"kernel_shape", Is({2, 3, 2})}, {"strides", Is({1, 2, 2})}})},
      {"same_upper",
       {1, 3, 7, 8},
       attrs({{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"auto_pad", S("SAME_UPPER")}})},
      {"same_lower", {1, 3, 7, 8}, attrs({{"kernel_shape", Is({2, 2})}, {"auto_pad", S("SAME_LOWER")}})},
      {"big", {2, 64, 33, 35}, attrs({{"kernel_shape", Is({3, 3})}, {"pads", Is({1, 1, 1, 1})}})},
      {"k5", {1, 4, 20, 20}, attrs({{"kernel_shape", Is({5, 5})}, {"pads", Is({2, 2, 2, 2})}})},  // YOLO SPPF
  };
  for (const P& w : windows) {
    cases.push_back(mk("MaxPool_" + w.name, OpType::MaxPool, {data(w.s)}, w.a));
    cases.push_back(mk("AveragePool_" + w.name, OpType::AveragePool, {data(w.s)}, w.a));
    AttrMap inc = w.a;
    inc.set("count_include_pad", I(1));
    cases.push_back(mk("AveragePool_incpad_" + w.name, OpType::AveragePool, {data(w.s)}, inc));
  }
  // MaxPool ties (integer-valued data), Indices in both storage orders, int8 data.
  const AttrMap k3 = attrs({{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}});
  cases.push_back(mk("MaxPool_ties", OpType::MaxPool, {ints_f({1, 3, 9, 10}, -1, 1)}, k3));
  Case ind = mk("MaxPool_indices", OpType::MaxPool, {data({2, 3, 9, 10})}, k3);
  ind.outputs = 2;
  cases.push_back(ind);
  AttrMap k3c = k3;
  k3c.set("storage_order", I(1));
  Case indc = mk("MaxPool_indices_colmajor", OpType::MaxPool, {data({2, 3, 9, 10})}, k3c);
  indc.outputs = 2;
  cases.push_back(indc);
  cases.push_back(mk("MaxPool_int8", OpType::MaxPool, {typed({1, 4, 9, 10}, DType::kInt8, -128, 127)}, k3));
  cases.push_back(mk("MaxPool_uint8", OpType::MaxPool, {typed({1, 4, 9, 10}, DType::kUInt8, 0, 255)}, k3));
  for (int64_t p : {1, 2, 3}) {
    cases.push_back(mk("LpPool_p" + std::to_string(p), OpType::LpPool, {data({1, 3, 8, 9})},
                       attrs({{"kernel_shape", Is({2, 3})}, {"strides", Is({2, 1})}, {"p", I(p)}})));
  }
  // Global pools: warp per plane (small planes) and block per plane (large ones).
  for (const Shape& s :
       std::vector<Shape>{{2, 5, 7, 9}, {1, 3, 80, 80}, {2, 3}, {2, 3, 1}, {2, 64, 33, 35}, {1, 2, 4, 5, 6}}) {
    cases.push_back(mk("GlobalAveragePool_" + shape_str(s), OpType::GlobalAveragePool, {data(s)}));
    cases.push_back(mk("GlobalMaxPool_" + shape_str(s), OpType::GlobalMaxPool, {data(s)}));
  }
  cases.push_back(mk("GlobalMaxPool_int8", OpType::GlobalMaxPool, {typed({2, 3, 70, 70}, DType::kInt8, -128, 127)}));
  return cases;
}
TEST(CudaGenericOps, Pooling) {
  SKIP_WITHOUT_GPU();
  run_cases(pooling_cases());
}

std::vector<Case> resize_cases() {
  std::vector<Case> cases;
  auto scales = [](std::vector<float> v) { return cst_f32({static_cast<int64_t>(v.size())}, v, true); };
  const std::vector<const char*> coords = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                           "tf_half_pixel_for_nn", "half_pixel_symmetric"};
  const std::vector<const char*> nearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  for (const char* cm : coords) {
    for (const char* nm : nearest) {
      cases.push_back(mk(std::string("Resize_nearest_") + cm + "_" + nm, OpType::Resize,
                         {data({1, 3, 5, 7}), none(), scales({1, 1, 1.7f, 0.6f})},
                         attrs({{"coordinate_transformation_mode", S(cm)}, {"nearest_mode", S(nm)}})));
    }
    cases.push_back(mk(std::string("Resize_linear_") + cm, OpType::Resize,
                       {data({2, 3, 5, 7}), none(), scales({1, 1, 2.5f, 0.7f})},
                       attrs({{"mode", S("linear")}, {"coordinate_transformation_mode", S(cm)}})));
    cases.push_back(mk(std::string("Resize_cubic_") + cm, OpType::Resize,
                       {data({1, 2, 6, 5}), none(), scales({1, 1, 1.5f, 2.f})},
                       attrs({{"mode", S("cubic")}, {"coordinate_transformation_mode", S(cm)}})));
  }
  cases.push_back(mk("Resize_nearest_x2", OpType::Resize, {data({1, 16, 20, 20}), none(), scales({1, 1, 2, 2})},
                     attrs({{"coordinate_transformation_mode", S("asymmetric")}, {"nearest_mode", S("floor")}})));
  cases.push_back(mk("Resize_nearest_big", OpType::Resize, {data({2, 64, 33, 35}), none(), scales({1, 1, 2, 2})}));
  cases.push_back(mk("Resize_sizes", OpType::Resize, {data({1, 3, 5, 7}), none(), none(), cst_i64({1, 3, 9, 4})}));
  cases.push_back(mk("Resize_linear_sizes", OpType::Resize, {data({1, 3, 5, 7}), none(), none(), cst_i64({2, 3, 9, 4})},
                     attrs({{"mode", S("linear")}})));
  cases.push_back(mk("Resize_bilinear_big", OpType::Resize, {data({2, 64, 33, 35}), none(), scales({1, 1, 2, 2})},
                     attrs({{"mode", S("linear")}})));
  cases.push_back(mk("Resize_cubic_exclude", OpType::Resize, {data({1, 2, 6, 5}), none(), scales({1, 1, 1.5f, 0.8f})},
                     attrs({{"mode", S("cubic")}, {"exclude_outside", I(1)}, {"cubic_coeff_a", F(-0.5f)}})));
  cases.push_back(mk("Resize_linear_3d", OpType::Resize, {data({4, 5, 6}), none(), scales({1.5f, 0.5f, 2.f})},
                     attrs({{"mode", S("linear")}})));
  In roi = cst_f32({8}, {0, 0, 0.2f, 0.1f, 1, 1, 0.9f, 1.2f}, true);
  cases.push_back(
      mk("Resize_crop_nearest", OpType::Resize, {data({1, 2, 6, 7}), roi, scales({1, 1, 1.5f, 1.5f})},
         attrs({{"coordinate_transformation_mode", S("tf_crop_and_resize")}, {"extrapolation_value", F(-3.f)}})));
  cases.push_back(mk("Resize_crop_linear", OpType::Resize, {data({1, 2, 6, 7}), roi, scales({1, 1, 1.5f, 1.5f})},
                     attrs({{"mode", S("linear")},
                            {"coordinate_transformation_mode", S("tf_crop_and_resize")},
                            {"extrapolation_value", F(-3.f)}})));
  // Opset 18: antialiased shrinking (wider taps), axes, and sizes fitted with keep_aspect_ratio_policy.
  for (const char* mode : {"linear", "cubic"}) {
    cases.push_back(mk(std::string("Resize_antialias_") + mode, OpType::Resize,
                       {data({1, 3, 17, 23}), none(), scales({1, 1, 0.3f, 0.6f})},
                       attrs({{"mode", S(mode)}, {"antialias", I(1)}})));
  }
  cases.push_back(mk("Resize_axes_not_larger", OpType::Resize, {data({1, 3, 10, 20}), none(), none(), cst_i64({7, 9})},
                     attrs({{"mode", S("linear")}, {"axes", AttrValue(std::vector<int64_t>{2, 3})},
                            {"keep_aspect_ratio_policy", S("not_larger")}})));
  cases.push_back(mk("Resize_int8_nearest", OpType::Resize,
                     {typed({1, 4, 5, 6}, DType::kInt8, -128, 127), none(), scales({1, 1, 2, 2})}));
  Case up9 = mk("Upsample_opset9", OpType::Upsample, {data({1, 2, 3, 4}), scales({1, 1, 2, 3})});
  up9.opset = 9;
  cases.push_back(up9);
  Case up7 = mk("Upsample_opset7_linear", OpType::Upsample, {data({1, 2, 3, 4})},
                attrs({{"scales", Fs({1, 1, 2, 2})}, {"mode", S("linear")}}));
  up7.opset = 7;
  cases.push_back(up7);
  Case r10 = mk("Resize_opset10_shrink", OpType::Resize, {data({1, 2, 9, 8}), scales({1, 1, 0.5f, 0.4f})});
  r10.opset = 10;
  cases.push_back(r10);
  return cases;
}
TEST(CudaGenericOps, Resize) {
  SKIP_WITHOUT_GPU();
  run_cases(resize_cases());
}

// ================================================================ softmax, reductions, normalization

std::vector<Case> softmax_cases() {
  std::vector<Case> cases;
  struct S {
    Shape s;
    int64_t axis;
    int opset;
  };
  const std::vector<S> shapes = {{{4, 10}, -1, 13},        {{3, 5, 2000}, -1, 13}, {{2, 3000}, 1, 13},
                                 {{2, 7, 5, 3}, 1, 13},    {{2, 3, 4}, 1, 11},     {{2, 3, 4}, 0, 11},
                                 {{8400, 85}, -1, 13},     {{1}, 0, 13},           {{0, 5}, -1, 13},
                                 {{2, 64, 33, 35}, 1, 13}, {{5, 9000}, -1, 13}};
  for (OpType op : {OpType::Softmax, OpType::LogSoftmax, OpType::Hardmax}) {
    for (const S& s : shapes) {
      Case c = mk(std::string(op_name(op)) + "_" + shape_str(s.s) + "_axis" + std::to_string(s.axis) + "_opset" +
                      std::to_string(s.opset),
                  op, {data(s.s, -4, 4)}, attrs({{"axis", I(s.axis)}}));
      c.opset = s.opset;
      if (op == OpType::Hardmax) c.in[0].integers = true;  // ties: the first maximum wins
      cases.push_back(c);
    }
  }
  return cases;
}
TEST(CudaGenericOps, Softmax) {
  SKIP_WITHOUT_GPU();
  run_cases(softmax_cases());
}

std::vector<Case> reduce_cases() {
  struct R {
    OpType op;
    double lo, hi;
  };
  const std::vector<R> ops = {{OpType::ReduceSum, -1, 1},       {OpType::ReduceMean, -1, 1},
                              {OpType::ReduceMax, -1, 1},       {OpType::ReduceMin, -1, 1},
                              {OpType::ReduceProd, 0.7, 1.3},   {OpType::ReduceL1, -1, 1},
                              {OpType::ReduceL2, -1, 1},        {OpType::ReduceLogSum, 0.1, 1},
                              {OpType::ReduceLogSumExp, -3, 3}, {OpType::ReduceSumSquare, -1, 1}};
  struct A {
    Shape s;
    std::vector<int64_t> axes;  // empty: all
    int64_t keep;
  };
  const std::vector<A> geoms = {{{2, 3, 4, 5}, {1}, 1},    {{2, 3, 4, 5}, {0, 2}, 0}, {{2, 3, 4, 5}, {}, 1},
                                {{2, 3, 4, 5}, {-1}, 0},   {{2, 3, 4, 5}, {2, 3}, 1}, {{2, 64, 33, 35}, {2, 3}, 1},
                                {{2, 64, 33, 35}, {1}, 0}, {{1, 3, 160, 160}, {}, 0}, {{7}, {0}, 1},
                                {{0, 3}, {0}, 1},          {{4, 1, 5}, {1}, 0},       {{3, 200}, {1}, 1}};
  std::vector<Case> cases;
  for (const R& r : ops) {
    for (const A& g : geoms) {
      const bool big = numel(g.s) > 100000;
      if (r.op == OpType::ReduceProd && big) continue;  // a product of 10^5 factors under/overflows
      AttrMap a = attrs({{"keepdims", I(g.keep)}});
      if (!g.axes.empty()) a.set("axes", g.axes);
      Case c = mk(std::string(op_name(r.op)) + "_" + shape_str(g.s) + "_axes" + std::to_string(g.axes.size()) + "_k" +
                      std::to_string(g.keep),
                  r.op, {data(g.s, r.lo, r.hi)}, a);
      c.opset = 11;             // axes as an attribute for every Reduce*
      if (big) c.tol32 = 3e-5;  // fp32 sums of 10^5 terms (the reference sums in double)
      cases.push_back(c);
    }
  }
  // ReduceSum from opset 13: axes as a constant input; none with noop_with_empty_axes.
  cases.push_back(mk("ReduceSum13_axes_input", OpType::ReduceSum, {data({2, 3, 4}), cst_i64({0, -1})},
                     attrs({{"keepdims", I(0)}})));
  cases.push_back(mk("ReduceSum13_all", OpType::ReduceSum, {data({2, 3, 4})}));
  cases.push_back(
      mk("ReduceSum13_noop", OpType::ReduceSum, {data({2, 3, 4})}, attrs({{"noop_with_empty_axes", I(1)}})));
  cases.push_back(mk("ReduceMax_nan", OpType::ReduceMax,
                     {given(Tensor::from_f32({2, 3}, {1.f, NAN, 2.f, 3.f, 4.f, -1.f}))}, attrs({{"axes", Is({1})}})));
  // Integer reductions.
  for (DType t : {DType::kInt32, DType::kInt64}) {
    for (OpType op : {OpType::ReduceSum, OpType::ReduceMean, OpType::ReduceMax, OpType::ReduceMin, OpType::ReduceProd,
                      OpType::ReduceSumSquare, OpType::ReduceL1}) {
      Case c = mk(std::string(op_name(op)) + "_" + dtype_name(t), op, {typed({3, 4, 5}, t, -4, 4)},
                  attrs({{"axes", Is({1})}, {"keepdims", I(0)}}));
      c.opset = 11;
      cases.push_back(c);
    }
  }
  return cases;
}
TEST(CudaGenericOps, Reduce) {
  SKIP_WITHOUT_GPU();
  run_cases(reduce_cases());
}

std::vector<Case> arg_min_max_cases() {
  std::vector<Case> cases;
  for (OpType op : {OpType::ArgMax, OpType::ArgMin}) {
    for (int64_t last : {0, 1}) {
      for (int64_t axis : {0, 1, -1}) {
        for (int64_t keep : {0, 1}) {
          cases.push_back(mk(std::string(op_name(op)) + "_axis" + std::to_string(axis) + "_last" +
                                 std::to_string(last) + "_k" + std::to_string(keep),
                             op, {ints_f({4, 6, 5}, -3, 3)},
                             attrs({{"axis", I(axis)}, {"keepdims", I(keep)}, {"select_last_index", I(last)}})));
        }
      }
      cases.push_back(mk(std::string(op_name(op)) + "_i64_last" + std::to_string(last), op,
                         {typed({5, 7}, DType::kInt64, -3, 3)},
                         attrs({{"axis", I(1)}, {"select_last_index", I(last)}})));
    }
    cases.push_back(mk(std::string(op_name(op)) + "_big", op, {data({2, 64, 33, 35})}, attrs({{"axis", I(1)}})));
    cases.push_back(mk(std::string(op_name(op)) + "_int8", op, {typed({3, 100}, DType::kInt8, -128, 127)},
                       attrs({{"axis", I(1)}})));
    cases.push_back(mk(std::string(op_name(op)) + "_empty", op, {data({0, 4})}, attrs({{"axis", I(1)}})));
  }
  return cases;
}
TEST(CudaGenericOps, ArgMinMax) {
  SKIP_WITHOUT_GPU();
  run_cases(arg_min_max_cases());
}

std::vector<Case> normalization_cases() {
  std::vector<Case> cases;
  auto bn = [](const std::string& name, Shape x, Shape p, int opset, AttrMap a = {}) {
    Case c = mk(name, OpType::BatchNormalization,
                {data(x, -2, 2), data(p, 0.5, 1.5), data(p), data(p), data(p, 0.5, 2)}, std::move(a));
    c.opset = opset;
    return c;
  };
  cases.push_back(bn("BatchNorm_4d", {2, 3, 4, 5}, {3}, 15));
  cases.push_back(bn("BatchNorm_1x1", {1, 16, 1, 1}, {16}, 15));
  cases.push_back(bn("BatchNorm_2d", {4, 6}, {6}, 15));
  cases.push_back(bn("BatchNorm_big", {2, 64, 33, 35}, {64}, 15, attrs({{"epsilon", F(1e-3f)}})));
  cases.push_back(bn("BatchNorm_spatial0", {2, 3, 4, 5}, {3, 4, 5}, 7, attrs({{"spatial", I(0)}})));
  cases.push_back(bn("BatchNorm_empty", {0, 3, 4}, {3}, 15));
  for (const Shape& s : std::vector<Shape>{{2, 3, 4, 5}, {1, 8, 64, 70}, {2, 4, 3}, {3, 2, 1}}) {
    cases.push_back(mk("InstanceNorm_" + shape_str(s), OpType::InstanceNormalization,
                       {data(s, -2, 3), data({s[1]}, 0.5, 1.5), data({s[1]})}, attrs({{"epsilon", F(1e-4f)}})));
  }
  // GroupNormalization: per-channel affine (opset 21) and per-group (opset 18); rows short (warp) and long (block).
  for (const Shape& s : std::vector<Shape>{{2, 6, 4, 5}, {1, 32, 40, 40}, {3, 4, 7}}) {
    for (int opset : {18, 21}) {
      const int64_t groups = s[1] / 2, n = opset == 18 ? groups : s[1];
      Case c = mk("GroupNorm_opset" + std::to_string(opset) + "_" + shape_str(s), OpType::GroupNormalization,
                  {data(s, -2, 3), data({n}, 0.5, 1.5), data({n})}, attrs({{"num_groups", I(groups)}}));
      c.opset = opset;
      cases.push_back(c);
    }
  }
  struct L {
    Shape x, scale, bias;  // empty bias: omitted
    int64_t axis;
  };
  const std::vector<L> ln = {{{4, 10}, {10}, {10}, -1},       {{2, 3, 4, 5}, {3, 4, 5}, {3, 4, 5}, 1},
                             {{2, 3, 5}, {5}, {}, -1},        {{2, 3, 5}, {3, 5}, {5}, -1},
                             {{3, 2000}, {2000}, {2000}, -1}, {{2, 64, 33, 35}, {35}, {35}, -1},
                             {{6, 7}, {1, 7}, {7}, -1},       {{2, 8, 300}, {8, 300}, {300}, 1}};
  for (const L& l : ln) {
    Case c = mk("LayerNorm_" + shape_str(l.x) + "_s" + shape_str(l.scale) + "_axis" + std::to_string(l.axis),
                OpType::LayerNormalization,
                {data(l.x, -2, 3), data(l.scale, 0.5, 1.5), l.bias.empty() ? none() : data(l.bias)},
                attrs({{"axis", I(l.axis)}}));
    cases.push_back(c);
  }
  Case stats = mk("LayerNorm_stats", OpType::LayerNormalization, {data({5, 6, 7}, -2, 3), data({7}), data({7})});
  stats.outputs = 3;
  stats.f32_outputs = {1, 2};
  cases.push_back(stats);
  Case stats_empty = mk("LayerNorm_stats_empty", OpType::LayerNormalization, {data({5, 0}), data({0}), data({0})});
  stats_empty.outputs = 3;
  stats_empty.f32_outputs = {1, 2};
  cases.push_back(stats_empty);
  return cases;
}
TEST(CudaGenericOps, Normalization) {
  SKIP_WITHOUT_GPU();
  run_cases(normalization_cases());
}

// ================================================================ matmul, convolution

std::vector<Case> mat_mul_gemm_cases() {
  std::vector<Case> cases;
  const std::vector<std::pair<Shape, Shape>> mm = {{{3, 4}, {4, 5}},
                                                   {{2, 3, 4}, {4, 5}},
                                                   {{4}, {4, 5}},
                                                   {{3, 4}, {4}},
                                                   {{4}, {4}},
                                                   {{2, 1, 3, 4}, {5, 4, 6}},
                                                   {{65, 130}, {130, 70}},
                                                   {{3, 0}, {0, 4}},
                                                   {{3, 1, 5, 6}, {1, 4, 6, 2}},
                                                   {{8, 128, 96}, {96, 64}},
                                                   {{1, 1}, {1, 1}},
                                                   {{0, 3, 4}, {4, 2}},
                                                   {{2, 300, 17}, {2, 17, 33}}};
  for (const auto& [a, b] : mm) {
    cases.push_back(mk("MatMul_" + shape_str(a) + "_" + shape_str(b), OpType::MatMul, {data(a), data(b)}));
  }
  for (int64_t ta : {0, 1}) {
    for (int64_t tb : {0, 1}) {
      const Shape as = ta ? Shape{53, 37} : Shape{37, 53};
      const Shape bs = tb ? Shape{29, 53} : Shape{53, 29};
      const std::string n = "Gemm_t" + std::to_string(ta) + std::to_string(tb);
      const AttrMap a = attrs({{"transA", I(ta)}, {"transB", I(tb)}, {"alpha", F(0.7f)}, {"beta", F(-1.3f)}});
      cases.push_back(mk(n + "_C_mn", OpType::Gemm, {data(as), data(bs), data({37, 29})}, a));
      cases.push_back(mk(n + "_C_n", OpType::Gemm, {data(as), data(bs), data({29})}, a));
      cases.push_back(mk(n + "_C_m1", OpType::Gemm, {data(as), data(bs), data({37, 1})}, a));
      cases.push_back(mk(n + "_C_1", OpType::Gemm, {data(as), data(bs), data({1})}, a));
      cases.push_back(
          mk(n + "_noC", OpType::Gemm, {data(as), data(bs)}, attrs({{"transA", I(ta)}, {"transB", I(tb)}})));
    }
  }
  cases.push_back(
      mk("Gemm_fc", OpType::Gemm, {data({8, 1280}), data({1000, 1280}), data({1000})}, attrs({{"transB", I(1)}})));
  for (Case& c : cases) c.tol16 = 3e-3;  // fp16 operands: each product carries two roundings
  return cases;
}
TEST(CudaGenericOps, MatMulGemm) {
  SKIP_WITHOUT_GPU();
  run_cases(mat_mul_gemm_cases());
}

std::vector<Case> conv_cases() {
  std::vector<Case> cases;
  auto conv = [&](const std::string& name, Shape x, Shape w, AttrMap a, bool bias = true) {
    std::vector<In> in = {data(x), data(w, -0.5, 0.5)};
    if (bias) in.push_back(data({w[0]}));
    cases.push_back(mk("Conv_" + name, OpType::Conv, in, std::move(a)));
  };
  conv("k3p1", {1, 3, 8, 9}, {4, 3, 3, 3}, attrs({{"pads", Is({1, 1, 1, 1})}}));
  conv("s2", {2, 3, 9, 10}, {5, 3, 3, 3}, attrs({{"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}));
  conv("dil2", {1, 4, 11, 12}, {3, 4, 3, 3}, attrs({{"dilations", Is({2, 2})}, {"pads", Is({2, 1, 2, 1})}}));
  conv("group2", {1, 4, 7, 7}, {6, 2, 3, 3}, attrs({{"group", I(2)}, {"pads", Is({1, 1, 1, 1})}}));
  conv("depthwise", {2, 8, 9, 10}, {8, 1, 3, 3}, attrs({{"group", I(8)}, {"pads", Is({1, 1, 1, 1})}}));
  conv("depthwise_s2", {1, 16, 20, 21}, {16, 1, 5, 5},
       attrs({{"group", I(16)}, {"strides", Is({2, 2})}, {"pads", Is({2, 2, 2, 2})}}));
  conv("multiplier", {1, 4, 6, 6}, {8, 1, 3, 3}, attrs({{"group", I(4)}}));
  conv("1d", {2, 3, 20}, {5, 3, 4}, attrs({{"strides", Is({2})}, {"pads", Is({1, 2})}}));
  conv("nobias", {1, 3, 8, 8}, {4, 3, 3, 3}, attrs({}), false);
  conv("same_upper", {1, 3, 8, 9}, {4, 3, 3, 3}, attrs({{"auto_pad", S("SAME_UPPER")}, {"strides", Is({2, 2})}}));
  conv("pointwise", {2, 16, 10, 10}, {32, 16, 1, 1}, attrs({}));
  conv("asym_pads", {1, 3, 7, 8}, {2, 3, 2, 3}, attrs({{"pads", Is({0, 1, 2, 0})}}));
  conv("big", {1, 32, 40, 40}, {64, 32, 3, 3}, attrs({{"pads", Is({1, 1, 1, 1})}}));
  conv("wide_k", {1, 2, 9, 30}, {3, 2, 1, 7}, attrs({{"pads", Is({0, 3, 0, 3})}}));
  auto tconv = [&](const std::string& name, Shape x, Shape w, AttrMap a, bool bias = true) {
    const int64_t g = a.has("group") ? *a.get_int("group") : 1;
    std::vector<In> in = {data(x), data(w, -0.5, 0.5)};
    if (bias) in.push_back(data({w[1] * g}));
    cases.push_back(mk("ConvTranspose_" + name, OpType::ConvTranspose, in, std::move(a)));
  };
  tconv("k2s2", {1, 4, 5, 6}, {4, 3, 2, 2}, attrs({{"strides", Is({2, 2})}}));
  tconv("k3s2p1op1", {2, 3, 5, 5}, {3, 2, 3, 3},
        attrs({{"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}, {"output_padding", Is({1, 1})}}));
  tconv("group2", {1, 4, 5, 5}, {4, 2, 3, 3}, attrs({{"group", I(2)}}));
  tconv("dil2", {1, 2, 4, 5}, {2, 3, 3, 2}, attrs({{"dilations", Is({2, 2})}}), false);
  tconv("1d", {1, 2, 7}, {2, 3, 3}, attrs({{"strides", Is({2})}}));
  tconv("output_shape", {1, 2, 4, 4}, {2, 2, 3, 3}, attrs({{"strides", Is({2, 2})}, {"output_shape", Is({8, 9})}}));
  tconv("big", {1, 32, 20, 20}, {32, 16, 2, 2}, attrs({{"strides", Is({2, 2})}}));
  for (Case& c : cases) c.tol16 = 3e-3;
  return cases;
}
TEST(CudaGenericOps, Conv) {
  SKIP_WITHOUT_GPU();
  run_cases(conv_cases());
}

// ================================================================ quantization

Tensor scalar_of(DType t, double v) {
  Tensor s(t, {});
  s.set_f64(0, v);
  return s;
}
Tensor vector_of(DType t, const std::vector<double>& v) {
  Tensor s(t, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) s.set_f64(static_cast<int64_t>(i), v[i]);
  return s;
}

std::vector<Case> quantize_cases() {
  std::vector<Case> cases;
  const DType i8 = DType::kInt8, u8 = DType::kUInt8;
  cases.push_back(mk("Q_int8", OpType::QuantizeLinear,
                     {data({2, 3, 4, 5}, -3, 3), scalar_f32(0.02f), given(scalar_of(i8, 3), true)}));
  cases.push_back(mk("Q_uint8_no_zp", OpType::QuantizeLinear, {data({7, 9}, -1, 3), scalar_f32(0.01f)}));
  cases.push_back(mk("Q_uint8_zp", OpType::QuantizeLinear,
                     {data({kBig}, -1, 3), scalar_f32(0.013f), given(scalar_of(u8, 128), true)}));
  cases.push_back(mk("Q_per_axis1", OpType::QuantizeLinear,
                     {data({2, 4, 3, 3}, -2, 2), cst_f32({4}, {0.01f, 0.02f, 0.005f, 0.1f}),
                      given(vector_of(i8, {0, -3, 5, 1}), true)}));
  cases.push_back(mk("Q_per_axis0", OpType::QuantizeLinear,
                     {data({6, 3, 3, 3}, -1, 1), cst_f32({6}, {0.01f, 0.02f, 0.005f, 0.1f, 0.03f, 0.004f})},
                     attrs({{"axis", I(0)}})));
  // Ties at .5 round to even: x = k / 4 with scale 0.5 gives q = k / 2.
  Tensor ties(DType::kFloat32, {41});
  for (int64_t i = 0; i < 41; ++i) ties.data<float>()[i] = static_cast<float>(i - 20) * 0.25f;
  cases.push_back(mk("Q_ties", OpType::QuantizeLinear, {given(ties), scalar_f32(0.5f), given(scalar_of(i8, 0), true)}));
  cases.push_back(mk("Q_nan", OpType::QuantizeLinear,
                     {given(Tensor::from_f32({3}, {NAN, 1.f, -1.f})), scalar_f32(0.1f), given(scalar_of(u8, 7), true)}));
  cases.push_back(mk("DQ_int8", OpType::DequantizeLinear,
                     {typed({3, 4, 5}, i8, -128, 127), scalar_f32(0.02f), given(scalar_of(i8, -3), true)}));
  cases.push_back(mk("DQ_uint8", OpType::DequantizeLinear, {typed({kBig}, u8, 0, 255), scalar_f32(0.013f)}));
  cases.push_back(mk("DQ_int32_bias", OpType::DequantizeLinear,
                     {typed({64}, DType::kInt32, -100000, 100000), cst_f32({64}, std::vector<float>(64, 1e-4f))},
                     attrs({{"axis", I(0)}})));
  cases.push_back(mk("DQ_per_axis", OpType::DequantizeLinear,
                     {typed({2, 4, 3, 3}, i8, -128, 127), cst_f32({4}, {0.01f, 0.02f, 0.005f, 0.1f}),
                      given(vector_of(i8, {0, -3, 5, 1}), true)}));
  return cases;
}
TEST(CudaGenericOps, Quantize) {
  SKIP_WITHOUT_GPU();
  run_cases(quantize_cases());
}

// ================================================================ the harness can fail; unsupported cases

// Every case's kernel can be created: the factories' reading of attributes, constants and specs, checked on every
// machine (uploads of index tables fail without a GPU and are accepted then).
TEST(CudaGenericOps, EveryCaseHasAKernel) {
  for (auto* list : {unary_cases, clip_not_and_integer_unary_cases, cast_cases, binary_cases, variadic_and_where_cases,
                     reshape_like_cases, strided_copies_cases, concat_split_gather_tile_cases,
                     pad_and_precomputed_cases, pooling_cases, resize_cases, softmax_cases, reduce_cases,
                     arg_min_max_cases, normalization_cases, mat_mul_gemm_cases, conv_cases,
                     quantize_cases}) {
    for (const Case& c : list()) {
      for (int half = 0; half < 2; ++half) {
        if (half && (!c.fp16 || !has_float_data(c))) continue;
        EXPECT_EQ(run_case(c, half != 0, false, nullptr, true), "") << c.name << (half ? " [fp16]" : " [fp32]");
      }
    }
  }
}

// A wrong kernel must fail the comparison: here Relu's kernel is checked against Sigmoid's reference, and a mismatched
// shape must not pass either.
TEST(CudaGenericOps, HarnessDetectsWrongResults) {
  SKIP_WITHOUT_GPU();
  const Case relu = mk("self_check", OpType::Relu, {data({4, 5})});
  const Case sigmoid = mk("self_check_ref", OpType::Sigmoid, {});
  EXPECT_EQ(run_case(relu, false, false), "");
  EXPECT_NE(run_case(relu, false, false, &sigmoid), "");
  EXPECT_NE(run_case(relu, true, false, &sigmoid), "");
  Tensor a = Tensor::from_f32({2}, {1.f, 2.f}), b = Tensor::from_f32({2}, {1.f, 2.0001f}),
         c = Tensor::from_f32({1, 2}, {1.f, 2.f});
  EXPECT_FALSE(compare(a, b, 1e-5, "x").ok);
  EXPECT_FALSE(compare(a, c, 1e-5, "x").ok);
  EXPECT_TRUE(compare(a, a, 0, "x").ok);
}

// Unsupported ops and types come back as kUnsupported naming the op and the node, before any device work (so this
// runs on machines without a GPU too).
TEST(CudaGenericOps, UnsupportedCasesAreReported) {
  struct U {
    std::string name;
    OpType op;
    std::vector<TensorSpec> in, out;
    AttrMap a;
  };
  const TensorSpec f32{DType::kFloat32, {2, 3}}, f64{DType::kFloat64, {2, 3}}, i32{DType::kInt32, {2, 3}};
  std::vector<TensorSpec> nine(9, f32);
  const std::vector<U> cases = {
      {"topk", OpType::TopK, {f32, {DType::kInt64, {1}}}, {f32, {DType::kInt64, {2, 3}}}, {}},
      {"einsum", OpType::Einsum, {f32}, {f32}, attrs({{"equation", S("ij->ji")}})},
      {"lrn",
       OpType::LRN,
       {{DType::kFloat32, {1, 3, 4, 4}}},
       {{DType::kFloat32, {1, 3, 4, 4}}},
       attrs({{"size", I(3)}})},
      {"exp_int32", OpType::Exp, {i32}, {i32}, {}},
      {"add_float64", OpType::Add, {f64, f64}, {f64}, {}},
      {"cast_to_float64", OpType::Cast, {f32}, {f64}, attrs({{"to", I(11)}})},
      {"sum_9_inputs", OpType::Sum, nine, {f32}, {}},
      {"conv_int8",
       OpType::Conv,
       {{DType::kInt8, {1, 3, 5, 5}}, {DType::kInt8, {2, 3, 3, 3}}},
       {{DType::kInt8, {1, 2, 3, 3}}},
       {}},
      {"resize_linear_int8",
       OpType::Resize,
       {{DType::kInt8, {1, 1, 2, 2}}, {}, {DType::kFloat32, {4}}},
       {{DType::kInt8, {1, 1, 4, 4}}},
       attrs({{"mode", S("linear")}})},
      {"softmax_int32", OpType::Softmax, {i32}, {i32}, {}},
      {"transpose_rank10",
       OpType::Transpose,
       {{DType::kFloat32, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2}}},
       {{DType::kFloat32, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2}}},
       attrs({{"perm", Is({1, 0, 3, 2, 5, 4, 7, 6, 9, 8})}})},
      {"matmul_int32", OpType::MatMul, {i32, {DType::kInt32, {3, 2}}}, {{DType::kInt32, {2, 2}}}, {}},
  };
  for (const U& u : cases) {
    Graph g;
    Node n;
    n.name = u.name;
    n.op = u.op;
    n.opset = 17;
    n.attrs = u.a;
    std::vector<TensorSpec> in = u.in;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].dtype == DType::kUndefined) {
        n.inputs.push_back(-1);
        continue;
      }
      const int id = g.add_value(u.name + "_in" + std::to_string(i));
      if (u.op == OpType::Resize && i == 2) g.constants[id] = Tensor::from_f32({4}, {1, 1, 2, 2});
      n.inputs.push_back(id);
    }
    for (size_t o = 0; o < u.out.size(); ++o) n.outputs.push_back(g.add_value(u.name + "_out" + std::to_string(o)));
    g.nodes.push_back(n);
    auto k = cuda::make_generic_kernel(g, g.nodes[0], in, u.out);
    ASSERT_FALSE(k.has_value()) << u.name;
    EXPECT_EQ(k.status().code(), StatusCode::kUnsupported) << u.name << ": " << k.status().to_string();
    EXPECT_EQ(k.status().node(), u.name);
    EXPECT_NE(k.status().to_string().find(op_name(u.op)), std::string::npos) << k.status().to_string();
  }
}

}  // namespace
}  // namespace qd
