// make_generic_kernel: checks the specs, builds the node's inference view (constant inputs as values) and hands the
// node to its op family's factory. Also the host helpers the family files share.
#include <algorithm>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernels/generic_families.h"
#include "ops/fused.h"

namespace qd::cuda {

namespace {

using Factory = MadeKernel (*)(const NodeArgs&);

// The factory of each CudaFamily (ops/op_traits.h), in the enum's order; an op's family is its `cuda` trait in ops.def.
constexpr Factory kFamilyFactories[] = {
    nullptr,              // kReferenceOnly
    make_unary,           // kUnary
    make_binary,          // kBinary
    make_variadic,        // kVariadic
    make_where,           // kWhere
    make_copy,            // kCopy
    make_strided,         // kStrided
    make_concat,          // kConcat
    make_split,           // kSplit
    make_gather,          // kGather
    make_tile,            // kTile
    make_pad,             // kPad
    make_precomputed,     // kPrecomputed
    make_pool,            // kPool
    make_global_pool,     // kGlobalPool
    make_resize,          // kResize
    make_softmax,         // kSoftmax
    make_reduce,          // kReduce
    make_argminmax,       // kArgMinMax
    make_batch_norm,      // kBatchNorm
    make_instance_norm,   // kInstanceNorm
    make_group_norm,      // kGroupNorm
    make_layer_norm,      // kLayerNorm
    make_matmul,          // kMatMul
    make_conv,            // kConv
    make_conv_transpose,  // kConvTranspose
    make_quantize,        // kQuantize
};
static_assert(sizeof(kFamilyFactories) / sizeof(kFamilyFactories[0]) == static_cast<size_t>(CudaFamily::kCount),
              "one factory per CudaFamily");

// The family that implements `op`, or nullptr.
Factory factory_for(OpType op) {
  if (op >= OpType::kCount) return nullptr;
  return kFamilyFactories[static_cast<size_t>(op_traits(op).cuda)];
}

}  // namespace

bool has_generic_kernel_family(CudaFamily family) {
  return family < CudaFamily::kCount && kFamilyFactories[static_cast<size_t>(family)] != nullptr;
}

// Checks the specs against the node, then makes its kernel with `make` (which sees the node's arguments).
template <typename Make>
Expected<std::unique_ptr<GenericKernel>> make_checked(const Graph& graph, const Node& node,
                                                      const std::vector<TensorSpec>& inputs,
                                                      const std::vector<TensorSpec>& outputs, const Make& make) {
  const std::string op = node.op < OpType::kCount ? op_name(node.op) : "?";
  auto fail = [&](Status s) { return std::move(s.at_node(node.name, op)); };
  if (inputs.size() != node.inputs.size() || outputs.size() != node.outputs.size()) {
    return fail(internal("make_generic_kernel: " + std::to_string(inputs.size()) + " input and " +
                         std::to_string(outputs.size()) + " output specs for a node with " +
                         std::to_string(node.inputs.size()) + " inputs and " + std::to_string(node.outputs.size()) +
                         " outputs"));
  }
  std::vector<DType> types;
  std::vector<Shape> shapes;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool present = node.inputs[i] >= 0;
    types.push_back(present ? inputs[i].dtype : DType::kUndefined);
    shapes.push_back(present ? inputs[i].shape : Shape{});
    values.push_back(present ? graph.constant(node.inputs[i]) : nullptr);
  }
  for (const TensorSpec& s : outputs) {
    if (!is_static(s.shape)) {
      return fail(internal("make_generic_kernel: output shape " + shape_str(s.shape) + " is not static"));
    }
  }
  const InferCtx ctx(node, std::move(types), std::move(shapes), std::move(values));
  const NodeArgs args{graph, node, inputs, outputs, ctx};
  MadeKernel k = make(args);
  if (!k) return fail(std::move(k).take_status());
  return k;
}

Expected<std::unique_ptr<GenericKernel>> make_generic_kernel(const Graph& graph, const Node& node,
                                                              const std::vector<TensorSpec>& inputs,
                                                              const std::vector<TensorSpec>& outputs) {
  if (node.op == OpType::FusedConv) return make_generic_conv(graph, node, inputs, outputs, QD_TRY(conv_epilogue(node)));
  const Factory f = factory_for(node.op);
  if (!f) {
    const std::string op = node.op < OpType::kCount ? op_name(node.op) : "?";
    return unsupported(op + " has no CUDA kernel").at_node(node.name, op);
  }
  return make_checked(graph, node, inputs, outputs, f);
}

Expected<std::unique_ptr<GenericKernel>> make_generic_conv(const Graph& graph, const Node& node,
                                                            const std::vector<TensorSpec>& inputs,
                                                            const std::vector<TensorSpec>& outputs,
                                                            const ConvEpilogue& epilogue) {
  if (node.op != OpType::Conv && node.op != OpType::FusedConv) {
    return internal("make_generic_conv: node '" + node.name + "' is no Conv");
  }
  return make_checked(graph, node, inputs, outputs, [&](const NodeArgs& a) { return make_conv_fused(a, epilogue); });
}

Expected<ConvEpilogue> conv_epilogue(const Node& node) {
  ConvEpilogue e;
  if (node.op != OpType::FusedConv) return e;
  const ops::FusedConvAttrs f = QD_TRY(ops::fused_conv_attrs(node));
  switch (f.act) {
    case ops::Activation::kNone: e.act = Act::kNone; break;
    case ops::Activation::kRelu: e.act = Act::kRelu; break;
    case ops::Activation::kSilu: e.act = Act::kSilu; break;
    case ops::Activation::kSigmoid: e.act = Act::kSigmoid; break;
    case ops::Activation::kLeakyRelu: e.act = Act::kLeakyRelu; break;
    case ops::Activation::kHardSwish: e.act = Act::kHardSwish; break;
    case ops::Activation::kHardSigmoid: e.act = Act::kHardSigmoid; break;
    case ops::Activation::kClip: e.act = Act::kClip; break;
  }
  e.a = f.act == ops::Activation::kClip ? std::min(f.alpha, f.beta) : f.alpha;
  e.b = f.beta;
  e.residual = f.residual;
  return e;
}

// ---- shared host helpers ----

Status no_kernel(const NodeArgs& a, const std::string& why) {
  return unsupported(std::string(op_name(a.node.op)) + " on CUDA: " + why);
}

Status no_kernel_dtype(const NodeArgs& a, DType t, const char* what) {
  return no_kernel(a, std::string(what) + " of type " + dtype_name(t) + " is not supported");
}

bool is_float_storage(DType t) { return t == DType::kFloat32 || t == DType::kFloat16; }

DimsStrides coalesce(DimsStrides v) {
  const size_t ops = v.strides.size();
  DimsStrides r;
  r.strides.resize(ops);
  for (int64_t d : v.dims) {
    if (d == 0) {  // empty: nothing to walk
      r.dims = {0};
      for (auto& s : r.strides) s = {0};
      return r;
    }
  }
  for (size_t d = 0; d < v.dims.size(); ++d) {
    if (v.dims[d] == 1) continue;  // its coordinate is always 0
    bool merge = !r.dims.empty();
    for (size_t k = 0; merge && k < ops; ++k) merge = r.strides[k].back() == v.strides[k][d] * v.dims[d];
    if (merge) {
      r.dims.back() *= v.dims[d];
      for (size_t k = 0; k < ops; ++k) r.strides[k].back() = v.strides[k][d];
    } else {
      r.dims.push_back(v.dims[d]);
      for (size_t k = 0; k < ops; ++k) r.strides[k].push_back(v.strides[k][d]);
    }
  }
  if (r.dims.empty()) {  // a single element
    r.dims = {1};
    for (auto& s : r.strides) s = {0};
  }
  return r;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  const size_t off = out.size() - in.size();
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    st[i + off] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return st;
}

int64_t volume(const Shape& s) {
  // Zero dims first: the other dims of an empty tensor may multiply past int64.
  for (int64_t d : s) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

}  // namespace qd::cuda
