// Indexed reads and writes: Gather, GatherElements, GatherND, ScatterElements (and its old name Scatter), ScatterND.
// Indices come from the model or its inputs and are checked against the data's dims before any access.
#include <algorithm>

#include "ops/movement.h"

namespace qd::ops {

namespace {

int64_t wrap(int64_t i, int64_t dim) { return i < 0 ? i + dim : i; }

// Odometer over a shape: pos() is the current multi-index.
class Odometer {
 public:
  explicit Odometer(const Shape& s) : dims_(s), pos_(s.size(), 0) {}
  const std::vector<int64_t>& pos() const { return pos_; }
  void next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      if (++pos_[d] < dims_[d]) return;
      pos_[d] = 0;
    }
  }

 private:
  Shape dims_;
  std::vector<int64_t> pos_;
};

// Reduction of Scatter* (opset 16: add, mul; 18: max, min).
enum class Reduce { kNone, kAdd, kMul, kMax, kMin };
Expected<Reduce> read_reduction(const Node& n) {
  const std::string r = QD_TRY(n.attrs.get_string("reduction", "none"));
  if (r == "none") return Reduce::kNone;
  if (r == "add") return Reduce::kAdd;
  if (r == "mul") return Reduce::kMul;
  if (r == "max") return Reduce::kMax;
  if (r == "min") return Reduce::kMin;
  return invalid("reduction must be none, add, mul, max or min; got '" + r + "'");
}

template <typename T>
void apply(T& dst, T v, Reduce r) {
  switch (r) {
    case Reduce::kNone: dst = v; break;
    case Reduce::kAdd: dst = wrapping_add(dst, v); break;
    case Reduce::kMul: dst = wrapping_mul(dst, v); break;
    case Reduce::kMax: dst = std::max(dst, v); break;
    case Reduce::kMin: dst = std::min(dst, v); break;
  }
}

// Runs body(T tag) with T the element type: any width when there is no reduction, numeric types otherwise.
template <typename Fn>
Status dispatch_scatter(DType t, Reduce r, Fn&& fn) {
  if (r == Reduce::kNone) return dispatch_width(t, fn);
  return dispatch_numeric_or_bool(t, fn);
}

Expected<int> gather_axis(const InferCtx& c) {
  if (c.rank(0) == 0) return invalid("data must have rank >= 1, got a scalar");
  return normalize_axis(QD_TRY(c.node.attrs.get_int("axis", 0)), c.rank(0));
}

// GatherElements / ScatterElements: indices have data's rank and fit inside data on every other axis.
Status check_elements_shapes(const InferCtx& c, int axis, const char* idx_name) {
  const Shape& d = c.shape(0);
  const Shape& i = c.shape(1);
  if (i.size() != d.size()) {
    return invalid(std::string(idx_name) + " must have the data's rank " + std::to_string(d.size()) + ", got shape " +
                   shape_str(i));
  }
  for (size_t k = 0; k < d.size(); ++k) {
    if (static_cast<int>(k) != axis && i[k] > d[k]) {
      return invalid(std::string(idx_name) + " shape " + shape_str(i) + " exceeds the data shape " + shape_str(d) +
                     " on axis " + std::to_string(k));
    }
  }
  return Status::ok();
}

// GatherND / ScatterND geometry.
struct NdGeom {
  int64_t batch = 1;       // product of the batch dims
  int64_t tuples = 1;      // index tuples per batch
  int64_t m = 0;           // tuple length
  int64_t slice = 1;       // elements per gathered slice
  std::vector<int64_t> dims, strides;  // data dims/strides addressed by a tuple (after the batch dims)
  int64_t batch_stride = 0;            // data elements per batch
};

Expected<NdGeom> nd_geom(const Shape& data, const Shape& idx, int64_t b) {
  const int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(idx.size());
  if (r < 1 || q < 1) return invalid("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) {
    return invalid("batch_dims " + std::to_string(b) + " must be in [0, min(data rank, indices rank))");
  }
  NdGeom g;
  g.m = idx.back();
  if (g.m < 1 || g.m > r - b) {
    return invalid("the last dim of indices (" + std::to_string(g.m) + ") must be in [1, " + std::to_string(r - b) +
                   "] for data " + shape_str(data) + " and batch_dims " + std::to_string(b));
  }
  for (int64_t k = 0; k < b; ++k) {
    if (data[k] != idx[k]) {
      return invalid("batch dim " + std::to_string(k) + " differs: data " + shape_str(data) + ", indices " +
                     shape_str(idx));
    }
    g.batch *= data[k];
  }
  g.tuples = dim_product(idx, b, q - 1);
  g.slice = dim_product(data, b + g.m, r);
  const std::vector<int64_t> st = strides_of(data);
  for (int64_t k = 0; k < g.m; ++k) {
    g.dims.push_back(data[b + k]);
    g.strides.push_back(st[b + k]);
  }
  g.batch_stride = dim_product(data, b, r);
  return g;
}

// Element offset (into data) of every index tuple, checked.
Expected<std::vector<int64_t>> nd_offsets(const Tensor& idx, const NdGeom& g) {
  std::vector<int64_t> off(static_cast<size_t>(g.batch * g.tuples));
  for (int64_t bt = 0; bt < g.batch; ++bt) {
    for (int64_t t = 0; t < g.tuples; ++t) {
      const int64_t row = bt * g.tuples + t;
      int64_t o = bt * g.batch_stride;
      for (int64_t k = 0; k < g.m; ++k) {
        const int64_t v = index_at(idx, row * g.m + k);
        if (v < -g.dims[k] || v >= g.dims[k]) {
          return invalid("index " + std::to_string(v) + " (tuple " + std::to_string(row) + ", position " +
                         std::to_string(k) + ") is out of range for a dimension of size " + std::to_string(g.dims[k]));
        }
        o += wrap(v, g.dims[k]) * g.strides[k];
      }
      off[row] = o;
    }
  }
  return off;
}

Status infer_scatter_elements(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_index_type(c.dtype(1), "indices"));
  QD_RETURN_IF_ERROR(read_reduction(c.node).status());
  if (c.dtype(2) != c.dtype(0)) return invalid("updates must have the data's type");
  const int axis = QD_TRY(gather_axis(c));
  QD_RETURN_IF_ERROR(check_elements_shapes(c, axis, "indices"));
  if (c.shape(2) != c.shape(1)) {
    return invalid("updates shape " + shape_str(c.shape(2)) + " must equal the indices shape " + shape_str(c.shape(1)));
  }
  if (const Tensor* v = c.value(1)) QD_RETURN_IF_ERROR(check_indices(*v, c.shape(0)[axis], "index"));
  return infer_same_as_input(c);
}

Status run_scatter_elements(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const int axis = QD_TRY(gather_axis(ic));
  const Reduce red = QD_TRY(read_reduction(c.node));
  const Tensor& data = *c.in[0];
  const Tensor& idx = *c.in[1];
  const int64_t dim = data.shape()[axis];
  QD_RETURN_IF_ERROR(check_indices(idx, dim, "index"));
  std::memcpy(c.out[0]->raw(), data.raw(), data.nbytes());
  const std::vector<int64_t> st = strides_of(data.shape());
  return dispatch_scatter(data.dtype(), red, [&](auto tag) {
    using T = decltype(tag);
    T* y = c.out[0]->data<T>();
    const T* u = c.in[2]->data<T>();
    Odometer od(idx.shape());
    for (int64_t i = 0; i < idx.numel(); ++i, od.next()) {
      int64_t off = 0;
      for (size_t d = 0; d < st.size(); ++d) {
        off += (static_cast<int>(d) == axis ? wrap(index_at(idx, i), dim) : od.pos()[d]) * st[d];
      }
      apply(y[off], u[i], red);
    }
    return Status::ok();
  });
}

}  // namespace

Status infer_Gather(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_index_type(c.dtype(1), "indices"));
  const int axis = QD_TRY(gather_axis(c));
  const Shape& d = c.shape(0);
  Shape out(d.begin(), d.begin() + axis);
  out.insert(out.end(), c.shape(1).begin(), c.shape(1).end());
  out.insert(out.end(), d.begin() + axis + 1, d.end());
  if (const Tensor* v = c.value(1)) QD_RETURN_IF_ERROR(check_indices(*v, d[axis], "index"));
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}

Status run_Gather(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const int axis = QD_TRY(gather_axis(ic));
  const Shape& ds = c.in[0]->shape();
  const Tensor& idx = *c.in[1];
  const int64_t dim = ds[axis];
  QD_RETURN_IF_ERROR(check_indices(idx, dim, "index"));
  const size_t esz = dtype_size(c.in[0]->dtype());
  const int64_t outer = dim_product(ds, 0, axis);
  const int64_t inner = dim_product(ds, axis + 1, ds.size()) * esz;
  const int64_t n = idx.numel();
  const auto* x = static_cast<const std::byte*>(c.in[0]->raw());
  auto* y = static_cast<std::byte*>(c.out[0]->raw());
  if (inner == 0) return Status::ok();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = wrap(index_at(idx, k), dim);
      std::memcpy(y + (o * n + k) * inner, x + (o * dim + j) * inner, inner);
    }
  }
  return Status::ok();
}

Status infer_GatherElements(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_index_type(c.dtype(1), "indices"));
  const int axis = QD_TRY(gather_axis(c));
  QD_RETURN_IF_ERROR(check_elements_shapes(c, axis, "indices"));
  if (const Tensor* v = c.value(1)) QD_RETURN_IF_ERROR(check_indices(*v, c.shape(0)[axis], "index"));
  c.set_output(0, c.dtype(0), c.shape(1));
  return Status::ok();
}

Status run_GatherElements(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const int axis = QD_TRY(gather_axis(ic));
  const Tensor& idx = *c.in[1];
  const int64_t dim = c.in[0]->shape()[axis];
  QD_RETURN_IF_ERROR(check_indices(idx, dim, "index"));
  const std::vector<int64_t> st = strides_of(c.in[0]->shape());
  return dispatch_width(c.in[0]->dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U* x = c.in[0]->data<U>();
    U* y = c.out[0]->data<U>();
    Odometer od(idx.shape());
    for (int64_t i = 0; i < idx.numel(); ++i, od.next()) {
      int64_t off = 0;
      for (size_t d = 0; d < st.size(); ++d) {
        off += (static_cast<int>(d) == axis ? wrap(index_at(idx, i), dim) : od.pos()[d]) * st[d];
      }
      y[i] = x[off];
    }
    return Status::ok();
  });
}

Status infer_GatherND(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_index_type(c.dtype(1), "indices"));
  const int64_t b = QD_TRY(c.node.attrs.get_int("batch_dims", 0));
  const NdGeom g = QD_TRY(nd_geom(c.shape(0), c.shape(1), b));
  if (const Tensor* v = c.value(1)) QD_RETURN_IF_ERROR(nd_offsets(*v, g).status());
  const Shape& d = c.shape(0);
  const Shape& q = c.shape(1);
  Shape out(q.begin(), q.end() - 1);
  out.insert(out.end(), d.begin() + b + g.m, d.end());
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}

Status run_GatherND(KernelCtx& c) {
  const int64_t b = QD_TRY(c.node.attrs.get_int("batch_dims", 0));
  const NdGeom g = QD_TRY(nd_geom(c.in[0]->shape(), c.in[1]->shape(), b));
  const std::vector<int64_t> off = QD_TRY(nd_offsets(*c.in[1], g));
  const size_t esz = dtype_size(c.in[0]->dtype());
  const auto* x = static_cast<const std::byte*>(c.in[0]->raw());
  auto* y = static_cast<std::byte*>(c.out[0]->raw());
  const size_t bytes = static_cast<size_t>(g.slice) * esz;
  if (bytes == 0) return Status::ok();
  for (size_t i = 0; i < off.size(); ++i) std::memcpy(y + i * bytes, x + off[i] * esz, bytes);
  return Status::ok();
}

Status infer_ScatterElements(InferCtx& c) { return infer_scatter_elements(c); }
Status run_ScatterElements(KernelCtx& c) { return run_scatter_elements(c); }
// Scatter (opsets 9-10) is ScatterElements without reduction.
Status infer_Scatter(InferCtx& c) { return infer_scatter_elements(c); }
Status run_Scatter(KernelCtx& c) { return run_scatter_elements(c); }

Status infer_ScatterND(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_index_type(c.dtype(1), "indices"));
  QD_RETURN_IF_ERROR(read_reduction(c.node).status());
  if (c.dtype(2) != c.dtype(0)) return invalid("updates must have the data's type");
  const NdGeom g = QD_TRY(nd_geom(c.shape(0), c.shape(1), 0));
  const Shape& d = c.shape(0);
  const Shape& q = c.shape(1);
  Shape want(q.begin(), q.end() - 1);
  want.insert(want.end(), d.begin() + g.m, d.end());
  if (c.shape(2) != want) {
    return invalid("updates shape " + shape_str(c.shape(2)) + " must be " + shape_str(want) +
                   " (indices.shape[:-1] + data.shape[indices.shape[-1]:])");
  }
  if (const Tensor* v = c.value(1)) QD_RETURN_IF_ERROR(nd_offsets(*v, g).status());
  return infer_same_as_input(c);
}

Status run_ScatterND(KernelCtx& c) {
  const Reduce red = QD_TRY(read_reduction(c.node));
  const NdGeom g = QD_TRY(nd_geom(c.in[0]->shape(), c.in[1]->shape(), 0));
  const std::vector<int64_t> off = QD_TRY(nd_offsets(*c.in[1], g));
  std::memcpy(c.out[0]->raw(), c.in[0]->raw(), c.in[0]->nbytes());
  return dispatch_scatter(c.in[0]->dtype(), red, [&](auto tag) {
    using T = decltype(tag);
    T* y = c.out[0]->data<T>();
    const T* u = c.in[2]->data<T>();
    for (size_t i = 0; i < off.size(); ++i) {
      for (int64_t k = 0; k < g.slice; ++k) apply(y[off[i] + k], u[i * g.slice + k], red);
    }
    return Status::ok();
  });
}

}  // namespace qd::ops
