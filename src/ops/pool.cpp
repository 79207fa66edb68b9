// Pooling over N-d sliding windows: MaxPool (with its optional Indices output), AveragePool, LpPool, and the
// Global* forms that pool each channel's whole spatial extent.
#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/nn_util.h"
#include "ops/window.h"

namespace qd::ops {

namespace {

// Window geometry per spatial dim d and output position o, clipped to the input so that the kernels never visit
// padding (the work per output is bounded by the input, whatever kernel/pads a model asks for):
//   first[d][o]  input position of the first tap inside the input
//   taps[d][o]   number of taps inside the input (0: the window lies in padding only)
//   padded[d][o] number of taps inside the padded input (AveragePool's count_include_pad divisor)
struct PoolGeom {
  Shape out;  // [N, C, O1..Ok]
  std::vector<int64_t> in_sp, out_sp, dil;
  std::vector<std::vector<int64_t>> first, taps, padded;
};

// Number of taps j in [0, kernel) with 0 <= start + j*dil < limit; *first_pos gets the first such position.
int64_t count_taps(int64_t start, int64_t kernel, int64_t dil, int64_t limit, int64_t* first_pos) {
  const int64_t j0 = start >= 0 ? 0 : (-start + dil - 1) / dil;
  if (start > limit - 1) return 0;
  const int64_t j1 = std::min(kernel - 1, (limit - 1 - start) / dil);
  if (first_pos) *first_pos = start + j0 * dil;
  return std::max<int64_t>(0, j1 - j0 + 1);
}

// `tables`: also fill first/taps/padded (execution only; shape inference must not allocate per output position, as a
// declared input shape can be huge).
Expected<PoolGeom> pool_geom(const Node& node, const Shape& x, bool tables) {
  if (x.size() < 3) {
    return invalid(std::string(op_name(node.op)) + " takes an input of shape [N, C, D1, ...] (rank >= 3), got " +
                   (x.empty() ? std::string("a scalar") : shape_str(x)));
  }
  if (!node.attrs.has("kernel_shape")) return invalid("the kernel_shape attribute is required");
  const size_t k = x.size() - 2;
  Window w = QD_TRY(read_window(node.attrs, k, {}));
  const int64_t ceil_mode = QD_TRY(node.attrs.get_int("ceil_mode", 0));
  if (ceil_mode != 0 && ceil_mode != 1) return invalid("ceil_mode must be 0 or 1, got " + std::to_string(ceil_mode));
  PoolGeom g;
  g.in_sp.assign(x.begin() + 2, x.end());
  g.out_sp = QD_TRY(window_output(g.in_sp, &w, ceil_mode != 0));
  g.out = {x[0], x[1]};
  g.out.insert(g.out.end(), g.out_sp.begin(), g.out_sp.end());
  QD_RETURN_IF_ERROR(checked_numel(g.out).status());
  g.dil = w.dilations;
  if (!tables || numel(g.out) == 0) return g;  // nothing to compute for an empty output
  g.first.resize(k);
  g.taps.resize(k);
  g.padded.resize(k);
  for (size_t d = 0; d < k; ++d) {
    const int64_t pb = w.pads[d], pe = w.pads[d + k];
    g.first[d].resize(g.out_sp[d]);
    g.taps[d].resize(g.out_sp[d]);
    g.padded[d].resize(g.out_sp[d]);
    for (int64_t o = 0; o < g.out_sp[d]; ++o) {
      const int64_t start = o * w.strides[d] - pb;
      int64_t first = 0;
      g.taps[d][o] = count_taps(start, w.kernel[d], w.dilations[d], g.in_sp[d], &first);
      g.first[d][o] = first;
      g.padded[d][o] = count_taps(start + pb, w.kernel[d], w.dilations[d], g.in_sp[d] + pb + pe, nullptr);
    }
  }
  return g;
}

// Walks the output positions of one (n, c) plane in order; for the current one, for_each_tap(f) calls
// f(flat spatial input index) for every tap inside the input.
class WindowWalker {
 public:
  explicit WindowWalker(const PoolGeom& g) : g_(g), k_(g.in_sp.size()), opos_(k_, 0), tpos_(k_, 0) {
    in_strides_ = strides_of(g.in_sp);
  }

  // Number of taps inside the input and inside the padded input for the current output position.
  int64_t taps() const {
    int64_t n = 1;
    for (size_t d = 0; d < k_; ++d) n *= g_.taps[d][opos_[d]];
    return n;
  }
  int64_t padded_taps() const {
    int64_t n = 1;
    for (size_t d = 0; d < k_; ++d) n *= g_.padded[d][opos_[d]];
    return n;
  }
  template <typename F>
  void for_each_tap(F f) {
    for (size_t d = 0; d < k_; ++d) {
      if (g_.taps[d][opos_[d]] == 0) return;
      tpos_[d] = 0;
    }
    int64_t flat = 0;
    for (size_t d = 0; d < k_; ++d) flat += g_.first[d][opos_[d]] * in_strides_[d];
    // The innermost dim (stride 1 in the input) runs as a plain loop; an odometer walks the outer dims.
    const size_t last = k_ - 1;
    const int64_t inner_taps = g_.taps[last][opos_[last]], inner_step = g_.dil[last];
    for (;;) {
      for (int64_t t = 0; t < inner_taps; ++t) f(flat + t * inner_step);
      size_t d = last;
      for (; d-- > 0;) {
        flat += g_.dil[d] * in_strides_[d];
        if (++tpos_[d] < g_.taps[d][opos_[d]]) break;
        flat -= tpos_[d] * g_.dil[d] * in_strides_[d];
        tpos_[d] = 0;
      }
      if (d == static_cast<size_t>(-1)) return;
    }
  }
  // Advances to the next output position; false after the last.
  bool next() {
    for (size_t d = k_; d-- > 0;) {
      if (++opos_[d] < g_.out_sp[d]) return true;
      opos_[d] = 0;
    }
    return false;
  }

 private:
  const PoolGeom& g_;
  size_t k_;
  std::vector<int64_t> in_strides_, opos_, tpos_;
};

int64_t spatial_numel(const std::vector<int64_t>& s) { return range_product(s, 0, s.size()); }

// Runs `per_window(walker, x_plane, out_index)` for every output element (each (n, c) plane, each position).
template <typename T, typename F>
void pool_planes(const PoolGeom& g, const Tensor& x, F per_window) {
  if (has_zero_dim(g.out)) return;
  const int64_t planes = g.out[0] * g.out[1];
  const int64_t in_plane = spatial_numel(g.in_sp), out_plane = spatial_numel(g.out_sp);
  for (int64_t p = 0; p < planes; ++p) {
    WindowWalker walker(g);
    const T* xp = x.data<T>() + p * in_plane;
    int64_t oi = p * out_plane;
    do {
      per_window(walker, xp, p, oi++);
    } while (walker.next());
  }
}

// MaxPool and GlobalMaxPool take any numeric type (int8/uint8 for the INT8 data path); the others float only.
Status check_pool_type(const InferCtx& c, bool float_only) {
  if (float_only) return require_float(c, 0);
  const DType t = c.dtype(0);
  if (t == DType::kBool || t == DType::kFloat16 || t == DType::kString) {
    return unsupported(std::string(op_name(c.node.op)) + " on " + dtype_name(t) + " (numeric types other than float16 only)");
  }
  return Status::ok();
}

Status infer_window_pool(InferCtx& c, bool float_only) {
  QD_RETURN_IF_ERROR(check_pool_type(c, float_only));
  const PoolGeom g = QD_TRY(pool_geom(c.node, c.shape(0), false));
  c.set_output(0, c.dtype(0), g.out);
  return Status::ok();
}

}  // namespace

// ---- MaxPool ----

Status infer_MaxPool(InferCtx& c) {
  QD_RETURN_IF_ERROR(infer_window_pool(c, false));
  const int64_t order = QD_TRY(c.node.attrs.get_int("storage_order", 0));
  if (order != 0 && order != 1) return invalid("storage_order must be 0 (row major) or 1 (column major), got " + std::to_string(order));
  if (c.has_output(1)) c.set_output(1, DType::kInt64, c.out_shape(0));
  return Status::ok();
}

Status run_MaxPool(KernelCtx& c) {
  const PoolGeom g = QD_TRY(pool_geom(c.node, c.in[0]->shape(), true));
  const bool col_major = QD_TRY(c.node.attrs.get_int("storage_order", 0)) == 1;
  int64_t* indices = c.out.size() > 1 && c.out[1] ? c.out[1]->data<int64_t>() : nullptr;
  const int64_t in_plane = spatial_numel(g.in_sp);
  // Column-major strides for the Indices output with storage_order=1.
  std::vector<int64_t> col_strides(g.in_sp.size(), 1);
  for (size_t d = 1; d < g.in_sp.size(); ++d) col_strides[d] = col_strides[d - 1] * g.in_sp[d - 1];
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* y = c.out[0]->data<T>();
    pool_planes<T>(g, *c.in[0], [&](WindowWalker& w, const T* xp, int64_t plane, int64_t oi) {
      T best = std::numeric_limits<T>::lowest();
      int64_t best_at = -1;
      w.for_each_tap([&](int64_t flat) {
        if (best_at < 0 || xp[flat] > best) {
          best = xp[flat];
          best_at = flat;
        }
      });
      y[oi] = best;
      if (indices) {
        int64_t idx = best_at;
        if (col_major && best_at >= 0) {
          // Row-major flat spatial index -> positions -> column-major index.
          idx = 0;
          int64_t rest = best_at;
          for (size_t d = g.in_sp.size(); d-- > 0;) {
            idx += (rest % g.in_sp[d]) * col_strides[d];
            rest /= g.in_sp[d];
          }
        }
        indices[oi] = idx < 0 ? -1 : plane * in_plane + idx;
      }
    });
    return Status::ok();
  });
}

// ---- AveragePool ----

Status infer_AveragePool(InferCtx& c) {
  const int64_t cip = QD_TRY(c.node.attrs.get_int("count_include_pad", 0));
  if (cip != 0 && cip != 1) return invalid("count_include_pad must be 0 or 1, got " + std::to_string(cip));
  return infer_window_pool(c, true);
}

Status run_AveragePool(KernelCtx& c) {
  const PoolGeom g = QD_TRY(pool_geom(c.node, c.in[0]->shape(), true));
  const bool include_pad = QD_TRY(c.node.attrs.get_int("count_include_pad", 0)) != 0;
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* y = c.out[0]->data<T>();
    pool_planes<T>(g, *c.in[0], [&](WindowWalker& w, const T* xp, int64_t, int64_t oi) {
      double sum = 0;
      w.for_each_tap([&](int64_t flat) { sum += xp[flat]; });
      const int64_t n = include_pad ? w.padded_taps() : w.taps();
      // A window entirely in padding averages nothing: NaN, as ONNX's reference gives.
      y[oi] = static_cast<T>(n > 0 ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN());
    });
    return Status::ok();
  });
}

// ---- LpPool ----

namespace {
Expected<double> lp_order(const Node& n) {
  const int64_t p = QD_TRY(n.attrs.get_int("p", 2));
  if (p <= 0 || p > 1024) return invalid("p must be a positive integer (1 for L1, 2 for L2), got " + std::to_string(p));
  return static_cast<double>(p);
}

// (sum |v|^p)^(1/p) with exact paths for p = 1 and p = 2.
struct LpAcc {
  double p, sum = 0;
  void add(double v) {
    const double a = std::fabs(v);
    sum += p == 1 ? a : p == 2 ? a * a : std::pow(a, p);
  }
  double result() const { return p == 1 ? sum : p == 2 ? std::sqrt(sum) : std::pow(sum, 1.0 / p); }
};
}  // namespace

Status infer_LpPool(InferCtx& c) {
  QD_RETURN_IF_ERROR(lp_order(c.node).status());
  return infer_window_pool(c, true);
}

Status run_LpPool(KernelCtx& c) {
  const PoolGeom g = QD_TRY(pool_geom(c.node, c.in[0]->shape(), true));
  const double p = QD_TRY(lp_order(c.node));
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* y = c.out[0]->data<T>();
    pool_planes<T>(g, *c.in[0], [&](WindowWalker& w, const T* xp, int64_t, int64_t oi) {
      LpAcc acc{p};
      w.for_each_tap([&](int64_t flat) { acc.add(xp[flat]); });
      y[oi] = static_cast<T>(acc.result());  // padding contributes 0
    });
    return Status::ok();
  });
}

// ---- Global pools: one window per (n, c) plane covering every spatial position ----

namespace {
Status infer_global(InferCtx& c, bool float_only) {
  QD_RETURN_IF_ERROR(check_pool_type(c, float_only));
  if (c.rank(0) < 2) {
    return invalid(std::string(op_name(c.node.op)) + " takes an input of shape [N, C, D1, ...], got rank " +
                   std::to_string(c.rank(0)));
  }
  Shape out = c.shape(0);
  for (size_t d = 2; d < out.size(); ++d) out[d] = 1;
  c.set_output(0, c.dtype(0), out);
  return Status::ok();
}

// f(plane pointer, plane size) -> output value, per (n, c).
template <typename T, typename F>
void global_planes(const Tensor& x, Tensor& y, F f) {
  const Shape& s = x.shape();
  const int64_t planes = s[0] * s[1];
  const int64_t n = planes == 0 ? 0 : x.numel() / planes;
  for (int64_t p = 0; p < planes; ++p) y.data<T>()[p] = f(x.data<T>() + p * n, n);
}
}  // namespace

Status infer_GlobalAveragePool(InferCtx& c) { return infer_global(c, true); }
Status run_GlobalAveragePool(KernelCtx& c) {
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    global_planes<T>(*c.in[0], *c.out[0], [](const T* x, int64_t n) {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += x[i];
      return static_cast<T>(n > 0 ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN());
    });
    return Status::ok();
  });
}

Status infer_GlobalMaxPool(InferCtx& c) { return infer_global(c, false); }
Status run_GlobalMaxPool(KernelCtx& c) {
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    global_planes<T>(*c.in[0], *c.out[0], [](const T* x, int64_t n) {
      T best = std::numeric_limits<T>::lowest();
      for (int64_t i = 0; i < n; ++i) best = x[i] > best ? x[i] : best;
      return best;
    });
    return Status::ok();
  });
}

Status infer_GlobalLpPool(InferCtx& c) {
  QD_RETURN_IF_ERROR(lp_order(c.node).status());
  return infer_global(c, true);
}
Status run_GlobalLpPool(KernelCtx& c) {
  const double p = QD_TRY(lp_order(c.node));
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    global_planes<T>(*c.in[0], *c.out[0], [p](const T* x, int64_t n) {
      LpAcc acc{p};
      for (int64_t i = 0; i < n; ++i) acc.add(x[i]);
      return static_cast<T>(acc.result());
    });
    return Status::ok();
  });
}

}  // namespace qd::ops
