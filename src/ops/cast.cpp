// Cast and CastLike between every element type qdeploy holds (numeric, bool, float16). Float to integer truncates
// toward zero (NaN gives 0; values beyond int64 saturate); integer to narrower integer wraps, as numpy does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "ops/movement.h"

namespace qd::ops {

namespace {

struct BoolTag {};
struct HalfTag {};
template <typename T> struct Storage { using type = T; };
template <> struct Storage<BoolTag> { using type = uint8_t; };
template <> struct Storage<HalfTag> { using type = uint16_t; };

template <typename Fn>
Status dispatch_all(DType t, Fn&& fn) {
  if (t == DType::kBool) return fn(BoolTag{});
  if (t == DType::kFloat16) return fn(HalfTag{});
  return dispatch_numeric(t, fn);
}

template <typename D>
typename Storage<D>::type from_double(double d) {
  if constexpr (std::is_same_v<D, BoolTag>) {
    return d != 0.0;  // NaN is true, as in numpy
  } else if constexpr (std::is_same_v<D, HalfTag>) {
    return float_to_half(static_cast<float>(d));
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(d);
  } else {
    if (std::isnan(d)) return 0;
    const double t = std::trunc(d);
    if constexpr (std::is_same_v<D, uint64_t>) {
      if (t >= 18446744073709551616.0) return std::numeric_limits<uint64_t>::max();
      if (t >= 9223372036854775808.0) return static_cast<uint64_t>(t);
    }
    int64_t i;
    if (t >= 9223372036854775808.0) i = std::numeric_limits<int64_t>::max();
    else if (t < -9223372036854775808.0) i = std::numeric_limits<int64_t>::min();
    else i = static_cast<int64_t>(t);
    return static_cast<D>(i);
  }
}

template <typename D, typename I>
typename Storage<D>::type from_integer(I v) {
  if constexpr (std::is_same_v<D, BoolTag>) return v != 0;
  else if constexpr (std::is_same_v<D, HalfTag>) return float_to_half(static_cast<float>(v));
  else return static_cast<D>(v);
}

template <typename S, typename D>
typename Storage<D>::type convert_one(typename Storage<S>::type v) {
  if constexpr (std::is_same_v<S, HalfTag>) return from_double<D>(half_to_float(v));
  else if constexpr (std::is_floating_point_v<S>) return from_double<D>(static_cast<double>(v));
  else if constexpr (std::is_same_v<S, BoolTag>) return from_integer<D>(static_cast<int>(v != 0));
  else return from_integer<D>(v);
}

Status convert(const Tensor& x, Tensor& y) {
  if (x.dtype() == y.dtype()) {
    if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return Status::ok();
  }
  return dispatch_all(x.dtype(), [&](auto stag) {
    using S = decltype(stag);
    return dispatch_all(y.dtype(), [&](auto dtag) {
      using D = decltype(dtag);
      const auto* px = static_cast<const typename Storage<S>::type*>(x.raw());
      auto* py = static_cast<typename Storage<D>::type*>(y.raw());
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = convert_one<S, D>(px[i]);
      return Status::ok();
    });
  });
}

Status check_castable(DType t, const char* what) {
  if (t == DType::kString) return unsupported(std::string("Cast ") + what + " string (strings are not supported)");
  if (dtype_size(t) == 0) return unsupported(std::string("Cast ") + what + " element type " + dtype_name(t));
  return Status::ok();
}

}  // namespace

Status infer_Cast(InferCtx& c) {
  const int64_t to = QD_TRY(c.node.attrs.get_int("to"));
  if (to == 8) return unsupported("Cast to string (strings are not supported)");
  DType t;
  if (to < 0 || to > INT32_MAX || !dtype_from_onnx(static_cast<int32_t>(to), &t)) {
    return unsupported("Cast to " + onnx_type_name(static_cast<int32_t>(std::clamp<int64_t>(to, -1, INT32_MAX))) +
                       " (qdeploy holds float16/32/64, bool and 8-64 bit integers; bfloat16, float8, 4-bit and 2-bit "
                       "types are not supported)");
  }
  QD_RETURN_IF_ERROR(check_castable(c.dtype(0), "from"));
  c.set_output(0, t, c.shape(0));
  return Status::ok();
}
Status run_Cast(KernelCtx& c) { return convert(*c.in[0], *c.out[0]); }

Status infer_CastLike(InferCtx& c) {
  QD_RETURN_IF_ERROR(check_castable(c.dtype(0), "from"));
  QD_RETURN_IF_ERROR(check_castable(c.dtype(1), "to"));
  c.set_output(0, c.dtype(1), c.shape(0));
  return Status::ok();
}
Status run_CastLike(KernelCtx& c) { return convert(*c.in[0], *c.out[0]); }

}  // namespace qd::ops
