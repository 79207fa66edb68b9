// Helpers shared by op implementations: dtype dispatch, broadcasting, common inference rules.
#pragma once

#include <cstdint>
#include <vector>

#include "core/half.h"
#include "ops/op.h"

namespace qd::ops {

// Calls fn(T{}) with T the C++ type of `t`, for the numeric types qdeploy computes in.
// Returns unsupported() for other types.
template <typename Fn>
Status dispatch_numeric(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kInt8: return fn(int8_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kInt16: return fn(int16_t{});
    case DType::kUInt16: return fn(uint16_t{});
    case DType::kUInt32: return fn(uint32_t{});
    case DType::kUInt64: return fn(uint64_t{});
    default: return unsupported(std::string("element type ") + dtype_name(t));
  }
}
template <typename Fn>
Status dispatch_float(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    default: return unsupported(std::string("element type ") + dtype_name(t) + " (float32/float64 only)");
  }
}

// Maps each output element to the flat index of a broadcast input: iterate with next() over output order.
class BroadcastIndex {
 public:
  BroadcastIndex(const Shape& in, const Shape& out);
  int64_t index() const { return idx_; }
  void next();

 private:
  std::vector<int64_t> out_dims_, in_strides_, pos_;
  int64_t idx_ = 0;
};

Status infer_same_as_input(InferCtx& c, size_t i = 0);
// Output = broadcast of all present inputs; dtype of input 0 (or `out` if given).
Status infer_broadcast(InferCtx& c, DType out = DType::kUndefined);
// All present inputs must have the same dtype as input 0.
Status check_same_dtype(const InferCtx& c);
Status require_float(const InferCtx& c, size_t i);
// Reads the ints of an optional constant input, or of an attribute in older opsets.
Expected<std::vector<int64_t>> ints_from_input_or_attr(const InferCtx& c, size_t input, const char* attr);

}  // namespace qd::ops
