// Fused ops (ops/fused.h): FusedConv's and MaxPoolChain's attributes, inference and reference kernels.
#include "ops/fused.h"

#include <cmath>

#include "ops/common.h"
#include "ops/window.h"

namespace qd::ops {

namespace {
constexpr const char* kActNames[] = {"None",      "Relu",        "Silu", "Sigmoid", "LeakyRelu",
                                     "HardSwish", "HardSigmoid", "Clip"};
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

const char* activation_name(Activation a) { return kActNames[static_cast<int>(a)]; }

Expected<Activation> activation_from_name(const std::string& s) {
  for (int i = 0; i < static_cast<int>(std::size(kActNames)); ++i) {
    if (s == kActNames[i]) return static_cast<Activation>(i);
  }
  return invalid("unknown activation '" + s +
                 "' (one of None, Relu, Silu, Sigmoid, LeakyRelu, HardSwish, HardSigmoid, Clip)");
}

Expected<FusedConvAttrs> fused_conv_attrs(const Node& n) {
  FusedConvAttrs a;
  a.act = QD_TRY(activation_from_name(QD_TRY(n.attrs.get_string("activation", "None"))));
  a.alpha = QD_TRY(n.attrs.get_float("alpha", 0.f));
  a.beta = QD_TRY(n.attrs.get_float("beta", 0.f));
  a.residual = n.inputs.size() > 3 && n.inputs[3] >= 0;
  if (auto it = n.attrs.all().find("fused"); it != n.attrs.all().end()) {
    const auto* names = std::get_if<std::vector<std::string>>(&it->second);
    if (!names) return invalid("FusedConv's attribute 'fused' must be a list of strings");
    a.fused = *names;
  }
  return a;
}

void set_fused_conv_attrs(Node& n, const FusedConvAttrs& a) {
  n.attrs.set("activation", std::string(activation_name(a.act)));
  n.attrs.set("alpha", a.alpha);
  n.attrs.set("beta", a.beta);
  n.attrs.set("fused", a.fused);
}

Expected<bool> clip_constant_bounds(const Graph& g, const Node& n, float* lo, float* hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (n.opset < 11) {
    *lo = QD_TRY(n.attrs.get_float("min", -INFINITY));
    *hi = QD_TRY(n.attrs.get_float("max", INFINITY));
  }
  for (size_t k = 1; k < 3 && k < n.inputs.size(); ++k) {
    if (n.inputs[k] < 0) continue;
    const Tensor* c = g.constant(n.inputs[k]);
    if (!c || c->dtype() != DType::kFloat32 || c->numel() != 1) return false;
    (k == 1 ? *lo : *hi) = c->data<float>()[0];
  }
  return true;
}

float activate(Activation a, float xf, float alpha, float beta) {
  const double x = xf;
  switch (a) {
    case Activation::kNone: return xf;
    case Activation::kRelu: return static_cast<float>(x > 0 ? x : 0.0);
    case Activation::kSilu: return xf * static_cast<float>(sigmoid(x));
    case Activation::kSigmoid: return static_cast<float>(sigmoid(x));
    case Activation::kLeakyRelu: return static_cast<float>(x >= 0 ? x : static_cast<double>(alpha) * x);
    case Activation::kHardSwish: return static_cast<float>(x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)));
    case Activation::kHardSigmoid:
      return static_cast<float>(std::max(0.0, std::min(1.0, static_cast<double>(alpha) * x + beta)));
    case Activation::kClip: {
      const double up = x < alpha ? static_cast<double>(alpha) : x;
      return static_cast<float>(up > beta ? static_cast<double>(beta) : up);
    }
  }
  return xf;
}

Status infer_FusedConv(InferCtx& c) {
  QD_RETURN_IF_ERROR(fused_conv_attrs(c.node).status());
  QD_RETURN_IF_ERROR(infer_Conv(c));
  if (c.has_input(3) && (c.dtype(3) != c.out_dtype(0) || c.shape(3) != c.out_shape(0))) {
    return invalid("FusedConv's residual must have the output's type and shape " + shape_str(c.out_shape(0)) +
                   ", got " + shape_str(c.shape(3)));
  }
  return Status::ok();
}

Status run_FusedConv(KernelCtx& c) {
  const FusedConvAttrs a = QD_TRY(fused_conv_attrs(c.node));
  QD_RETURN_IF_ERROR(run_Conv(c));
  if (c.out[0]->dtype() != DType::kFloat32) return unsupported("FusedConv computes in float32 only");
  float* y = c.out[0]->data<float>();
  const float* r = a.residual ? c.in[3]->data<float>() : nullptr;
  for (int64_t i = 0, n = c.out[0]->numel(); i < n; ++i) {
    y[i] = activate(a.act, y[i], a.alpha, a.beta);
    if (r) y[i] += r[i];
  }
  return Status::ok();
}

std::vector<std::string> fused_names(const Node& n) {
  const auto it = n.attrs.all().find("fused");
  if (it == n.attrs.all().end()) return {};
  const auto* names = std::get_if<std::vector<std::string>>(&it->second);
  return names ? *names : std::vector<std::string>{};
}

Expected<std::vector<int64_t>> same_size_pool_window(const Node& m, const Shape& x) {
  const std::vector<int64_t> none;
  if (m.op != OpType::MaxPool && m.op != OpType::MaxPoolChain) return none;
  if (x.size() != 4 || QD_TRY(m.attrs.get_int("ceil_mode", 0)) != 0) return none;
  const std::vector<int64_t> k = QD_TRY(m.attrs.get_ints("kernel_shape", none));
  if (k.size() != 2 || k[0] % 2 == 0 || k[1] % 2 == 0) return none;
  Window win = QD_TRY(read_window(m.attrs, 2, k));
  const std::vector<int64_t> o = QD_TRY(window_output({x[2], x[3]}, &win, false));
  const bool same = win.strides[0] == 1 && win.strides[1] == 1 && win.dilations[0] == 1 && win.dilations[1] == 1 &&
                    o[0] == x[2] && o[1] == x[3] && win.pads[0] == k[0] / 2 && win.pads[1] == k[1] / 2 &&
                    win.pads[2] == k[0] / 2 && win.pads[3] == k[1] / 2;
  return same ? k : none;
}

Status infer_MaxPoolChain(InferCtx& c) {
  if (QD_TRY(same_size_pool_window(c.node, c.shape(0))).empty()) {
    return invalid("MaxPoolChain needs a 4-d input and a size-keeping window (odd kernel, stride 1, (k - 1) / 2 pads)");
  }
  if (!is_float(c.dtype(0))) return invalid("MaxPoolChain pools float tensors");
  for (size_t k = 0; k < c.node.outputs.size(); ++k) c.set_output(static_cast<int>(k), c.dtype(0), c.shape(0));
  return Status::ok();
}

Status run_MaxPoolChain(KernelCtx& c) {
  const Tensor* x = c.in[0];
  for (Tensor* y : c.out) {
    KernelCtx one{c.node, {x}, {y}};  // the node carries MaxPool's window attributes
    QD_RETURN_IF_ERROR(run_MaxPool(one));
    x = y;
  }
  return Status::ok();
}

}  // namespace qd::ops
