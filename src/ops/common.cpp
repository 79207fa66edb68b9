#include "ops/common.h"

namespace qd::ops {

BroadcastIndex::BroadcastIndex(const Shape& in, const Shape& out) : out_dims_(out), in_strides_(out.size(), 0),
                                                                      pos_(out.size(), 0) {
  const size_t off = out.size() - in.size();
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    in_strides_[i + off] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
}

void BroadcastIndex::next() {
  for (size_t d = out_dims_.size(); d-- > 0;) {
    idx_ += in_strides_[d];
    if (++pos_[d] < out_dims_[d]) return;
    idx_ -= in_strides_[d] * pos_[d];
    pos_[d] = 0;
  }
}

Status infer_same_as_input(InferCtx& c, size_t i) {
  c.set_output(0, c.dtype(i), c.shape(i));
  return Status::ok();
}

Status check_same_dtype(const InferCtx& c) {
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (c.has_input(i) && c.dtype(i) != c.dtype(0)) {
      return invalid(std::string("input ") + std::to_string(i) + " is " + dtype_name(c.dtype(i)) + " but input 0 is " +
                     dtype_name(c.dtype(0)));
    }
  }
  return Status::ok();
}

Status infer_broadcast(InferCtx& c, DType out) {
  Shape s = c.shape(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    auto b = broadcast_shapes(s, c.shape(i));
    if (!b) return b.status();
    s = *b;
  }
  c.set_output(0, out == DType::kUndefined ? c.dtype(0) : out, s);
  return Status::ok();
}

Status require_float(const InferCtx& c, size_t i) {
  if (c.dtype(i) != DType::kFloat32 && c.dtype(i) != DType::kFloat64) {
    return unsupported(std::string("input ") + std::to_string(i) + " of type " + dtype_name(c.dtype(i)) +
                       " (float32/float64 only)");
  }
  return Status::ok();
}

Expected<std::vector<int64_t>> ints_from_input_or_attr(const InferCtx& c, size_t input, const char* attr) {
  if (c.has_input(input)) return c.const_ints(input);
  if (c.node.attrs.has(attr)) return c.node.attrs.get_ints(attr);
  return std::vector<int64_t>{};
}

}  // namespace qd::ops
