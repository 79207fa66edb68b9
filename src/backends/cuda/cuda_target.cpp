#include "backends/cuda/cuda_target.h"

#include "ops/fused.h"
#include "ops/op.h"
#include "ops/op_traits.h"
#include "ops/plugin_registry.h"

namespace qd::cuda {

namespace {

constexpr const char* kTraits = "src/ops/ops.def (cuda trait)";
constexpr const char* kConvs = "src/backends/cuda/lower_conv.cpp";
constexpr const char* kMovement = "src/backends/cuda/lower_movement.cpp";
constexpr const char* kHead = "src/backends/cuda/lower_head.cpp";
constexpr const char* kPlugins = "include/qdeploy/plugin.h (OpDef::cuda_kernels)";

// An attribute, or `def` when it is absent or malformed (the build reports malformed ones with the node).
int64_t attr_int(const Node& n, const char* name, int64_t def) {
  const auto v = n.attrs.get_int(name, def);
  return v ? *v : def;
}
std::string attr_string(const Node& n, const char* name, const char* def) {
  const auto v = n.attrs.get_string(name, std::string(def));
  return v ? *v : def;
}

// A conv's weights as the tensor-core layers take them: a constant 4-d float tensor.
const Tensor* conv_weights(const Graph& g, const Node& n) {
  const Tensor* w = n.inputs.size() > 1 && n.inputs[1] >= 0 ? g.constant(n.inputs[1]) : nullptr;
  return w && w->dtype() == DType::kFloat32 && w->shape().size() == 4 ? w : nullptr;
}

Support conv(const Graph& g, const Node& n, const NodeFormats& f) {
  const Tensor* w = conv_weights(g, n);
  const int64_t group = attr_int(n, "group", 1);
  if (f.has(TensorPrecision::kInt8)) {
    if (!w) return Support::no("INT8 convs need constant 4-d float weights", kConvs);
    return Support::ok(group == 1 ? "INT8 tensor-core conv, NHWC" : "INT8 grouped conv (conv_grouped_i8)", kConvs);
  }
  if (f.has(TensorPrecision::kFp16)) {
    if (!w) return Support::no("fp16 convs need constant 4-d float weights (others run the generic fp32 kernel)", kConvs);
    return Support::ok(group == 1 ? "fp16 tensor-core conv, NHWC" : "fp16 grouped conv (conv_grouped_f16), NHWC", kConvs);
  }
  return Support::ok(n.op == OpType::FusedConv ? "generic fp32 conv with the fused epilogue" : "", kTraits);
}

// A nearest Resize by integer factors of H and W whose coordinates map output x to input floor(x / f), as
// lower_movement.cpp's UpsampleLayer computes: asymmetric + floor, or half_pixel + round_prefer_floor/ceil.
bool integer_nearest_upsample(const Graph& g, const Node& n) {
  if (attr_string(n, "mode", "nearest") != "nearest" || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.empty() ||
      n.outputs[0] < 0) {
    return false;
  }
  const std::string ctm = attr_string(n, "coordinate_transformation_mode", "half_pixel");
  const std::string nm = attr_string(n, "nearest_mode", "round_prefer_floor");
  const bool half = ctm == "half_pixel" || ctm == "pytorch_half_pixel";
  if (!(ctm == "asymmetric" && nm == "floor") && !(half && (nm == "round_prefer_floor" || nm == "round_prefer_ceil"))) {
    return false;
  }
  const Shape &is = g.values[n.inputs[0]].shape, &os = g.values[n.outputs[0]].shape;
  return is.size() == 4 && os.size() == 4 && is[0] == os[0] && is[1] == os[1] && is[2] > 0 && is[3] > 0 &&
         os[2] % is[2] == 0 && os[3] % is[3] == 0;
}

// MaxPool, Resize and channel Concats have NHWC layers in fp16, and in int8 where a Concat feeds INT8 convs.
Support movement(const Graph& g, const Node& n, const NodeFormats& f) {
  const bool int8 = f.has(TensorPrecision::kInt8);
  if (!int8 && !f.has(TensorPrecision::kFp16)) return Support::ok({}, kTraits);
  for (int v : n.op == OpType::Concat ? n.inputs : std::vector<int>{n.inputs.empty() ? -1 : n.inputs[0]}) {
    if (v < 0 || g.values[v].shape.size() != 4 || g.values[v].shape[1] % 8 != 0) {
      return Support::no("NHWC layers take 4-d tensors with a multiple of 8 channels", kMovement);
    }
  }
  if (n.op == OpType::Concat) {
    const int64_t axis = attr_int(n, "axis", 0);
    if (axis != 1 && axis != -3) return Support::no("NHWC Concats join channels (axis 1)", kMovement);
  }
  if (n.op == OpType::Resize && !integer_nearest_upsample(g, n)) {
    return Support::no("NHWC Resize is nearest-neighbour upsampling by an integer factor (floor mapping)", kMovement);
  }
  return Support::ok(int8 ? "in int8 where the Concat it feeds is read by INT8 convs only" : "NHWC fp16 layer",
                     kMovement);
}

}  // namespace

bool cuda_pool_chain_fits(int C, int H, int W) {
  return C % 16 == 0 && 2 * static_cast<int64_t>(H) * W * 16 <= 48 * 1024;
}

bool broadcast_terms(const Shape& xs, const Shape& cs, BroadcastTerms* t) {
  if (cs.size() > xs.size()) return false;
  const size_t lead = xs.size() - cs.size();
  int terms = 0;
  int64_t inner_x = 1, inner_c = 1;  // products of the dims after d, in x and in c
  bool in_run = false;
  for (size_t d = xs.size(); d-- > 0;) {
    const int64_t cd = d >= lead ? cs[d - lead] : 1;
    if (cd != 1 && cd != xs[d]) return false;
    const bool kept = cd == xs[d] && xs[d] > 1;
    if (kept && !in_run) {
      if (terms == 2) return false;
      t->div[terms] = inner_x;
      t->mul[terms] = inner_c;
      t->mod[terms] = 1;
      ++terms;
    }
    if (kept) t->mod[terms - 1] *= xs[d];
    if (xs[d] > 1) in_run = kept;
    inner_x *= xs[d];
    inner_c *= cd;
  }
  return true;
}

namespace {

bool slice_concat_fits(const Graph& g, const Node& f) {
  const auto a = ops::slice_concat_attrs(f);
  if (!a || a->segments.size() > static_cast<size_t>(kCudaMaxSliceSegments)) return false;
  for (const ops::SliceConcatSegment& s : a->segments) {
    if (s.steps.size() > static_cast<size_t>(kCudaMaxEwSteps)) return false;
    Shape slice = g.values[f.inputs[0]].shape;
    slice.back() = s.len;
    int tensors = 0;
    for (const ops::ElementwiseStep& st : s.steps) {
      if (st.operand < 0) continue;
      const Tensor* c = g.constant(f.inputs[st.operand]);
      BroadcastTerms t;
      if (!c || (c->numel() > 1 && (++tensors > kCudaMaxEwOperands || !broadcast_terms(slice, c->shape(), &t)))) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

FusionRules cuda_fusion_rules(Precision p) {
  FusionRules r;
  r.slice_concat = slice_concat_fits;
  if (p == Precision::kFp32) return r;  // fp32 plans pool with the generic kernels
  r.pool_chain = [](const Shape& x, int pools) {
    return x.size() == 4 && pools <= kCudaMaxPoolChain &&
           cuda_pool_chain_fits(static_cast<int>(x[1]), static_cast<int>(x[2]), static_cast<int>(x[3]));
  };
  return r;
}

std::optional<LinearOperands> linear_operands(const Graph& g, const Node& n) {
  if ((n.op != OpType::Gemm && n.op != OpType::MatMul) || n.inputs.size() < 2 || n.inputs[0] < 0) {
    return std::nullopt;
  }
  LinearOperands m;
  m.b = g.constant(n.inputs[1]);
  const Value& x = g.values[n.inputs[0]];
  const Shape& xs = x.shape;
  if (!m.b || m.b->dtype() != DType::kFloat32 || m.b->shape().size() != 2 || x.dtype != DType::kFloat32 ||
      g.is_constant(n.inputs[0])) {
    return std::nullopt;
  }
  if (n.op == OpType::MatMul) {
    if (xs.size() < 2) return std::nullopt;
    m.C = m.b->shape()[0];
    m.K = m.b->shape()[1];
    if (xs.back() != m.C) return std::nullopt;
    m.N = numel(xs) / m.C;
    return m;
  }
  const auto trans_a = n.attrs.get_int("transA", 0), trans_b = n.attrs.get_int("transB", 0);
  const auto alpha = n.attrs.get_float("alpha", 1.f), beta = n.attrs.get_float("beta", 1.f);
  if (xs.size() != 2 || !trans_a || *trans_a != 0 || !trans_b || !alpha || *alpha != 1.f || !beta || *beta != 1.f) {
    return std::nullopt;
  }
  m.trans_b = *trans_b != 0;
  m.C = m.b->shape()[m.trans_b ? 1 : 0];
  m.K = m.b->shape()[m.trans_b ? 0 : 1];
  m.N = xs[0];
  if (m.C != xs[1]) return std::nullopt;
  if (n.inputs.size() < 3 || n.inputs[2] < 0) return m;
  m.bias = g.constant(n.inputs[2]);
  if (!m.bias || m.bias->dtype() != DType::kFloat32 || m.bias->numel() != m.K || m.bias->shape().back() != m.K) {
    return std::nullopt;
  }
  return m;
}

LayoutPlan cuda_layouts(const Graph& g, Precision p, const std::set<std::string>& int8) {
  return plan_layouts(g, CudaTarget(), [&](int i) {
    if (p == Precision::kFp32) return TensorPrecision::kFp32;
    return int8.count(g.nodes[static_cast<size_t>(i)].name) ? TensorPrecision::kInt8 : TensorPrecision::kFp16;
  });
}

std::set<std::string> cuda_int8_nodes(const Graph& g, const std::set<std::string>& plan_int8) {
  std::set<int> conv_inputs;
  for (const Node& n : g.nodes) {
    if (n.op == OpType::Conv && plan_int8.count(n.name)) conv_inputs.insert(n.inputs[0]);
  }
  std::set<std::string> s;
  for (const Node& n : g.nodes) {
    if (!plan_int8.count(n.name)) continue;
    const bool linear = (n.op == OpType::Gemm || n.op == OpType::MatMul) && linear_operands(g, n) &&
                        !conv_inputs.count(n.inputs[0]);
    if (n.op == OpType::Conv || linear) s.insert(n.name);
  }
  return s;
}

bool CudaTarget::writes_onnx_form(const Graph& g, const Node& n) const {
  (void)g;
  return n.op == OpType::Conv || n.op == OpType::FusedConv || n.op == OpType::Gemm || n.op == OpType::MatMul;
}

Support CudaTarget::supports(const Graph& g, const Node& n, const NodeFormats& f) const {
  const std::string op = op_name(n.op);
  if (const PluginOp* p = plugin_op(n.op)) {
    if (p->def.cuda_kernels.empty()) {
      return Support::no(p->qualified + " has no CUDA kernel (its plugin gives a reference only)", kPlugins);
    }
    if (f.has(TensorPrecision::kInt8)) return Support::no("plugin kernels take float tensors", kPlugins);
    std::string names;
    for (const auto& k : p->def.cuda_kernels) names += (names.empty() ? "" : ", ") + k.name;
    return Support::ok("plugin kernels " + names + " (each checks shapes and dtypes when the plan is built)", kPlugins);
  }
  if (n.op == OpType::Conv || n.op == OpType::FusedConv) return conv(g, n, f);
  if (n.op == OpType::MaxPoolChain) {  // made by fuse_pool_chains only where the CUDA rule (lower()) says it fits
    return Support::ok("one NHWC layer for the whole chain (maxpool_chain_nhwc)", kMovement);
  }
  if (n.op == OpType::SliceConcat) {  // made by fuse_slice_concat only where the CUDA rule says it fits
    if (f.has(TensorPrecision::kInt8) || f.has(TensorPrecision::kFp16)) {
      return Support::no("the decode layer reads and writes the ONNX form (a head conv may write it transposed)",
                         kHead);
    }
    return Support::ok("one layer for the whole decode (slice_concat)", kHead);
  }
  if (n.op == OpType::MaxPool || n.op == OpType::Resize || n.op == OpType::Concat) {
    const Support s = movement(g, n, f);
    if (!s.yes) return s;
  } else if ((n.op == OpType::Gemm || n.op == OpType::MatMul) && f.has(TensorPrecision::kInt8)) {
    const auto l = linear_operands(g, n);
    if (!l) {
      return Support::no("INT8 " + op + "s need constant 2-d fp32 weights (a Gemm also a 2-d input, constant bias, "
                         "no transA, alpha = beta = 1)", kConvs);
    }
    return Support::ok("INT8 " + op + " as a 1x1 INT8 conv over its " + std::to_string(l->N) + " rows", kConvs);
  } else if ((n.op == OpType::Gemm || n.op == OpType::MatMul) && f.has(TensorPrecision::kFp16)) {
    const auto l = linear_operands(g, n);
    if (!l || !linear_fp16(*l)) {
      return Support::no(op + " in fp16 needs constant 2-d fp32 weights, a float input whose rows are a multiple of 8 "
                              "values (and for a Gemm: a 2-d input, constant bias, no transA, alpha = beta = 1)",
                         kConvs);
    }
    return Support::ok(op + " as a 1x1 fp16 tensor-core conv over its " + std::to_string(l->N) + " rows", kConvs);
  } else if (f.has(TensorPrecision::kInt8) || f.has(TensorPrecision::kFp16)) {
    return Support::no(op + " runs in its ONNX dtype (fp32 for float tensors); the build converts at its borders",
                       kTraits);
  }
  if (op_traits(n.op).cuda == CudaFamily::kReferenceOnly) {
    return Support::no(op + " has no CUDA kernel (reference only); run the model with --device cpu", kTraits);
  }
  return Support::ok({}, kTraits);
}

}  // namespace qd::cuda
