// Elementwise ops with one input and per-element math (activations and math functions).
#include <cmath>

#include "ops/common.h"

namespace qd::ops {

namespace {

// Applies f to every element (float32/float64 inputs).
template <typename F>
Status map_float(KernelCtx& c, F f) {
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* y = c.out[0]->data<T>();
    const int64_t n = c.in[0]->numel();
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(f(static_cast<double>(x[i])));
    return Status::ok();
  });
}

template <typename F>
Status map_numeric(KernelCtx& c, F f) {
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* y = c.out[0]->data<T>();
    const int64_t n = c.in[0]->numel();
    for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
    return Status::ok();
  });
}

Status infer_float_unary(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  return infer_same_as_input(c);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

Expected<bool> gelu_tanh(const AttrMap& a) {
  const std::string m = QD_TRY(a.get_string("approximate", "none"));
  if (m != "none" && m != "tanh") return invalid("Gelu's approximate must be 'none' or 'tanh', got '" + m + "'");
  return m == "tanh";
}

}  // namespace

// Float math ops without attributes.
#define QD_FLOAT_UNARY(Name, expr)                                        \
  Status infer_##Name(InferCtx& c) { return infer_float_unary(c); }     \
  Status run_##Name(KernelCtx& c) { return map_float(c, [](double x) { return expr; }); }

QD_FLOAT_UNARY(Exp, std::exp(x))
QD_FLOAT_UNARY(Log, std::log(x))
QD_FLOAT_UNARY(Sqrt, std::sqrt(x))
QD_FLOAT_UNARY(Reciprocal, 1.0 / x)
QD_FLOAT_UNARY(Floor, std::floor(x))
QD_FLOAT_UNARY(Ceil, std::ceil(x))
QD_FLOAT_UNARY(Round, std::nearbyint(x))
QD_FLOAT_UNARY(Sigmoid, sigmoid(x))
QD_FLOAT_UNARY(Tanh, std::tanh(x))
QD_FLOAT_UNARY(Relu, x > 0 ? x : 0.0)
QD_FLOAT_UNARY(Softplus, x > 30 ? x : std::log1p(std::exp(x)))
QD_FLOAT_UNARY(Softsign, x / (1.0 + std::fabs(x)))
QD_FLOAT_UNARY(HardSwish, x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)))
QD_FLOAT_UNARY(Erf, std::erf(x))
QD_FLOAT_UNARY(Sin, std::sin(x))
QD_FLOAT_UNARY(Cos, std::cos(x))
QD_FLOAT_UNARY(Tan, std::tan(x))
QD_FLOAT_UNARY(Asin, std::asin(x))
QD_FLOAT_UNARY(Acos, std::acos(x))
QD_FLOAT_UNARY(Atan, std::atan(x))
QD_FLOAT_UNARY(Sinh, std::sinh(x))
QD_FLOAT_UNARY(Cosh, std::cosh(x))
QD_FLOAT_UNARY(Asinh, std::asinh(x))
QD_FLOAT_UNARY(Acosh, std::acosh(x))
QD_FLOAT_UNARY(Atanh, std::atanh(x))
QD_FLOAT_UNARY(Mish, x * std::tanh(x > 30 ? x : std::log1p(std::exp(x))))
#undef QD_FLOAT_UNARY

// Float ops with attributes: the lambda captures the attribute values.
#define QD_FLOAT_UNARY_ATTR(Name, setup, expr)                            \
  Status infer_##Name(InferCtx& c) {                                      \
    const AttrMap& a = c.node.attrs;                                      \
    setup;                                                                \
    return infer_float_unary(c);                                          \
  }                                                                       \
  Status run_##Name(KernelCtx& c) {                                       \
    const AttrMap& a = c.node.attrs;                                      \
    setup;                                                                \
    return map_float(c, [=](double x) { return expr; });                  \
  }

QD_FLOAT_UNARY_ATTR(LeakyRelu, [[maybe_unused]] const double alpha = QD_TRY(a.get_float("alpha", 0.01f)), x >= 0 ? x : alpha * x)
QD_FLOAT_UNARY_ATTR(Elu, [[maybe_unused]] const double alpha = QD_TRY(a.get_float("alpha", 1.0f)), x >= 0 ? x : alpha * std::expm1(x))
QD_FLOAT_UNARY_ATTR(Celu, [[maybe_unused]] const double alpha = QD_TRY(a.get_float("alpha", 1.0f)),
                    std::max(0.0, x) + std::min(0.0, alpha * std::expm1(x / alpha)))
QD_FLOAT_UNARY_ATTR(ThresholdedRelu, [[maybe_unused]] const double alpha = QD_TRY(a.get_float("alpha", 1.0f)), x > alpha ? x : 0.0)
QD_FLOAT_UNARY_ATTR(Selu,
                    [[maybe_unused]] const double alpha = QD_TRY(a.get_float("alpha", 1.67326319217681884765625f));
                    [[maybe_unused]] const double gamma = QD_TRY(a.get_float("gamma", 1.05070102214813232421875f)),
                    x > 0 ? gamma * x : gamma * alpha * std::expm1(x))
// Gelu (opset 20): exact (erf) or, with approximate="tanh", the tanh form.
QD_FLOAT_UNARY_ATTR(Gelu, [[maybe_unused]] const bool tanh_form = QD_TRY(gelu_tanh(a)),
                    tanh_form ? 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
                              : 0.5 * x * (1 + std::erf(x * 0.7071067811865476)))
// Swish (opset 24): x * sigmoid(alpha * x).
QD_FLOAT_UNARY_ATTR(Swish, [[maybe_unused]] const double alpha = QD_TRY(a.get_float("alpha", 1.0f)), x * sigmoid(alpha * x))
QD_FLOAT_UNARY_ATTR(HardSigmoid,
                    [[maybe_unused]] const double alpha = QD_TRY(a.get_float("alpha", 0.2f));
                    [[maybe_unused]] const double beta = QD_TRY(a.get_float("beta", 0.5f)),
                    std::max(0.0, std::min(1.0, alpha * x + beta)))
#undef QD_FLOAT_UNARY_ATTR

// Ops defined for every numeric type.
Status infer_Abs(InferCtx& c) { return infer_same_as_input(c); }
Status run_Abs(KernelCtx& c) {
  return map_numeric(c, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_unsigned_v<T>) return x;
    else return static_cast<T>(x < 0 ? -x : x);
  });
}
Status infer_Neg(InferCtx& c) { return infer_same_as_input(c); }
Status run_Neg(KernelCtx& c) {
  return map_numeric(c, [](auto x) { return static_cast<decltype(x)>(-x); });
}
Status infer_Sign(InferCtx& c) { return infer_same_as_input(c); }
Status run_Sign(KernelCtx& c) {
  return map_numeric(c, [](auto x) { return static_cast<decltype(x)>((x > 0) - (x < 0)); });
}

Status infer_Not(InferCtx& c) {
  if (c.dtype(0) != DType::kBool) return invalid("Not takes a bool tensor");
  return infer_same_as_input(c);
}
Status run_Not(KernelCtx& c) {
  const uint8_t* x = c.in[0]->data<uint8_t>();
  uint8_t* y = c.out[0]->data<uint8_t>();
  for (int64_t i = 0; i < c.in[0]->numel(); ++i) y[i] = !x[i];
  return Status::ok();
}

// Identity-like ops copy their input (Dropout in inference mode also outputs an all-true mask).
Status infer_Identity(InferCtx& c) { return infer_same_as_input(c); }
Status run_Identity(KernelCtx& c) {
  std::memcpy(c.out[0]->raw(), c.in[0]->raw(), c.in[0]->nbytes());
  return Status::ok();
}
Status infer_Dropout(InferCtx& c) {
  if (c.has_input(2) && c.value(2) && c.value(2)->numel() == 1 && c.value(2)->get_i64(0) != 0) {
    return unsupported("Dropout in training mode");
  }
  c.set_output(0, c.dtype(0), c.shape(0));
  if (c.has_output(1)) c.set_output(1, DType::kBool, c.shape(0));
  return Status::ok();
}
Status run_Dropout(KernelCtx& c) {
  std::memcpy(c.out[0]->raw(), c.in[0]->raw(), c.in[0]->nbytes());
  if (c.out.size() > 1 && c.out[1]) std::memset(c.out[1]->raw(), 1, c.out[1]->nbytes());
  return Status::ok();
}

// Clip: bounds are attributes before opset 11 and optional scalar inputs from 11 on.
namespace {
Status clip_bounds(const Node& n, const std::vector<const Tensor*>& values, double* lo, double* hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (n.opset < 11) {
    *lo = QD_TRY(n.attrs.get_float("min", -3.402823e38f));
    *hi = QD_TRY(n.attrs.get_float("max", 3.402823e38f));
    return Status::ok();
  }
  for (size_t i = 1; i <= 2; ++i) {
    if (i < values.size() && values[i]) {
      if (values[i]->numel() != 1) return invalid("Clip's min and max must be scalars");
      (i == 1 ? *lo : *hi) = values[i]->get_f64(0);
    }
  }
  return Status::ok();
}
}  // namespace

Status infer_Clip(InferCtx& c) {
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (c.has_input(i) && numel(c.shape(i)) != 1) return invalid("Clip's min and max must be scalars");
  }
  return infer_same_as_input(c);
}
Status run_Clip(KernelCtx& c) {
  double lo, hi;
  QD_RETURN_IF_ERROR(clip_bounds(c.node, c.in, &lo, &hi));
  return map_numeric(c, [=](auto x) {
    using T = decltype(x);
    // min(max(x, lo), hi): with lo > hi every value becomes hi, as ONNX specifies.
    const double v = static_cast<double>(x);
    const double up = v < lo ? lo : v;
    return static_cast<T>(up > hi ? hi : up);
  });
}

}  // namespace qd::ops
