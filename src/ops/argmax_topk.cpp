// ArgMax, ArgMin (keepdims, select_last_index) and TopK (largest/smallest, ties broken by the lower index).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/movement.h"

namespace qd::ops {

namespace {

struct Lanes {
  int axis;
  int64_t outer, dim, inner;
};

Lanes lanes_of(const Shape& s, int axis) {
  return {axis, dim_product(s, 0, axis), s[axis], dim_product(s, axis + 1, s.size())};
}

Expected<int> arg_axis(const InferCtx& c) {
  if (c.rank(0) == 0) return invalid("input must have rank >= 1, got a scalar");
  return normalize_axis(QD_TRY(c.node.attrs.get_int("axis", 0)), c.rank(0));
}

Status infer_arg(InferCtx& c) {
  const int axis = QD_TRY(arg_axis(c));
  const bool keep = QD_TRY(c.node.attrs.get_int("keepdims", 1)) != 0;
  QD_RETURN_IF_ERROR(c.node.attrs.get_int("select_last_index", 0).status());
  if (c.shape(0)[axis] == 0) return invalid("cannot take ArgMax/ArgMin over an empty axis");
  if (c.dtype(0) == DType::kBool || c.dtype(0) == DType::kFloat16) {
    return unsupported(std::string("ArgMax/ArgMin on ") + dtype_name(c.dtype(0)));
  }
  Shape out = c.shape(0);
  if (keep) out[axis] = 1;
  else out.erase(out.begin() + axis);
  c.set_output(0, DType::kInt64, std::move(out));
  return Status::ok();
}

template <bool kMax>
Status run_arg(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const int axis = QD_TRY(arg_axis(ic));
  const bool last = QD_TRY(c.node.attrs.get_int("select_last_index", 0)) != 0;
  const Lanes l = lanes_of(c.in[0]->shape(), axis);
  int64_t* y = c.out[0]->data<int64_t>();
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const T* p = x + o * l.dim * l.inner + i;
        int64_t best = 0;
        for (int64_t k = 1; k < l.dim; ++k) {
          const T v = p[k * l.inner], b = p[best * l.inner];
          const bool better = kMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
          if (better) best = k;
        }
        y[o * l.inner + i] = best;
      }
    }
    return Status::ok();
  });
}

// A strict weak order even with NaN (NaN sorts above every number), so sorting never misbehaves on bad data.
template <typename T>
bool total_less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

struct TopKGeom {
  int axis;
  int64_t k;
};

Expected<TopKGeom> topk_geom(const InferCtx& c) {
  if (c.rank(0) == 0) return invalid("input must have rank >= 1, got a scalar");
  const int axis = QD_TRY(normalize_axis(QD_TRY(c.node.attrs.get_int("axis", -1)), c.rank(0)));
  int64_t k;
  if (c.node.opset < 10 && !c.has_input(1)) {
    k = QD_TRY(c.node.attrs.get_int("k"));
  } else {
    if (!c.has_input(1)) return invalid("TopK (opset 10+) needs the k input");
    if (!c.value(1)) return unsupported("TopK's k must be a constant (it sets the output shape)");
    k = QD_TRY(scalar_int(*c.value(1), "k"));
  }
  const int64_t dim = c.shape(0)[axis];
  if (k < 0 || k > dim) {
    return invalid("k = " + std::to_string(k) + " is out of range for axis " + std::to_string(axis) + " of size " +
                   std::to_string(dim));
  }
  return TopKGeom{axis, k};
}

}  // namespace

Status infer_ArgMax(InferCtx& c) { return infer_arg(c); }
Status run_ArgMax(KernelCtx& c) { return run_arg<true>(c); }
Status infer_ArgMin(InferCtx& c) { return infer_arg(c); }
Status run_ArgMin(KernelCtx& c) { return run_arg<false>(c); }

Status infer_TopK(InferCtx& c) {
  const TopKGeom g = QD_TRY(topk_geom(c));
  if (c.dtype(0) == DType::kBool || c.dtype(0) == DType::kFloat16) {
    return unsupported(std::string("TopK on ") + dtype_name(c.dtype(0)));
  }
  Shape out = c.shape(0);
  out[g.axis] = g.k;
  c.set_output(0, c.dtype(0), out);
  if (c.has_output(1)) c.set_output(1, DType::kInt64, out);
  return Status::ok();
}

Status run_TopK(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const TopKGeom g = QD_TRY(topk_geom(ic));
  const bool largest = QD_TRY(c.node.attrs.get_int("largest", 1)) != 0;
  const Lanes l = lanes_of(c.in[0]->shape(), g.axis);
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* yv = c.out[0] ? c.out[0]->data<T>() : nullptr;
    int64_t* yi = c.out.size() > 1 && c.out[1] ? c.out[1]->data<int64_t>() : nullptr;
    std::vector<int64_t> order(l.dim);
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const T* p = x + o * l.dim * l.inner + i;
        std::iota(order.begin(), order.end(), 0);
        // Output is always sorted (sorted=0 allows any order); equal values keep the lower index first.
        std::partial_sort(order.begin(), order.begin() + g.k, order.end(), [&](int64_t a, int64_t b) {
          const T va = p[a * l.inner], vb = p[b * l.inner];
          if (total_less(va, vb)) return !largest;
          if (total_less(vb, va)) return largest;
          return a < b;
        });
        for (int64_t j = 0; j < g.k; ++j) {
          const int64_t at = (o * g.k + j) * l.inner + i;
          if (yv) yv[at] = p[order[j] * l.inner];
          if (yi) yi[at] = order[j];
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace qd::ops
