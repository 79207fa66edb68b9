#include "ops/movement.h"

namespace qd::ops {

namespace {
template <typename U>
void strided_copy_t(const U* x, U* y, const Shape& out, const std::vector<int64_t>& st, int64_t base) {
  const size_t r = out.size();
  const int64_t n = numel(out);
  if (n == 0) return;
  if (r == 0) {
    y[0] = x[base];
    return;
  }
  const int64_t inner = out[r - 1], inner_st = st[r - 1];
  std::vector<int64_t> pos(r, 0);
  int64_t off = base;
  for (int64_t i = 0; i < n; i += inner) {
    if (inner_st == 1) {
      std::memcpy(y + i, x + off, static_cast<size_t>(inner) * sizeof(U));
    } else {
      const U* src = x + off;
      for (int64_t j = 0; j < inner; ++j) y[i + j] = src[j * inner_st];
    }
    for (size_t d = r - 1; d-- > 0;) {  // advance the outer dims like an odometer
      off += st[d];
      if (++pos[d] < out[d]) break;
      off -= st[d] * pos[d];
      pos[d] = 0;
    }
  }
}
}  // namespace

Status strided_copy(const Tensor& x, Tensor& y, const std::vector<int64_t>& in_strides, int64_t base) {
  if (in_strides.size() != y.rank()) return internal("strided_copy: stride count differs from the output rank");
  if (x.dtype() != y.dtype()) return internal("strided_copy: dtypes differ");
  return dispatch_width(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    strided_copy_t<U>(x.data<U>(), y.data<U>(), y.shape(), in_strides, base);
    return Status::ok();
  });
}

Expected<std::vector<int>> normalize_axes(const std::vector<int64_t>& axes, size_t rank) {
  std::vector<int> out;
  std::vector<char> seen(rank, 0);
  for (int64_t a : axes) {
    const int ax = QD_TRY(normalize_axis(a, rank));
    if (seen[ax]) return invalid("axis " + std::to_string(a) + " is listed twice");
    seen[ax] = 1;
    out.push_back(ax);
  }
  return out;
}

int64_t dim_product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

Status require_index_type(DType t, const char* what) {
  if (t != DType::kInt32 && t != DType::kInt64) {
    return invalid(std::string(what) + " must be int32 or int64, got " + dtype_name(t));
  }
  return Status::ok();
}

Status check_indices(const Tensor& idx, int64_t dim, const char* what) {
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const int64_t v = index_at(idx, i);
    if (v < -dim || v >= dim) {
      return invalid(std::string(what) + " " + std::to_string(v) + " (element " + std::to_string(i) +
                     ") is out of range for a dimension of size " + std::to_string(dim) + "; valid indices are " +
                     (dim == 0 ? std::string("none") : "-" + std::to_string(dim) + ".." + std::to_string(dim - 1)));
    }
  }
  return Status::ok();
}

InferCtx infer_ctx_of(const KernelCtx& k) {
  std::vector<DType> types;
  std::vector<Shape> shapes;
  for (const Tensor* t : k.in) {
    types.push_back(t ? t->dtype() : DType::kUndefined);
    shapes.push_back(t ? t->shape() : Shape{});
  }
  return InferCtx(k.node, std::move(types), std::move(shapes), k.in);
}

Expected<int64_t> scalar_int(const Tensor& t, const char* what) {
  if (t.numel() != 1) return invalid(std::string(what) + " must have one element, got shape " + shape_str(t.shape()));
  if (!is_integer(t.dtype())) return invalid(std::string(what) + " must be an integer, got " + dtype_name(t.dtype()));
  return t.get_i64(0);
}

}  // namespace qd::ops
