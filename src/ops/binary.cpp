// Elementwise ops over broadcast inputs: arithmetic, comparison, logic, Where, variadic Max/Min/Sum/Mean.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/common.h"

namespace qd::ops {

namespace {

// y[i] = f(a[ia], b[ib]) over the broadcast of a and b.
template <typename In, typename Out, typename F>
void broadcast_apply(const Tensor& a, const Tensor& b, Tensor& y, F f) {
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  Out* py = y.data<Out>();
  const int64_t n = y.numel();
  if (a.shape() == y.shape() && b.shape() == y.shape()) {
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], pb[i]);
  } else if (a.shape() == y.shape() && b.numel() == 1) {
    const In vb = pb[0];
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], vb);
  } else {
    BroadcastIndex ia(a.shape(), y.shape()), ib(b.shape(), y.shape());
    for (int64_t i = 0; i < n; ++i, ia.next(), ib.next()) py[i] = f(pa[ia.index()], pb[ib.index()]);
  }
}

template <typename F>
Status arith(KernelCtx& c, F f) {
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    broadcast_apply<T, T>(*c.in[0], *c.in[1], *c.out[0], [&](T x, T y) { return static_cast<T>(f(x, y)); });
    return Status::ok();
  });
}

template <typename F>
Status compare(KernelCtx& c, F f) {
  const DType t = c.in[0]->dtype();
  if (t == DType::kBool) {
    broadcast_apply<uint8_t, uint8_t>(*c.in[0], *c.in[1], *c.out[0], [&](uint8_t x, uint8_t y) { return f(x, y); });
    return Status::ok();
  }
  return dispatch_numeric(t, [&](auto tag) {
    using T = decltype(tag);
    broadcast_apply<T, uint8_t>(*c.in[0], *c.in[1], *c.out[0], [&](T x, T y) -> uint8_t { return f(x, y); });
    return Status::ok();
  });
}

Status infer_arith(InferCtx& c) {
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  return infer_broadcast(c);
}
Status infer_compare(InferCtx& c) {
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  return infer_broadcast(c, DType::kBool);
}
Status infer_logic(InferCtx& c) {
  if (c.dtype(0) != DType::kBool || c.dtype(1) != DType::kBool) return invalid("inputs must be bool");
  return infer_broadcast(c, DType::kBool);
}

template <typename T>
T int_div(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0) return 0;  // defined here instead of trapping; ONNX leaves it undefined
    if constexpr (std::is_signed_v<T>) {
      if (x == std::numeric_limits<T>::min() && y == T(-1)) return x;
    }
  }
  return x / y;
}

}  // namespace

Status infer_Add(InferCtx& c) { return infer_arith(c); }
Status run_Add(KernelCtx& c) { return arith(c, [](auto x, auto y) { return x + y; }); }
Status infer_Sub(InferCtx& c) { return infer_arith(c); }
Status run_Sub(KernelCtx& c) { return arith(c, [](auto x, auto y) { return x - y; }); }
Status infer_Mul(InferCtx& c) { return infer_arith(c); }
Status run_Mul(KernelCtx& c) { return arith(c, [](auto x, auto y) { return x * y; }); }
Status infer_Div(InferCtx& c) { return infer_arith(c); }
Status run_Div(KernelCtx& c) { return arith(c, [](auto x, auto y) { return int_div(x, y); }); }

Status infer_Pow(InferCtx& c) { return infer_broadcast(c); }
Status run_Pow(KernelCtx& c) {
  // Exponent may have another type than the base: convert it elementwise to double.
  const Tensor exp_d = c.in[1]->cast(DType::kFloat64);
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Tensor base_d = c.in[0]->cast(DType::kFloat64);
    Tensor tmp(DType::kFloat64, c.out[0]->shape());
    broadcast_apply<double, double>(base_d, exp_d, tmp, [](double x, double y) { return std::pow(x, y); });
    for (int64_t i = 0; i < tmp.numel(); ++i) {
      const double v = tmp.data<double>()[i];
      T& out = c.out[0]->data<T>()[i];
      if constexpr (std::is_integral_v<T>) {
        // Saturate: converting a power beyond T (or a NaN) is undefined. max() as a double may round up (2^63).
        constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
        constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
        out = std::isnan(v) ? T(0) : v <= lo ? std::numeric_limits<T>::lowest()
                                   : v < hi  ? static_cast<T>(v) : std::numeric_limits<T>::max();
      } else {
        out = static_cast<T>(v);
      }
    }
    return Status::ok();
  });
}

Status infer_Mod(InferCtx& c) { return infer_arith(c); }
Status run_Mod(KernelCtx& c) {
  const bool fmod = QD_TRY(c.node.attrs.get_int("fmod", 0)) != 0;
  return arith(c, [fmod](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      const T r = std::fmod(x, y);
      if (fmod) return r;
      return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
    } else {
      if (y == 0) return T(0);
      const T r = static_cast<T>(x % y);
      if constexpr (std::is_signed_v<T>) {
        if (!fmod && r != 0 && ((r < 0) != (y < 0))) return static_cast<T>(r + y);
      }
      return r;
    }
  });
}

Status infer_PRelu(InferCtx& c) { return infer_arith(c); }
Status run_PRelu(KernelCtx& c) {
  return arith(c, [](auto x, auto slope) { return x < 0 ? x * slope : x; });
}

Status infer_Equal(InferCtx& c) { return infer_compare(c); }
Status run_Equal(KernelCtx& c) { return compare(c, [](auto x, auto y) { return x == y; }); }
Status infer_Less(InferCtx& c) { return infer_compare(c); }
Status run_Less(KernelCtx& c) { return compare(c, [](auto x, auto y) { return x < y; }); }
Status infer_LessOrEqual(InferCtx& c) { return infer_compare(c); }
Status run_LessOrEqual(KernelCtx& c) { return compare(c, [](auto x, auto y) { return x <= y; }); }
Status infer_Greater(InferCtx& c) { return infer_compare(c); }
Status run_Greater(KernelCtx& c) { return compare(c, [](auto x, auto y) { return x > y; }); }
Status infer_GreaterOrEqual(InferCtx& c) { return infer_compare(c); }
Status run_GreaterOrEqual(KernelCtx& c) { return compare(c, [](auto x, auto y) { return x >= y; }); }

Status infer_And(InferCtx& c) { return infer_logic(c); }
Status run_And(KernelCtx& c) { return compare(c, [](auto x, auto y) { return x && y; }); }
Status infer_Or(InferCtx& c) { return infer_logic(c); }
Status run_Or(KernelCtx& c) { return compare(c, [](auto x, auto y) { return x || y; }); }
Status infer_Xor(InferCtx& c) { return infer_logic(c); }
Status run_Xor(KernelCtx& c) { return compare(c, [](auto x, auto y) { return (x != 0) != (y != 0); }); }

// Variadic ops fold their inputs pairwise into the output.
namespace {
template <typename F>
Status variadic(KernelCtx& c, F f, bool mean) {
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor& y = *c.out[0];
    {
      BroadcastIndex i0(c.in[0]->shape(), y.shape());
      for (int64_t i = 0; i < y.numel(); ++i, i0.next()) y.data<T>()[i] = c.in[0]->data<T>()[i0.index()];
    }
    for (size_t k = 1; k < c.in.size(); ++k) {
      BroadcastIndex ik(c.in[k]->shape(), y.shape());
      for (int64_t i = 0; i < y.numel(); ++i, ik.next()) {
        y.data<T>()[i] = static_cast<T>(f(y.data<T>()[i], c.in[k]->data<T>()[ik.index()]));
      }
    }
    if (mean) {
      for (int64_t i = 0; i < y.numel(); ++i) y.data<T>()[i] = static_cast<T>(y.data<T>()[i] / static_cast<T>(c.in.size()));
    }
    return Status::ok();
  });
}
template <typename T>
T nan_max(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x > y ? x : y;
}
template <typename T>
T nan_min(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x < y ? x : y;
}
}  // namespace

Status infer_Max(InferCtx& c) { return infer_arith(c); }
Status run_Max(KernelCtx& c) { return variadic(c, [](auto x, auto y) { return nan_max(x, y); }, false); }
Status infer_Min(InferCtx& c) { return infer_arith(c); }
Status run_Min(KernelCtx& c) { return variadic(c, [](auto x, auto y) { return nan_min(x, y); }, false); }
Status infer_Sum(InferCtx& c) { return infer_arith(c); }
Status run_Sum(KernelCtx& c) { return variadic(c, [](auto x, auto y) { return x + y; }, false); }
Status infer_Mean(InferCtx& c) { return infer_arith(c); }
Status run_Mean(KernelCtx& c) { return variadic(c, [](auto x, auto y) { return x + y; }, true); }

Status infer_Where(InferCtx& c) {
  if (c.dtype(0) != DType::kBool) return invalid("Where's condition must be bool");
  if (c.dtype(1) != c.dtype(2)) return invalid("Where's X and Y must have the same type");
  Shape s = QD_TRY(broadcast_shapes(c.shape(0), c.shape(1)));
  s = QD_TRY(broadcast_shapes(s, c.shape(2)));
  c.set_output(0, c.dtype(1), s);
  return Status::ok();
}
Status run_Where(KernelCtx& c) {
  Tensor& y = *c.out[0];
  const size_t es = dtype_size(y.dtype());
  BroadcastIndex ic(c.in[0]->shape(), y.shape()), ix(c.in[1]->shape(), y.shape()), iy(c.in[2]->shape(), y.shape());
  const uint8_t* cond = c.in[0]->data<uint8_t>();
  const char* px = static_cast<const char*>(c.in[1]->raw());
  const char* py = static_cast<const char*>(c.in[2]->raw());
  char* out = static_cast<char*>(y.raw());
  for (int64_t i = 0; i < y.numel(); ++i, ic.next(), ix.next(), iy.next()) {
    const char* src = cond[ic.index()] ? px + ix.index() * es : py + iy.index() * es;
    std::memcpy(out + i * es, src, es);
  }
  return Status::ok();
}

}  // namespace qd::ops
