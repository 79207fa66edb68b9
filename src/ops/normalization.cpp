// Normalizations over statistics computed from the input itself: InstanceNormalization (per (n, c) plane; PyTorch's
// GroupNorm exports as Reshape -> InstanceNormalization -> Reshape -> Mul -> Add before opset 18),
// GroupNormalization (opsets 18 and 21), LayerNormalization (opset 17),
// MeanVarianceNormalization, and LRN (across channels).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/op_geometry.h"
#include "ops/nn_util.h"

namespace qd::ops {

namespace {

Expected<double> read_epsilon(const Node& n, float def) {
  const float eps = QD_TRY(n.attrs.get_float("epsilon", def));
  if (!std::isfinite(eps) || eps < 0) {
    return invalid("epsilon must be a finite, non-negative number, got " + std::to_string(eps));
  }
  return static_cast<double>(eps);
}

// Mean and (biased) variance of n values, two-pass for accuracy.
template <typename T>
void mean_var(const T* x, int64_t n, int64_t stride, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i * stride];
  const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
  double v = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i * stride] - m;
    v += d * d;
  }
  *mean = m;
  *var = n > 0 ? v / static_cast<double>(n) : 0.0;
}

}  // namespace

// ---- InstanceNormalization: y = scale[c] * (x - mean_nc) / sqrt(var_nc + epsilon) + B[c] ----

Status infer_InstanceNormalization(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  QD_RETURN_IF_ERROR(read_epsilon(c.node, 1e-5f).status());
  const Shape& x = c.shape(0);
  if (x.size() < 2) return invalid("input must have shape [N, C, D1, ...], got rank " + std::to_string(x.size()));
  for (size_t i = 1; i <= 2; ++i) {
    if (!is_float(c.dtype(i))) return unsupported(std::string(i == 1 ? "scale" : "B") + " must be floating point");
    if (c.shape(i) != Shape{x[1]}) {
      return invalid(std::string(i == 1 ? "scale" : "B") + " must have shape [" + std::to_string(x[1]) +
                     "] (one value per channel of the input " + shape_str(x) + "), got " + shape_str(c.shape(i)));
    }
  }
  return infer_same_as_input(c);
}

Status run_InstanceNormalization(KernelCtx& c) {
  const double eps = QD_TRY(read_epsilon(c.node, 1e-5f));
  const Shape& xs = c.in[0]->shape();
  if (c.in[0]->numel() == 0) return Status::ok();
  const int64_t ch = xs[1], planes = xs[0] * xs[1];
  const int64_t n = planes == 0 ? 0 : c.in[0]->numel() / planes;
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t p = 0; p < planes; ++p) {
      const T* x = c.in[0]->data<T>() + p * n;
      T* y = c.out[0]->data<T>() + p * n;
      double mean, var;
      mean_var(x, n, 1, &mean, &var);
      const double a = c.in[1]->get_f64(p % ch) / std::sqrt(var + eps), b = c.in[2]->get_f64(p % ch);
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>((x[i] - mean) * a + b);
    }
    return Status::ok();
  });
}

// ---- GroupNormalization: y = scale * (x - mean_ng) / sqrt(var_ng + epsilon) + bias, statistics over the C / G
// channels of group g (and every spatial position) ----

Expected<GroupNormGeom> group_norm_geom(const Node& n, const Shape& x) {
  if (x.size() < 2) return invalid("input must have shape [N, C, D1, ...], got rank " + std::to_string(x.size()));
  GroupNormGeom g;
  g.groups = QD_TRY(n.attrs.get_int("num_groups"));
  g.channels = x[1];
  if (g.groups <= 0 || g.channels % g.groups != 0) {
    return invalid("num_groups " + std::to_string(g.groups) + " must be positive and divide the " +
                   std::to_string(g.channels) + " channels");
  }
  g.spatial = range_product(x, 2, x.size());
  // Opset 18 gave scale and bias one value per group; opset 21 one per channel (as PyTorch's GroupNorm).
  g.per_group = n.opset < 21;
  const int64_t stash = QD_TRY(n.attrs.get_int("stash_type", 1));
  if (stash != 1) return unsupported("stash_type " + std::to_string(stash) + " (1 = float32 only)");
  return g;
}

Status infer_GroupNormalization(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  QD_RETURN_IF_ERROR(read_epsilon(c.node, 1e-5f).status());
  const GroupNormGeom g = QD_TRY(group_norm_geom(c.node, c.shape(0)));
  const int64_t want = g.per_group ? g.groups : g.channels;
  for (size_t i = 1; i <= 2; ++i) {
    if (!is_float(c.dtype(i))) return unsupported(std::string(i == 1 ? "scale" : "bias") + " must be floating point");
    if (c.shape(i) != Shape{want}) {
      return invalid(std::string(i == 1 ? "scale" : "bias") + " must have shape [" + std::to_string(want) + "] (one " +
                     (g.per_group ? "value per group in opset " : "value per channel in opset ") +
                     std::to_string(c.node.opset) + "), got " + shape_str(c.shape(i)));
    }
  }
  return infer_same_as_input(c);
}

Status run_GroupNormalization(KernelCtx& c) {
  const double eps = QD_TRY(read_epsilon(c.node, 1e-5f));
  const GroupNormGeom g = QD_TRY(group_norm_geom(c.node, c.in[0]->shape()));
  const int64_t cpg = g.channels / g.groups, len = cpg * g.spatial;
  const int64_t rows = len == 0 ? 0 : c.in[0]->numel() / len;
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = c.in[0]->data<T>() + r * len;
      T* y = c.out[0]->data<T>() + r * len;
      double mean, var;
      mean_var(x, len, 1, &mean, &var);
      const double inv = 1.0 / std::sqrt(var + eps);
      const int64_t grp = r % g.groups;
      for (int64_t k = 0; k < cpg; ++k) {
        const int64_t p = g.per_group ? grp : grp * cpg + k;
        const double a = c.in[1]->get_f64(p) * inv, b = c.in[2]->get_f64(p);
        for (int64_t i = k * g.spatial; i < (k + 1) * g.spatial; ++i) y[i] = static_cast<T>((x[i] - mean) * a + b);
      }
    }
    return Status::ok();
  });
}

// ---- LayerNormalization (opset 17): normalizes over dims [axis, rank); Scale and B broadcast to X ----

Expected<LayerNormGeom> layer_norm_geom(const Node& n, const Shape& x) {
  LayerNormGeom g;
  g.axis = QD_TRY(normalize_axis(QD_TRY(n.attrs.get_int("axis", -1)), x.size()));
  g.outer = range_product(x, 0, g.axis);
  g.inner = range_product(x, g.axis, x.size());
  const int64_t stash = QD_TRY(n.attrs.get_int("stash_type", 1));
  if (stash == 1) g.stash = DType::kFloat32;
  else if (stash == 11) g.stash = DType::kFloat64;
  else return unsupported("stash_type " + std::to_string(stash) + " (1 = float32 and 11 = float64 only)");
  return g;
}

Status infer_LayerNormalization(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  QD_RETURN_IF_ERROR(read_epsilon(c.node, 1e-5f).status());
  const Shape& x = c.shape(0);
  const LayerNormGeom g = QD_TRY(layer_norm_geom(c.node, x));
  for (size_t i = 1; i <= 2; ++i) {
    if (!c.has_input(i)) continue;
    auto b = broadcast_shapes(x, c.shape(i));
    if (!b || *b != x) {
      return invalid(std::string(i == 1 ? "Scale" : "B") + " of shape " + shape_str(c.shape(i)) +
                     " does not broadcast to the input's shape " + shape_str(x) + " (it usually has the normalized shape " +
                     shape_str(Shape(x.begin() + g.axis, x.end())) + ")");
    }
  }
  c.set_output(0, c.dtype(0), x);
  Shape stat(x.begin(), x.begin() + g.axis);
  stat.resize(x.size(), 1);
  for (size_t i = 1; i <= 2; ++i) {
    if (c.has_output(i)) c.set_output(i, g.stash, stat);
  }
  return Status::ok();
}

Status run_LayerNormalization(KernelCtx& c) {
  const double eps = QD_TRY(read_epsilon(c.node, 1e-5f));
  const Shape& xs = c.in[0]->shape();
  const LayerNormGeom g = QD_TRY(layer_norm_geom(c.node, xs));
  const Tensor* scale = c.in[1];
  const Tensor* bias = c.in.size() > 2 ? c.in[2] : nullptr;
  Tensor* mean_out = c.out.size() > 1 ? c.out[1] : nullptr;
  Tensor* inv_out = c.out.size() > 2 ? c.out[2] : nullptr;
  if (c.in[0]->numel() == 0) {
    // Statistics of empty groups are undefined: NaN (the outputs exist only when their shape is non-empty).
    for (Tensor* t : {mean_out, inv_out}) {
      for (int64_t i = 0; t && i < t->numel(); ++i) t->set_f64(i, std::numeric_limits<double>::quiet_NaN());
    }
    return Status::ok();
  }
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* y = c.out[0]->data<T>();
    BroadcastIndex si(scale->shape(), xs);
    BroadcastIndex bi(bias ? bias->shape() : Shape{}, xs);
    const T* sp = scale->data<T>();
    const T* bp = bias ? bias->data<T>() : nullptr;
    for (int64_t o = 0; o < g.outer; ++o) {
      double mean, var;
      mean_var(x + o * g.inner, g.inner, 1, &mean, &var);
      const double inv = 1.0 / std::sqrt(var + eps);
      if (mean_out) mean_out->set_f64(o, mean);
      if (inv_out) inv_out->set_f64(o, inv);
      for (int64_t i = o * g.inner; i < (o + 1) * g.inner; ++i, si.next(), bi.next()) {
        double v = (x[i] - mean) * inv * sp[si.index()];
        if (bp) v += bp[bi.index()];
        y[i] = static_cast<T>(v);
      }
    }
    return Status::ok();
  });
}

// ---- MeanVarianceNormalization: y = (x - mean) / (sqrt(var) + 1e-9), statistics over `axes` (default N, H, W) ----

namespace {
// Input shape with the reduced axes set to 1 (each group of reduced elements maps to one slot of it).
Expected<Shape> mvn_stat_shape(const Node& n, const Shape& x) {
  const std::vector<int64_t> axes = QD_TRY(n.attrs.get_ints("axes", std::vector<int64_t>{0, 2, 3}));
  Shape s = x;
  std::vector<char> seen(x.size(), 0);
  for (int64_t a : axes) {
    auto ax = normalize_axis(a, x.size());
    if (!ax) {
      return invalid("axes " + std::to_string(a) + " is out of range for an input of rank " + std::to_string(x.size()) +
                     (n.attrs.has("axes") ? "" : " (the default axes are [0, 2, 3], for 4-d inputs; give axes for other ranks)"));
    }
    if (seen[*ax]) return invalid("axis " + std::to_string(a) + " appears twice in axes");
    seen[*ax] = 1;
    s[*ax] = 1;
  }
  return s;
}
}  // namespace

Status infer_MeanVarianceNormalization(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  QD_RETURN_IF_ERROR(mvn_stat_shape(c.node, c.shape(0)).status());
  return infer_same_as_input(c);
}

Status run_MeanVarianceNormalization(KernelCtx& c) {
  const Shape& xs = c.in[0]->shape();
  const Shape ss = QD_TRY(mvn_stat_shape(c.node, xs));
  if (c.in[0]->numel() == 0) return Status::ok();  // (an empty tensor may still have one huge dim)
  const int64_t groups = numel(ss);
  const int64_t per_group = groups == 0 ? 0 : c.in[0]->numel() / groups;
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* y = c.out[0]->data<T>();
    const int64_t n = c.in[0]->numel();
    std::vector<double> sum(groups, 0.0), sq(groups, 0.0);
    {
      BroadcastIndex gi(ss, xs);
      for (int64_t i = 0; i < n; ++i, gi.next()) sum[gi.index()] += x[i];
    }
    for (double& s : sum) s /= static_cast<double>(per_group);  // now the mean
    {
      BroadcastIndex gi(ss, xs);
      for (int64_t i = 0; i < n; ++i, gi.next()) {
        const double d = x[i] - sum[gi.index()];
        sq[gi.index()] += d * d;
      }
    }
    for (double& v : sq) v = std::sqrt(v / static_cast<double>(per_group)) + 1e-9;  // now std + epsilon
    BroadcastIndex gi(ss, xs);
    for (int64_t i = 0; i < n; ++i, gi.next()) y[i] = static_cast<T>((x[i] - sum[gi.index()]) / sq[gi.index()]);
    return Status::ok();
  });
}

// ---- LRN: y = x / (bias + alpha / size * sum of x^2 over neighbouring channels)^beta ----

namespace {
struct LrnParams {
  double alpha, beta, bias;
  int64_t size;
};
Expected<LrnParams> lrn_params(const Node& n) {
  LrnParams p;
  p.alpha = QD_TRY(n.attrs.get_float("alpha", 1e-4f));
  p.beta = QD_TRY(n.attrs.get_float("beta", 0.75f));
  p.bias = QD_TRY(n.attrs.get_float("bias", 1.0f));
  if (!n.attrs.has("size")) return invalid("the size attribute (number of channels to sum over) is required");
  p.size = QD_TRY(n.attrs.get_int("size"));
  if (p.size <= 0) return invalid("size must be positive, got " + std::to_string(p.size));
  if (!std::isfinite(p.alpha) || !std::isfinite(p.beta) || !std::isfinite(p.bias)) {
    return invalid("alpha, beta and bias must be finite");
  }
  return p;
}
}  // namespace

Status infer_LRN(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  QD_RETURN_IF_ERROR(lrn_params(c.node).status());
  if (c.rank(0) < 2) return invalid("input must have shape [N, C, D1, ...], got rank " + std::to_string(c.rank(0)));
  return infer_same_as_input(c);
}

Status run_LRN(KernelCtx& c) {
  const LrnParams p = QD_TRY(lrn_params(c.node));
  const Shape& xs = c.in[0]->shape();
  if (c.in[0]->numel() == 0) return Status::ok();
  const int64_t n = xs[0], ch = xs[1];
  int64_t spatial = 1;
  for (size_t d = 2; d < xs.size(); ++d) spatial *= xs[d];
  const int64_t before = (p.size - 1) / 2, after = p.size - 1 - before;  // floor and ceil of (size - 1) / 2
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* y = c.out[0]->data<T>();
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t k = 0; k < ch; ++k) {
        const int64_t lo = std::max<int64_t>(0, k - before), hi = std::min<int64_t>(ch - 1, k + after);
        for (int64_t s = 0; s < spatial; ++s) {
          double sq = 0;
          for (int64_t j = lo; j <= hi; ++j) {
            const double v = x[(b * ch + j) * spatial + s];
            sq += v * v;
          }
          const int64_t i = (b * ch + k) * spatial + s;
          y[i] = static_cast<T>(x[i] / std::pow(p.bias + p.alpha / static_cast<double>(p.size) * sq, p.beta));
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace qd::ops
