// CumSum (exclusive / reverse) and Trilu (upper or lower triangle of the last two dims). Both keep the input's shape,
// so their axis / k inputs may be runtime values.
#include "ops/movement.h"

namespace qd::ops {

namespace {

Expected<int> cumsum_axis(const Tensor& axis, size_t rank) {
  if (axis.rank() > 1) return invalid("axis must be a scalar, got shape " + shape_str(axis.shape()));
  const int64_t a = QD_TRY(scalar_int(axis, "axis"));
  return normalize_axis(a, rank);
}

}  // namespace

Status infer_CumSum(InferCtx& c) {
  if (c.rank(0) == 0) return invalid("CumSum takes a tensor of rank >= 1, got a scalar");
  if (c.dtype(0) == DType::kBool || c.dtype(0) == DType::kFloat16) {
    return unsupported(std::string("CumSum on ") + dtype_name(c.dtype(0)));
  }
  if (c.dtype(1) != DType::kInt32 && c.dtype(1) != DType::kInt64) return invalid("axis must be int32 or int64");
  if (const Tensor* a = c.value(1)) QD_RETURN_IF_ERROR(cumsum_axis(*a, c.rank(0)).status());
  return infer_same_as_input(c);
}

Status run_CumSum(KernelCtx& c) {
  const int axis = QD_TRY(cumsum_axis(*c.in[1], c.in[0]->rank()));
  const bool exclusive = QD_TRY(c.node.attrs.get_int("exclusive", 0)) != 0;
  const bool reverse = QD_TRY(c.node.attrs.get_int("reverse", 0)) != 0;
  const Shape& s = c.in[0]->shape();
  const int64_t outer = dim_product(s, 0, axis), dim = s[axis], inner = dim_product(s, axis + 1, s.size());
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* y = c.out[0]->data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        T acc = 0;
        for (int64_t j = 0; j < dim; ++j) {
          const int64_t k = reverse ? dim - 1 - j : j;
          const int64_t at = (o * dim + k) * inner + i;
          if (exclusive) {
            y[at] = acc;
            acc = wrapping_add(acc, x[at]);
          } else {
            acc = wrapping_add(acc, x[at]);
            y[at] = acc;
          }
        }
      }
    }
    return Status::ok();
  });
}

Status infer_Trilu(InferCtx& c) {
  if (c.rank(0) < 2) return invalid("Trilu takes a tensor of rank >= 2, got shape " + shape_str(c.shape(0)));
  if (c.has_input(1)) {
    if (c.dtype(1) != DType::kInt64) return invalid("k must be int64");
    if (const Tensor* k = c.value(1)) QD_RETURN_IF_ERROR(scalar_int(*k, "k").status());
  }
  return infer_same_as_input(c);
}

Status run_Trilu(KernelCtx& c) {
  int64_t k = 0;
  if (c.in.size() > 1 && c.in[1]) k = QD_TRY(scalar_int(*c.in[1], "k"));
  const bool upper = QD_TRY(c.node.attrs.get_int("upper", 1)) != 0;
  const Shape& s = c.in[0]->shape();
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  const int64_t mats = dim_product(s, 0, s.size() - 2);
  // Keep (i, j) when j - i >= k (upper) or j - i <= k (lower); |j - i| < 2^40, so clamp k to avoid overflow.
  k = std::max<int64_t>(-kMaxElements, std::min<int64_t>(kMaxElements, k));
  return dispatch_width(c.in[0]->dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U* x = c.in[0]->data<U>();
    U* y = c.out[0]->data<U>();
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t at = (m * rows + i) * cols + j;
          const bool keep = upper ? j - i >= k : j - i <= k;
          y[at] = keep ? x[at] : U{0};
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace qd::ops
