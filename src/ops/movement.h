// Helpers shared by the tensor and data-movement ops (reshape.cpp, transpose.cpp, slice.cpp, pad.cpp, ...):
// copies by element width, strided copies, axis lists and index checks.
#pragma once

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/common.h"

namespace qd::ops {

// Calls fn(U{}) with U an unsigned integer as wide as one element of `t` (1, 2, 4 or 8 bytes). Data-movement kernels
// copy elements without looking at them, so one instantiation per width serves every dtype, bool and float16 included.
template <typename Fn>
Status dispatch_width(DType t, Fn&& fn) {
  switch (dtype_size(t)) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default: return unsupported(std::string("element type ") + dtype_name(t));
  }
}

// Numeric types plus bool (as uint8_t): for ops that compare or add elements.
template <typename Fn>
Status dispatch_numeric_or_bool(DType t, Fn&& fn) {
  if (t == DType::kBool) return fn(uint8_t{});
  return dispatch_numeric(t, fn);
}

// y[i_0, ..., i_k] = x[base + sum_d i_d * in_strides[d]] for every index of y's shape (strides in elements; 0 repeats,
// negative walks backwards). Transpose, Slice, Expand, DepthToSpace and SpaceToDepth are such copies. The caller
// guarantees every address stays inside x.
Status strided_copy(const Tensor& x, Tensor& y, const std::vector<int64_t>& in_strides, int64_t base);

// a + b and a * b that wrap on integer overflow (two's complement) instead of being undefined: the values come from
// the model or its inputs.
template <typename T>
T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<decltype(a + b)>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<decltype(a * b)>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// Normalizes axes (negative counts from the end) for a tensor of rank `rank`; an error when one is out of range or
// repeated.
Expected<std::vector<int>> normalize_axes(const std::vector<int64_t>& axes, size_t rank);

// Product of dims [begin, end) of a valid shape.
int64_t dim_product(const Shape& s, size_t begin, size_t end);

// Index tensors (Gather, GatherElements, GatherND, Scatter*, OneHot) must be int32 or int64.
Status require_index_type(DType t, const char* what);
// Element i of an int32/int64 tensor.
inline int64_t index_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}
// Checks that every element of an index tensor lies in [-dim, dim): a model's bad index is an error, not a read out
// of bounds.
Status check_indices(const Tensor& idx, int64_t dim, const char* what);

// Builds the inference view of a kernel's inputs, so that run_<Op> can share its geometry code with infer_<Op>.
InferCtx infer_ctx_of(const KernelCtx& k);

// Reads a scalar (or one-element) input as int64: CumSum's axis, Trilu's k, TopK's k.
Expected<int64_t> scalar_int(const Tensor& t, const char* what);

}  // namespace qd::ops
