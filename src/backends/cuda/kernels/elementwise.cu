// Elementwise families: unary math and activations, Clip, Not, Cast; binary arithmetic / comparison / logic with
// numpy broadcasting; variadic Max/Min/Sum/Mean; Where. Float math runs in fp32 whatever the storage (fp32 or fp16);
// the formulas are the reference's (src/ops/unary.cpp, binary.cpp, cast.cpp), in float instead of double.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cuda/kernels/generic_device.cuh"

namespace qd::cuda {

namespace {

// ================================================ unary ================================================

enum class UOp : int {
  kAbs, kNeg, kSign, kExp, kLog, kSqrt, kReciprocal, kFloor, kCeil, kRound, kSigmoid, kTanh, kRelu, kSoftplus,
  kSoftsign, kHardSwish, kErf, kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kMish,
  kLeakyRelu, kElu, kCelu, kThresholdedRelu, kSelu, kHardSigmoid, kClip, kGelu, kGeluTanh, kSwish
};

// a, b: the op's attributes (alpha; Selu's gamma, HardSigmoid's beta; Clip's default bounds).
__device__ __forceinline__ float unary_math(UOp op, float x, float a, float b) {
  switch (op) {
    case UOp::kAbs: return fabsf(x);
    case UOp::kNeg: return -x;
    case UOp::kSign: return static_cast<float>((x > 0.f) - (x < 0.f));
    case UOp::kExp: return expf(x);
    case UOp::kLog: return logf(x);
    case UOp::kSqrt: return sqrtf(x);
    case UOp::kReciprocal: return 1.f / x;
    case UOp::kFloor: return floorf(x);
    case UOp::kCeil: return ceilf(x);
    case UOp::kRound: return rintf(x);  // half to even
    case UOp::kSigmoid: return 1.f / (1.f + expf(-x));
    case UOp::kTanh: return tanhf(x);
    case UOp::kRelu: return x > 0.f ? x : 0.f;
    case UOp::kSoftplus: return x > 30.f ? x : log1pf(expf(x));
    case UOp::kSoftsign: return x / (1.f + fabsf(x));
    case UOp::kHardSwish: return x * fmaxf(0.f, fminf(1.f, x / 6.f + 0.5f));
    case UOp::kErf: return erff(x);
    case UOp::kSin: return sinf(x);
    case UOp::kCos: return cosf(x);
    case UOp::kTan: return tanf(x);
    case UOp::kAsin: return asinf(x);
    case UOp::kAcos: return acosf(x);
    case UOp::kAtan: return atanf(x);
    case UOp::kSinh: return sinhf(x);
    case UOp::kCosh: return coshf(x);
    case UOp::kAsinh: return asinhf(x);
    case UOp::kAcosh: return acoshf(x);
    case UOp::kAtanh: return atanhf(x);
    case UOp::kMish: return x * tanhf(x > 30.f ? x : log1pf(expf(x)));
    case UOp::kLeakyRelu: return x >= 0.f ? x : a * x;
    case UOp::kElu: return x >= 0.f ? x : a * expm1f(x);
    case UOp::kCelu: return fmaxf(0.f, x) + fminf(0.f, a * expm1f(x / a));
    case UOp::kThresholdedRelu: return x > a ? x : 0.f;
    case UOp::kSelu: return x > 0.f ? b * x : b * a * expm1f(x);
    case UOp::kHardSigmoid: return fmaxf(0.f, fminf(1.f, a * x + b));
    case UOp::kClip: {  // min(max(x, a), b) as ONNX specifies (b wins when a > b); NaN passes through
      const float up = x < a ? a : x;
      return up > b ? b : up;
    }
    case UOp::kGelu: return 0.5f * x * (1.f + erff(x * 0.70710678f));
    case UOp::kGeluTanh: return 0.5f * x * (1.f + tanhf(0.79788456f * (x + 0.044715f * x * x * x)));
    case UOp::kSwish: return x / (1.f + expf(-a * x));
  }
  return x;
}

// Unary op on fp32/fp16 storage. Clip reads its bounds from inputs 1 and 2 when present (bound at launch).
template <typename T>
struct FloatUnary {
  UOp op;
  float a, b;
  const T* lo = nullptr;
  const T* hi = nullptr;
  void bind(const std::vector<const void*>& in) {
    if (op != UOp::kClip) return;
    lo = in.size() > 1 ? static_cast<const T*>(in[1]) : nullptr;
    hi = in.size() > 2 ? static_cast<const T*>(in[2]) : nullptr;
  }
  __device__ __forceinline__ T operator()(T v) const {
    float a2 = a, b2 = b;
    if (op == UOp::kClip) {
      if (lo) a2 = to_float(*lo);
      if (hi) b2 = to_float(*hi);
    }
    return from_float<T>(unary_math(op, to_float(v), a2, b2));
  }
};

// Abs, Neg, Sign, Clip on integers (wrapping like two's complement where the reference's int math overflows).
template <typename T>
struct IntUnary {
  UOp op;
  const T* lo = nullptr;
  const T* hi = nullptr;
  void bind(const std::vector<const void*>& in) {
    lo = in.size() > 1 ? static_cast<const T*>(in[1]) : nullptr;
    hi = in.size() > 2 ? static_cast<const T*>(in[2]) : nullptr;
  }
  __device__ __forceinline__ T operator()(T x) const {
    using W = std::make_unsigned_t<decltype(x + x)>;
    switch (op) {
      case UOp::kAbs:
        if constexpr (std::is_unsigned_v<T>) return x;
        else return x < 0 ? static_cast<T>(W{0} - static_cast<W>(x)) : x;
      case UOp::kNeg: return static_cast<T>(W{0} - static_cast<W>(x));
      case UOp::kSign:
        if constexpr (std::is_unsigned_v<T>) return x > 0 ? 1 : 0;
        else return static_cast<T>((x > 0) - (x < 0));
      case UOp::kClip:
        if (lo && x < *lo) x = *lo;
        if (hi && x > *hi) x = *hi;
        return x;
      default: return x;
    }
  }
};

struct NotOp {
  void bind(const std::vector<const void*>&) {}
  __device__ __forceinline__ uint8_t operator()(uint8_t x) const { return x ? 0 : 1; }
};

// y[i] = f(x[i]); V elements per thread (16-byte accesses) when both pointers are aligned.
template <typename T, typename F, int V>
__global__ void map_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, F f) {
  if constexpr (V > 1) {
    const int64_t nv = n / V;
    const auto* xv = reinterpret_cast<const VecOf<T, V>*>(x);
    auto* yv = reinterpret_cast<VecOf<T, V>*>(y);
    QD_GRID_LOOP(i, nv) {
      VecOf<T, V> v = xv[i];
#pragma unroll
      for (int k = 0; k < V; ++k) v.v[k] = f(v.v[k]);
      yv[i] = v;
    }
    const int64_t rest = n - nv * V;  // the tail, fewer than V elements
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t < rest) y[nv * V + t] = f(x[nv * V + t]);
  } else {
    QD_GRID_LOOP(i, n) y[i] = f(x[i]);
  }
}

template <typename T, typename F>
Status launch_map(const T* x, T* y, int64_t n, const F& f, cudaStream_t s) {
  if (n == 0) return Status::ok();
  constexpr int V = 16 / sizeof(T);
  if (V > 1 && aligned16(x) && aligned16(y)) {
    map_kernel<T, F, V><<<grid_1d(ceil_div(n, V)), kBlock, 0, s>>>(x, y, n, f);
  } else {
    map_kernel<T, F, 1><<<grid_1d(n), kBlock, 0, s>>>(x, y, n, f);
  }
  QD_CUDA_LAUNCHED();
  return Status::ok();
}

template <typename T, typename F>
class MapKernel final : public GenericKernel {
 public:
  MapKernel(int64_t n, F f) : n_(n), f_(f) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    F f = f_;
    f.bind(in);
    return launch_map(static_cast<const T*>(in[0]), static_cast<T*>(out[0]), n_, f, s);
  }

 private:
  int64_t n_;
  F f_;
};

// ---- Cast (the reference's rules, src/ops/cast.cpp: float -> int truncates toward zero, NaN gives 0, beyond int64
// saturates, then wraps to the narrower type; to bool is != 0; integer -> integer wraps) ----

struct BoolT {};  // bool, stored as one byte
template <typename T>
struct Stored {
  using type = T;
};
template <>
struct Stored<BoolT> {
  using type = uint8_t;
};

template <typename D>
__device__ __forceinline__ typename Stored<D>::type cast_from_double(double d) {
  if constexpr (std::is_same_v<D, BoolT>) {
    return d != 0.0 ? 1 : 0;  // NaN is true
  } else if constexpr (std::is_same_v<D, __half>) {
    return __float2half_rn(static_cast<float>(d));
  } else if constexpr (std::is_same_v<D, float>) {
    return static_cast<float>(d);
  } else {
    if (isnan(d)) return 0;
    const double t = trunc(d);
    int64_t i;
    if (t >= 9223372036854775808.0) i = INT64_MAX;
    else if (t < -9223372036854775808.0) i = INT64_MIN;
    else i = static_cast<int64_t>(t);
    return static_cast<D>(i);
  }
}

template <typename D>
__device__ __forceinline__ typename Stored<D>::type cast_from_int(int64_t v) {
  if constexpr (std::is_same_v<D, BoolT>) return v != 0 ? 1 : 0;
  else if constexpr (std::is_same_v<D, __half>) return __float2half_rn(static_cast<float>(v));
  else return static_cast<D>(v);
}

template <typename S, typename D>
__global__ void cast_kernel(const typename Stored<S>::type* __restrict__ x, typename Stored<D>::type* __restrict__ y,
                            int64_t n) {
  QD_GRID_LOOP(i, n) {
    if constexpr (std::is_same_v<S, __half> || std::is_same_v<S, float>) {
      y[i] = cast_from_double<D>(static_cast<double>(to_float(x[i])));
    } else if constexpr (std::is_same_v<S, BoolT>) {
      y[i] = cast_from_int<D>(x[i] != 0 ? 1 : 0);
    } else {
      y[i] = cast_from_int<D>(static_cast<int64_t>(x[i]));
    }
  }
}

// The types Cast handles on the GPU.
template <typename Fn>
Status dispatch_cast_type(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat16: return fn(__half{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kInt8: return fn(int8_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kBool: return fn(BoolT{});
    default: return unsupported(std::string("element type ") + dtype_name(t));
  }
}

template <typename S, typename D>
class CastKernel final : public GenericKernel {
 public:
  explicit CastKernel(int64_t n) : n_(n) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    cast_kernel<S, D><<<grid_1d(n_), kBlock, 0, s>>>(static_cast<const typename Stored<S>::type*>(in[0]),
                                                      static_cast<typename Stored<D>::type*>(out[0]), n_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  int64_t n_;
};

// Same dtype: a plain device copy.
class BytesCopyKernel final : public GenericKernel {
 public:
  explicit BytesCopyKernel(size_t bytes) : bytes_(bytes) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (bytes_ && in[0] != out[0]) QD_CUDA_TRY(cudaMemcpyAsync(out[0], in[0], bytes_, cudaMemcpyDeviceToDevice, s));
    return Status::ok();
  }

 private:
  size_t bytes_;
};

MadeKernel make_cast(const NodeArgs& a) {
  const DType from = a.in[0].dtype, to = a.out[0].dtype;
  const int64_t n = volume(a.out[0].shape);
  if (from == to) return KernelPtr(new BytesCopyKernel(static_cast<size_t>(n) * dtype_size(from)));
  KernelPtr k;
  Status st = dispatch_cast_type(from, [&](auto s) {
    return dispatch_cast_type(to, [&](auto d) {
      k.reset(new CastKernel<decltype(s), decltype(d)>(n));
      return Status::ok();
    });
  });
  if (!st.is_ok()) return no_kernel(a, std::string("from ") + dtype_name(from) + " to " + dtype_name(to));
  return std::move(k);
}

// Integer types the integer paths handle.
template <typename Fn>
Status dispatch_int(DType t, Fn&& fn) {
  switch (t) {
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kInt8: return fn(int8_t{});
    case DType::kUInt8: return fn(uint8_t{});
    default: return unsupported(std::string("element type ") + dtype_name(t));
  }
}

struct UnaryInfo {
  OpType op;
  UOp u;
};
constexpr UnaryInfo kUnary[] = {
    {OpType::Abs, UOp::kAbs}, {OpType::Neg, UOp::kNeg}, {OpType::Sign, UOp::kSign}, {OpType::Exp, UOp::kExp},
    {OpType::Log, UOp::kLog}, {OpType::Sqrt, UOp::kSqrt}, {OpType::Reciprocal, UOp::kReciprocal},
    {OpType::Floor, UOp::kFloor}, {OpType::Ceil, UOp::kCeil}, {OpType::Round, UOp::kRound},
    {OpType::Sigmoid, UOp::kSigmoid}, {OpType::Tanh, UOp::kTanh}, {OpType::Relu, UOp::kRelu},
    {OpType::Softplus, UOp::kSoftplus}, {OpType::Softsign, UOp::kSoftsign}, {OpType::HardSwish, UOp::kHardSwish},
    {OpType::Erf, UOp::kErf}, {OpType::Sin, UOp::kSin}, {OpType::Cos, UOp::kCos}, {OpType::Tan, UOp::kTan},
    {OpType::Asin, UOp::kAsin}, {OpType::Acos, UOp::kAcos}, {OpType::Atan, UOp::kAtan},
    {OpType::Sinh, UOp::kSinh}, {OpType::Cosh, UOp::kCosh}, {OpType::Asinh, UOp::kAsinh},
    {OpType::Acosh, UOp::kAcosh}, {OpType::Atanh, UOp::kAtanh}, {OpType::Mish, UOp::kMish},
    {OpType::LeakyRelu, UOp::kLeakyRelu}, {OpType::Elu, UOp::kElu}, {OpType::Celu, UOp::kCelu},
    {OpType::ThresholdedRelu, UOp::kThresholdedRelu}, {OpType::Selu, UOp::kSelu},
    {OpType::HardSigmoid, UOp::kHardSigmoid}, {OpType::Clip, UOp::kClip}, {OpType::Gelu, UOp::kGelu},
    {OpType::Swish, UOp::kSwish},
};

// The attributes of the float ops, with the reference's defaults.
Status unary_attrs(const Node& n, UOp u, float* a, float* b) {
  const AttrMap& at = n.attrs;
  *a = 0.f;
  *b = 0.f;
  switch (u) {
    case UOp::kLeakyRelu: *a = QD_TRY(at.get_float("alpha", 0.01f)); break;
    case UOp::kElu:
    case UOp::kCelu:
    case UOp::kSwish:
    case UOp::kThresholdedRelu: *a = QD_TRY(at.get_float("alpha", 1.0f)); break;
    case UOp::kSelu:
      *a = QD_TRY(at.get_float("alpha", 1.67326319217681884765625f));
      *b = QD_TRY(at.get_float("gamma", 1.05070102214813232421875f));
      break;
    case UOp::kHardSigmoid:
      *a = QD_TRY(at.get_float("alpha", 0.2f));
      *b = QD_TRY(at.get_float("beta", 0.5f));
      break;
    case UOp::kClip:  // bounds are attributes before opset 11, optional inputs (bound at launch) from 11
      *a = n.opset < 11 ? QD_TRY(at.get_float("min", -3.402823e38f)) : -INFINITY;
      *b = n.opset < 11 ? QD_TRY(at.get_float("max", 3.402823e38f)) : INFINITY;
      break;
    default: break;
  }
  return Status::ok();
}

}  // namespace

MadeKernel make_unary(const NodeArgs& a) {
  const OpType op = a.node.op;
  if (op == OpType::Cast || op == OpType::CastLike) return make_cast(a);
  const DType t = a.in[0].dtype;
  const int64_t n = volume(a.out[0].shape);
  if (a.out[0].dtype != t) return no_kernel(a, "output type differs from the input's");
  if (op == OpType::Not) {
    if (t != DType::kBool) return no_kernel_dtype(a, t);
    return KernelPtr(new MapKernel<uint8_t, NotOp>(n, NotOp{}));
  }
  UOp u{};
  bool found = false;
  for (const UnaryInfo& info : kUnary) {
    if (info.op == op) {
      u = info.u;
      found = true;
    }
  }
  if (!found) return no_kernel(a, "not an elementwise op");
  if (u == UOp::kGelu) {
    const std::string m = QD_TRY(a.node.attrs.get_string("approximate", "none"));
    if (m == "tanh") u = UOp::kGeluTanh;
    else if (m != "none") return invalid("Gelu's approximate must be 'none' or 'tanh', got '" + m + "'");
  }
  for (size_t i = 1; i < a.in.size(); ++i) {
    if (a.has_in(i) && (a.in[i].dtype != t || volume(a.in[i].shape) != 1)) {
      return no_kernel(a, "Clip's min and max must be scalars of the input's type");
    }
  }
  if (is_float_storage(t)) {
    float pa, pb;
    QD_RETURN_IF_ERROR(unary_attrs(a.node, u, &pa, &pb));
    KernelPtr k;
    QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
      using T = decltype(tag);
      k.reset(new MapKernel<T, FloatUnary<T>>(n, FloatUnary<T>{u, pa, pb}));
      return Status::ok();
    }));
    return std::move(k);
  }
  const bool int_op = u == UOp::kAbs || u == UOp::kNeg || u == UOp::kSign || (u == UOp::kClip && a.node.opset >= 11);
  if (!int_op) return no_kernel_dtype(a, t);
  KernelPtr k;
  Status st = dispatch_int(t, [&](auto tag) {
    using T = decltype(tag);
    k.reset(new MapKernel<T, IntUnary<T>>(n, IntUnary<T>{u}));
    return Status::ok();
  });
  if (!st.is_ok()) return no_kernel_dtype(a, t);
  return std::move(k);
}

namespace {

// ================================================ binary ================================================

enum class BOp : int {
  kAdd, kSub, kMul, kDiv, kPow, kMod, kFmod, kPRelu, kMax, kMin,  // arithmetic: result of the input type
  kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual, kAnd, kOr, kXor  // bool result
};

bool is_compare(BOp op) { return op >= BOp::kEqual; }

__device__ __forceinline__ float binary_float(BOp op, float x, float y) {
  switch (op) {
    case BOp::kAdd: return x + y;
    case BOp::kSub: return x - y;
    case BOp::kMul: return x * y;
    case BOp::kDiv: return x / y;
    case BOp::kPow: return pow_float(x, y);
    case BOp::kFmod: return fmodf(x, y);
    case BOp::kMod: {  // the sign of the divisor, as Python's %
      const float r = fmodf(x, y);
      return (r != 0.f && ((r < 0.f) != (y < 0.f))) ? r + y : r;
    }
    case BOp::kPRelu: return x < 0.f ? x * y : x;
    case BOp::kMax: return (isnan(x) || isnan(y)) ? NAN : (x > y ? x : y);
    case BOp::kMin: return (isnan(x) || isnan(y)) ? NAN : (x < y ? x : y);
    default: return 0.f;
  }
}

template <typename T>
__device__ __forceinline__ T binary_int(BOp op, T x, T y) {
  using W = std::make_unsigned_t<decltype(x + y)>;  // wrapping arithmetic instead of undefined overflow
  switch (op) {
    case BOp::kAdd: return static_cast<T>(static_cast<W>(x) + static_cast<W>(y));
    case BOp::kSub: return static_cast<T>(static_cast<W>(x) - static_cast<W>(y));
    case BOp::kMul: return static_cast<T>(static_cast<W>(x) * static_cast<W>(y));
    case BOp::kDiv:  // defined for 0 and MIN / -1 as the reference defines them
      if (y == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (y == T(-1)) return static_cast<T>(W{0} - static_cast<W>(x));  // wraps for MIN / -1, which gives MIN
      }
      return static_cast<T>(x / y);
    case BOp::kPow: {  // exact, by squaring (device pow(double) of a negative base is not exact)
      if constexpr (std::is_signed_v<T>) {
        if (y < 0) return x == 1 ? T(1) : x == T(-1) ? (y % 2 ? T(-1) : T(1)) : T(0);
      }
      W r = 1, b = static_cast<W>(x);
      for (auto e = y; e > 0; e /= 2) {
        if (e % 2) r = r * b;
        b = b * b;
      }
      return static_cast<T>(r);
    }
    case BOp::kMod:
    case BOp::kFmod: {
      if (y == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (y == T(-1)) return 0;
      }
      const T r = static_cast<T>(x % y);
      if constexpr (std::is_signed_v<T>) {
        if (op == BOp::kMod && r != 0 && ((r < 0) != (y < 0))) return static_cast<T>(r + y);
      }
      return r;
    }
    case BOp::kPRelu:
      if constexpr (std::is_unsigned_v<T>) return x;
      else return x < 0 ? static_cast<T>(static_cast<W>(x) * static_cast<W>(y)) : x;
    case BOp::kMax: return x > y ? x : y;
    case BOp::kMin: return x < y ? x : y;
    default: return 0;
  }
}

template <typename V>
__device__ __forceinline__ uint8_t compare(BOp op, V x, V y) {
  switch (op) {
    case BOp::kEqual: return x == y;
    case BOp::kLess: return x < y;
    case BOp::kLessOrEqual: return x <= y;
    case BOp::kGreater: return x > y;
    case BOp::kGreaterOrEqual: return x >= y;
    case BOp::kAnd: return (x != 0) && (y != 0);
    case BOp::kOr: return (x != 0) || (y != 0);
    case BOp::kXor: return (x != 0) != (y != 0);
    default: return 0;
  }
}

// Functors f(a, b) -> y for each class of types.
template <typename T>
struct FloatArith {
  BOp op;
  __device__ __forceinline__ T operator()(T x, T y) const {
    return from_float<T>(binary_float(op, to_float(x), to_float(y)));
  }
};
template <typename T, typename E>  // Pow with an exponent of another type
struct FloatPow {
  BOp op;
  __device__ __forceinline__ T operator()(T x, E y) const {
    float e;
    if constexpr (std::is_same_v<E, float> || std::is_same_v<E, __half>) e = to_float(y);
    else e = static_cast<float>(y);
    return from_float<T>(pow_float(to_float(x), e));
  }
};
template <typename T>
struct FloatCompare {
  BOp op;
  __device__ __forceinline__ uint8_t operator()(T x, T y) const { return compare(op, to_float(x), to_float(y)); }
};
template <typename T>
struct IntArith {
  BOp op;
  __device__ __forceinline__ T operator()(T x, T y) const { return binary_int(op, x, y); }
};
template <typename T>
struct IntCompare {
  BOp op;
  __device__ __forceinline__ uint8_t operator()(T x, T y) const { return compare(op, x, y); }
};

template <typename A, typename B, typename O, typename F, typename I>
__global__ void binary_kernel(const A* __restrict__ a, const B* __restrict__ b, O* __restrict__ y, Walk<2> w,
                              int64_t n, F f) {
  QD_GRID_LOOP(i, n) {
    int64_t off[2];
    walk_offsets<I>(w, i, off);
    y[i] = f(a[off[0]], b[off[1]]);
  }
}

// Same-type operands that are full (or a single element broadcast to all): V elements per thread.
template <typename T, typename F, int V>
__global__ void binary_vec_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n,
                                  bool a_scalar, bool b_scalar, F f) {
  const int64_t nv = n / V;
  const T a0 = a[0], b0 = b[0];
  QD_GRID_LOOP(i, nv) {
    VecOf<T, V> va, vb, vy;
    if (!a_scalar) va = reinterpret_cast<const VecOf<T, V>*>(a)[i];
    if (!b_scalar) vb = reinterpret_cast<const VecOf<T, V>*>(b)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) vy.v[k] = f(a_scalar ? a0 : va.v[k], b_scalar ? b0 : vb.v[k]);
    reinterpret_cast<VecOf<T, V>*>(y)[i] = vy;
  }
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t i = nv * V + t;
  if (i < n) y[i] = f(a_scalar ? a0 : a[i], b_scalar ? b0 : b[i]);
}

template <typename A, typename B, typename O, typename F>
class BinaryKernel final : public GenericKernel {
 public:
  BinaryKernel(const Walk<2>& w, int64_t n, bool small, F f) : w_(w), n_(n), small_(small), f_(f) {
    // Full or single-element operands of one type take the vectorized path.
    if constexpr (std::is_same_v<A, O> && std::is_same_v<B, O>) {
      vec_ok_ = w.rank == 1 && (w.strides[0][0] == 1 || w.strides[0][0] == 0) &&
                (w.strides[1][0] == 1 || w.strides[1][0] == 0) && w.base[0] == 0 && w.base[1] == 0;
    }
  }
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    const A* a = static_cast<const A*>(in[0]);
    const B* b = static_cast<const B*>(in[1]);
    O* y = static_cast<O*>(out[0]);
    if constexpr (std::is_same_v<A, O> && std::is_same_v<B, O>) {
      constexpr int V = 16 / sizeof(O);
      const bool as = w_.strides[0][0] == 0, bs = w_.strides[1][0] == 0;
      if (V > 1 && vec_ok_ && (as || aligned16(a)) && (bs || aligned16(b)) && aligned16(y)) {
        binary_vec_kernel<O, F, V><<<grid_1d(ceil_div(n_, V)), kBlock, 0, s>>>(a, b, y, n_, as, bs, f_);
        QD_CUDA_LAUNCHED();
        return Status::ok();
      }
    }
    if (small_) binary_kernel<A, B, O, F, int32_t><<<grid_1d(n_), kBlock, 0, s>>>(a, b, y, w_, n_, f_);
    else binary_kernel<A, B, O, F, int64_t><<<grid_1d(n_), kBlock, 0, s>>>(a, b, y, w_, n_, f_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  Walk<2> w_;
  int64_t n_;
  bool small_;
  F f_;
  bool vec_ok_ = false;
};

// The walk of a node's inputs [first, first + N) over its output shape.
template <int N>
Status broadcast_walk(const NodeArgs& a, size_t first, Walk<N>* w, bool* small) {
  const Shape& out = a.out[0].shape;
  DimsStrides v;
  v.dims = out;
  int64_t max_elems = volume(out);
  for (int k = 0; k < N; ++k) {
    v.strides.push_back(broadcast_strides(a.in[first + k].shape, out));
    max_elems = std::max(max_elems, volume(a.in[first + k].shape));
  }
  QD_RETURN_IF_ERROR(make_walk(coalesce(v), w));
  *small = fits_int32(volume(out), max_elems);
  return Status::ok();
}

struct BinaryInfo {
  OpType op;
  BOp b;
};
constexpr BinaryInfo kBinary[] = {
    {OpType::Add, BOp::kAdd}, {OpType::Sub, BOp::kSub}, {OpType::Mul, BOp::kMul}, {OpType::Div, BOp::kDiv},
    {OpType::Pow, BOp::kPow}, {OpType::Mod, BOp::kMod}, {OpType::PRelu, BOp::kPRelu},
    {OpType::Equal, BOp::kEqual}, {OpType::Less, BOp::kLess}, {OpType::LessOrEqual, BOp::kLessOrEqual},
    {OpType::Greater, BOp::kGreater}, {OpType::GreaterOrEqual, BOp::kGreaterOrEqual}, {OpType::And, BOp::kAnd},
    {OpType::Or, BOp::kOr}, {OpType::Xor, BOp::kXor},
};

// Pow's exponent may have another type than the base (float bases only).
MadeKernel make_pow(const NodeArgs& a, const Walk<2>& w, int64_t n, bool small) {
  const DType tb = a.in[0].dtype, te = a.in[1].dtype;
  KernelPtr k;
  auto with_exp = [&](auto base) -> Status {
    using T = decltype(base);
    auto make = [&](auto exponent) {
      using E = decltype(exponent);
      k.reset(new BinaryKernel<T, E, T, FloatPow<T, E>>(w, n, small, {BOp::kPow}));
      return Status::ok();
    };
    switch (te) {
      case DType::kFloat32: return make(float{});
      case DType::kFloat16: return make(__half{});
      case DType::kInt32: return make(int32_t{});
      case DType::kInt64: return make(int64_t{});
      default: return unsupported("exponent type");
    }
  };
  if (is_float_storage(tb)) {
    Status st = dispatch_float_storage(tb, with_exp);
    if (st.is_ok()) return std::move(k);
    return no_kernel_dtype(a, te, "the exponent");
  }
  if (te == tb) {
    Status st = dispatch_int(tb, [&](auto tag) {
      using T = decltype(tag);
      k.reset(new BinaryKernel<T, T, T, IntArith<T>>(w, n, small, {BOp::kPow}));
      return Status::ok();
    });
    if (st.is_ok()) return std::move(k);
  }
  return no_kernel(a, std::string("base ") + dtype_name(tb) + " with exponent " + dtype_name(te));
}

}  // namespace

MadeKernel make_binary(const NodeArgs& a) {
  BOp op{};
  for (const BinaryInfo& info : kBinary) {
    if (info.op == a.node.op) op = info.b;
  }
  if (a.node.op == OpType::Mod && QD_TRY(a.node.attrs.get_int("fmod", 0)) != 0) op = BOp::kFmod;
  Walk<2> w;
  bool small = false;
  QD_RETURN_IF_ERROR(broadcast_walk<2>(a, 0, &w, &small));
  const int64_t n = volume(a.out[0].shape);
  if (op == BOp::kPow) return make_pow(a, w, n, small);
  const DType t = a.in[0].dtype;
  if (a.in[1].dtype != t) return no_kernel(a, "inputs of different types");
  const bool cmp = is_compare(op);
  if (a.out[0].dtype != (cmp ? DType::kBool : t)) return no_kernel(a, "unexpected output type");
  KernelPtr k;
  if (t == DType::kBool) {
    if (!cmp) return no_kernel_dtype(a, t);
    k.reset(new BinaryKernel<uint8_t, uint8_t, uint8_t, IntCompare<uint8_t>>(w, n, small, {op}));
    return std::move(k);
  }
  if (op == BOp::kAnd || op == BOp::kOr || op == BOp::kXor) return no_kernel_dtype(a, t);
  if (is_float_storage(t)) {
    QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
      using T = decltype(tag);
      if (cmp) k.reset(new BinaryKernel<T, T, uint8_t, FloatCompare<T>>(w, n, small, {op}));
      else k.reset(new BinaryKernel<T, T, T, FloatArith<T>>(w, n, small, {op}));
      return Status::ok();
    }));
    return std::move(k);
  }
  Status st = dispatch_int(t, [&](auto tag) {
    using T = decltype(tag);
    if (cmp) k.reset(new BinaryKernel<T, T, uint8_t, IntCompare<T>>(w, n, small, {op}));
    else k.reset(new BinaryKernel<T, T, T, IntArith<T>>(w, n, small, {op}));
    return Status::ok();
  });
  if (!st.is_ok()) return no_kernel_dtype(a, t);
  return std::move(k);
}

namespace {

// ================================================ variadic ================================================

constexpr int kMaxVariadic = 8;

template <typename T>
struct Operands {
  const T* p[kMaxVariadic];
};

// y = f(...f(f(x0, x1), x2)..., x_{count-1}) in the reference's order; Mean divides the sum by count at the end.
template <typename T, typename I>
__global__ void variadic_kernel(Operands<T> x, int count, Walk<kMaxVariadic> w, T* __restrict__ y, int64_t n, BOp op,
                                bool mean) {
  QD_GRID_LOOP(i, n) {
    int64_t off[kMaxVariadic];
    walk_offsets<I>(w, i, off);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, __half>) {
      float acc = to_float(x.p[0][off[0]]);
      for (int k = 1; k < count; ++k) acc = binary_float(op, acc, to_float(x.p[k][off[k]]));
      if (mean) acc = acc / static_cast<float>(count);
      y[i] = from_float<T>(acc);
    } else {
      T acc = x.p[0][off[0]];
      for (int k = 1; k < count; ++k) acc = binary_int(op, acc, x.p[k][off[k]]);
      if (mean) acc = static_cast<T>(acc / static_cast<T>(count));
      y[i] = acc;
    }
  }
}

template <typename T>
class VariadicKernel final : public GenericKernel {
 public:
  VariadicKernel(const Walk<kMaxVariadic>& w, int count, int64_t n, bool small, BOp op, bool mean)
      : w_(w), count_(count), n_(n), small_(small), op_(op), mean_(mean) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    Operands<T> x{};
    for (int k = 0; k < count_; ++k) x.p[k] = static_cast<const T*>(in[k]);
    T* y = static_cast<T*>(out[0]);
    if (small_) variadic_kernel<T, int32_t><<<grid_1d(n_), kBlock, 0, s>>>(x, count_, w_, y, n_, op_, mean_);
    else variadic_kernel<T, int64_t><<<grid_1d(n_), kBlock, 0, s>>>(x, count_, w_, y, n_, op_, mean_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  Walk<kMaxVariadic> w_;
  int count_;
  int64_t n_;
  bool small_;
  BOp op_;
  bool mean_;
};

}  // namespace

MadeKernel make_variadic(const NodeArgs& a) {
  const int count = static_cast<int>(a.in.size());
  if (count > kMaxVariadic) return no_kernel(a, std::to_string(count) + " inputs (at most 8)");
  const DType t = a.in[0].dtype;
  for (int k = 0; k < count; ++k) {
    if (!a.has_in(k)) return no_kernel(a, "an omitted input");
    if (a.in[k].dtype != t) return no_kernel(a, "inputs of different types");
  }
  const OpType op = a.node.op;
  const BOp b = op == OpType::Max ? BOp::kMax : op == OpType::Min ? BOp::kMin : BOp::kAdd;
  const Shape& out = a.out[0].shape;
  DimsStrides v;
  v.dims = out;
  int64_t max_elems = volume(out);
  for (int k = 0; k < kMaxVariadic; ++k) {  // unused operands get zero strides
    v.strides.push_back(k < count ? broadcast_strides(a.in[k].shape, out) : std::vector<int64_t>(out.size(), 0));
    if (k < count) max_elems = std::max(max_elems, volume(a.in[k].shape));
  }
  Walk<kMaxVariadic> w;
  QD_RETURN_IF_ERROR(make_walk(coalesce(v), &w));
  const int64_t n = volume(out);
  const bool small = fits_int32(n, max_elems);
  KernelPtr k;
  auto make = [&](auto tag) {
    using T = decltype(tag);
    k.reset(new VariadicKernel<T>(w, count, n, small, b, op == OpType::Mean));
    return Status::ok();
  };
  Status st = is_float_storage(t) ? dispatch_float_storage(t, make)
                                  : (t == DType::kInt32 ? make(int32_t{}) : t == DType::kInt64 ? make(int64_t{})
                                                                                               : no_kernel_dtype(a, t));
  if (!st.is_ok()) return no_kernel_dtype(a, t);
  return std::move(k);
}

namespace {

// ================================================ Where ================================================

template <typename U, typename I>
__global__ void where_kernel(const uint8_t* __restrict__ c, const U* __restrict__ x, const U* __restrict__ y,
                             U* __restrict__ out, Walk<3> w, int64_t n) {
  QD_GRID_LOOP(i, n) {
    int64_t off[3];
    walk_offsets<I>(w, i, off);
    out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename U>
class WhereKernel final : public GenericKernel {
 public:
  WhereKernel(const Walk<3>& w, int64_t n, bool small) : w_(w), n_(n), small_(small) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    const auto* c = static_cast<const uint8_t*>(in[0]);
    const U* x = static_cast<const U*>(in[1]);
    const U* y = static_cast<const U*>(in[2]);
    U* o = static_cast<U*>(out[0]);
    if (small_) where_kernel<U, int32_t><<<grid_1d(n_), kBlock, 0, s>>>(c, x, y, o, w_, n_);
    else where_kernel<U, int64_t><<<grid_1d(n_), kBlock, 0, s>>>(c, x, y, o, w_, n_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  Walk<3> w_;
  int64_t n_;
  bool small_;
};

}  // namespace

MadeKernel make_where(const NodeArgs& a) {
  if (a.in[0].dtype != DType::kBool) return no_kernel_dtype(a, a.in[0].dtype, "the condition");
  const DType t = a.in[1].dtype;
  if (a.in[2].dtype != t || a.out[0].dtype != t) return no_kernel(a, "X, Y and the output must have one type");
  Walk<3> w;
  bool small = false;
  QD_RETURN_IF_ERROR(broadcast_walk<3>(a, 0, &w, &small));
  KernelPtr k;
  QD_RETURN_IF_ERROR(dispatch_width(t, [&](auto tag) {
    k.reset(new WhereKernel<decltype(tag)>(w, volume(a.out[0].shape), small));
    return Status::ok();
  }));
  return std::move(k);
}

}  // namespace qd::cuda
