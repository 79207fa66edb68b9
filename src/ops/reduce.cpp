// Reduce* ops: Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare over a set of axes.
// Axes come from the `axes` attribute, or from the optional second input: ReduceSum from opset 13 on, the others from
// opset 18 on; no axes means every axis (or, with noop_with_empty_axes=1, the identity).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/common.h"
#include "ops/op_geometry.h"

namespace qd::ops {

Expected<std::vector<int64_t>> reduce_axes(const InferCtx* ic, const KernelCtx* kc) {
  const Node& n = ic ? ic->node : kc->node;
  const int since = n.op == OpType::ReduceSum ? 13 : 18;
  if (n.opset >= since) {
    if (n.attrs.has("axes")) {
      return invalid("from opset " + std::to_string(since) + " " + op_name(n.op) +
                     " takes axes as its second input, not as an attribute");
    }
    if (ic) {
      auto v = ints_from_input_or_attr(*ic, 1, "axes");
      if (!v && v.status().code() == StatusCode::kUnsupported) {
        return unsupported(std::string(op_name(n.op)) + "'s axes (input 1) must be a constant (an initializer, or computable from shapes): "
                           "qdeploy fixes every output shape at build time, and here the axes are runtime data");
      }
      return v;
    }
    const Tensor* t = kc->in.size() > 1 ? kc->in[1] : nullptr;
    if (!t) return std::vector<int64_t>{};
    if (!is_integer(t->dtype())) return invalid("axes must be an integer tensor");
    std::vector<int64_t> v(static_cast<size_t>(t->numel()));
    for (int64_t i = 0; i < t->numel(); ++i) v[i] = t->get_i64(i);
    return v;
  }
  if ((ic && ic->has_input(1)) || (kc && kc->in.size() > 1 && kc->in[1])) {
    return invalid(std::string(op_name(n.op)) + " takes axes as an attribute in opset " + std::to_string(n.opset));
  }
  return n.attrs.get_ints("axes", std::vector<int64_t>{});
}

Expected<ReduceGeom> reduce_geom(const Node& n, const Shape& x, const std::vector<int64_t>& axes) {
  const int64_t keepdims = QD_TRY(n.attrs.get_int("keepdims", 1));
  const int64_t noop_empty = QD_TRY(n.attrs.get_int("noop_with_empty_axes", 0));
  if (keepdims != 0 && keepdims != 1) return invalid("keepdims must be 0 or 1, got " + std::to_string(keepdims));
  if (noop_empty != 0 && noop_empty != 1) {
    return invalid("noop_with_empty_axes must be 0 or 1, got " + std::to_string(noop_empty));
  }
  ReduceGeom g;
  std::vector<char> reduced(x.size(), axes.empty() ? 1 : 0);
  if (axes.empty() && noop_empty) {
    g.noop = true;
    std::fill(reduced.begin(), reduced.end(), 0);
  }
  for (int64_t a : axes) {
    auto ax = normalize_axis(a, x.size());
    if (!ax) {
      return invalid("axis " + std::to_string(a) + " is out of range for an input of rank " + std::to_string(x.size()) +
                     " (shape " + shape_str(x) + ")");
    }
    if (reduced[*ax]) return invalid("axis " + std::to_string(a) + " appears twice in axes");
    reduced[*ax] = 1;
  }
  g.kept = x;
  for (size_t d = 0; d < x.size(); ++d) {
    if (reduced[d]) g.kept[d] = 1;
    if (!reduced[d] || keepdims) g.out.push_back(g.kept[d]);
  }
  return g;
}

namespace {

enum class Kind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// Integer saturating conversion from double (NaN -> 0); plain cast for floats.
template <typename T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Accumulates every input element into its output slot, then finishes each slot.
// Floats accumulate in double. Integer Sum/Mean/Prod/SumSquare/L1 accumulate in wrapping 64-bit arithmetic (exact
// up to overflow, never undefined behaviour); integer L2/LogSum/LogSumExp go through double.
template <typename T>
void reduce_kernel(Kind kind, const Tensor& xt, const ReduceGeom& g, Tensor& yt) {
  const T* x = xt.data<T>();
  T* y = yt.data<T>();
  const int64_t n = xt.numel(), m = yt.numel();
  const int64_t count = m == 0 ? 0 : n / m;
  if (n == 0) {
    // Empty reductions give the identity of each reduction (before touching any product of the input's dims).
    double v = 0;
    switch (kind) {
      case Kind::kProd: v = 1; break;
      case Kind::kMax: v = -std::numeric_limits<double>::infinity(); break;
      case Kind::kMin: v = std::numeric_limits<double>::infinity(); break;
      case Kind::kMean: v = std::numeric_limits<double>::quiet_NaN(); break;
      case Kind::kLogSum:
      case Kind::kLogSumExp: v = -std::numeric_limits<double>::infinity(); break;
      default: break;
    }
    for (int64_t i = 0; i < m; ++i) y[i] = from_double<T>(v);
    return;
  }
  if (kind == Kind::kMax || kind == Kind::kMin) {
    const bool is_max = kind == Kind::kMax;
    // An empty reduction gives the identity of max/min: lowest (-inf) / highest (+inf).
    const T init = is_max ? (std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest())
                          : (std::is_floating_point_v<T> ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max());
    for (int64_t i = 0; i < m; ++i) y[i] = init;
    BroadcastIndex bi(g.kept, xt.shape());
    for (int64_t i = 0; i < n; ++i, bi.next()) {
      T& acc = y[bi.index()];
      const T v = x[i];
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v)) {
          acc = v;  // NaN propagates, as numpy's max does
          continue;
        }
        if (std::isnan(acc)) continue;
      }
      if (is_max ? v > acc : v < acc) acc = v;
    }
    return;
  }
  constexpr bool kInt = !std::is_floating_point_v<T>;
  const bool wrap_int = kInt && (kind == Kind::kSum || kind == Kind::kMean || kind == Kind::kProd ||
                                 kind == Kind::kSumSquare || kind == Kind::kL1);
  if (wrap_int) {
    std::vector<uint64_t> acc(m, kind == Kind::kProd ? 1 : 0);
    BroadcastIndex bi(g.kept, xt.shape());
    for (int64_t i = 0; i < n; ++i, bi.next()) {
      uint64_t& a = acc[bi.index()];
      const auto v = static_cast<uint64_t>(static_cast<int64_t>(x[i]));
      if (kind == Kind::kProd) a *= v;
      else if (kind == Kind::kSumSquare) a += v * v;
      else if (kind == Kind::kL1) a += (std::is_signed_v<T> && x[i] < 0) ? uint64_t{0} - v : v;
      else a += v;
    }
    for (int64_t i = 0; i < m; ++i) {
      int64_t r = static_cast<int64_t>(acc[i]);
      if (kind == Kind::kMean) r = count > 0 ? r / count : 0;
      y[i] = static_cast<T>(r);
    }
    return;
  }
  if (kind == Kind::kLogSumExp) {
    // Running (max, sum of exp(x - max)) per slot keeps exp() finite.
    std::vector<double> mx(m, -std::numeric_limits<double>::infinity()), s(m, 0.0);
    BroadcastIndex bi(g.kept, xt.shape());
    for (int64_t i = 0; i < n; ++i, bi.next()) {
      const double v = static_cast<double>(x[i]);
      double& a = mx[bi.index()];
      double& b = s[bi.index()];
      if (std::isnan(v)) {
        a = v;
        b = 1;
      } else if (v == -std::numeric_limits<double>::infinity()) {
        continue;  // exp(-inf) = 0
      } else if (v > a) {
        b = b * std::exp(a - v) + 1;
        a = v;
      } else if (!std::isnan(a)) {
        b += v == a ? 1.0 : std::exp(v - a);
      }
    }
    for (int64_t i = 0; i < m; ++i) y[i] = from_double<T>(s[i] == 0 ? -std::numeric_limits<double>::infinity() : mx[i] + std::log(s[i]));
    return;
  }
  std::vector<double> acc(m, kind == Kind::kProd ? 1.0 : 0.0);
  BroadcastIndex bi(g.kept, xt.shape());
  for (int64_t i = 0; i < n; ++i, bi.next()) {
    double& a = acc[bi.index()];
    const double v = static_cast<double>(x[i]);
    switch (kind) {
      case Kind::kProd: a *= v; break;
      case Kind::kL1: a += std::fabs(v); break;
      case Kind::kL2:
      case Kind::kSumSquare: a += v * v; break;
      default: a += v; break;  // Sum, Mean, LogSum
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    double r = acc[i];
    if (kind == Kind::kMean) r = r / static_cast<double>(count);
    else if (kind == Kind::kL2) r = std::sqrt(r);
    else if (kind == Kind::kLogSum) r = std::log(r);
    y[i] = from_double<T>(r);
  }
}

Status infer_reduce(InferCtx& c) {
  const std::vector<int64_t> axes = QD_TRY(reduce_axes(&c, nullptr));
  const ReduceGeom g = QD_TRY(reduce_geom(c.node, c.shape(0), axes));
  if (c.dtype(0) == DType::kBool || c.dtype(0) == DType::kFloat16 || c.dtype(0) == DType::kString) {
    return unsupported(std::string(op_name(c.node.op)) + " on " + dtype_name(c.dtype(0)) + " (numeric types other than float16 only)");
  }
  c.set_output(0, c.dtype(0), g.noop ? c.shape(0) : g.out);
  return Status::ok();
}

Status run_reduce(KernelCtx& c, Kind kind) {
  const std::vector<int64_t> axes = QD_TRY(reduce_axes(nullptr, &c));
  const ReduceGeom g = QD_TRY(reduce_geom(c.node, c.in[0]->shape(), axes));
  if (g.noop) {
    std::memcpy(c.out[0]->raw(), c.in[0]->raw(), c.in[0]->nbytes());
    return Status::ok();
  }
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    reduce_kernel<decltype(tag)>(kind, *c.in[0], g, *c.out[0]);
    return Status::ok();
  });
}

}  // namespace

#define QD_REDUCE(Name, kind)                                    \
  Status infer_##Name(InferCtx& c) { return infer_reduce(c); }   \
  Status run_##Name(KernelCtx& c) { return run_reduce(c, kind); }

QD_REDUCE(ReduceSum, Kind::kSum)
QD_REDUCE(ReduceMean, Kind::kMean)
QD_REDUCE(ReduceMax, Kind::kMax)
QD_REDUCE(ReduceMin, Kind::kMin)
QD_REDUCE(ReduceProd, Kind::kProd)
QD_REDUCE(ReduceL1, Kind::kL1)
QD_REDUCE(ReduceL2, Kind::kL2)
QD_REDUCE(ReduceLogSum, Kind::kLogSum)
QD_REDUCE(ReduceLogSumExp, Kind::kLogSumExp)
QD_REDUCE(ReduceSumSquare, Kind::kSumSquare)
#undef QD_REDUCE

}  // namespace qd::ops
