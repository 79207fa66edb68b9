// Expand (numpy broadcast to a given shape) and Tile (repeat along each axis): copies by element width.
#include "ops/movement.h"

namespace qd::ops {

namespace {

Expected<Shape> expand_shape(const InferCtx& c) {
  if (c.rank(1) != 1) return invalid("shape must be 1-D, got shape " + shape_str(c.shape(1)));
  const std::vector<int64_t> target = QD_TRY(c.const_ints(1));
  for (int64_t d : target) {
    if (d < 0) return invalid("the target shape has a negative dim " + std::to_string(d));
  }
  auto out = broadcast_shapes(c.shape(0), target);
  if (!out) return invalid("cannot expand " + shape_str(c.shape(0)) + " to " + shape_str(target) + ": " + out.status().message());
  QD_RETURN_IF_ERROR(checked_numel(*out).status());
  return *out;
}

Expected<std::vector<int64_t>> tile_repeats(const InferCtx& c) {
  if (c.rank(1) != 1) return invalid("repeats must be 1-D, got shape " + shape_str(c.shape(1)));
  const std::vector<int64_t> rep = QD_TRY(c.const_ints(1));
  if (rep.size() != c.rank(0)) {
    return invalid("repeats has " + std::to_string(rep.size()) + " entries but the input " + shape_str(c.shape(0)) +
                   " has rank " + std::to_string(c.rank(0)));
  }
  for (int64_t r : rep) {
    if (r < 0) return invalid("repeats must be >= 0, got " + std::to_string(r));
  }
  return rep;
}

}  // namespace

Status infer_Expand(InferCtx& c) {
  Shape out = QD_TRY(expand_shape(c));
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}

Status run_Expand(KernelCtx& c) {
  const Shape& in = c.in[0]->shape();
  const Shape& out = c.out[0]->shape();
  const std::vector<int64_t> in_st = strides_of(in);
  std::vector<int64_t> st(out.size(), 0);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : in_st[i];
  return strided_copy(*c.in[0], *c.out[0], st, 0);
}

Status infer_Tile(InferCtx& c) {
  if (!is_integer(c.dtype(1))) return invalid("repeats must be an integer tensor");
  const std::vector<int64_t> rep = QD_TRY(tile_repeats(c));
  Shape out = c.shape(0);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != 0 && rep[i] > kMaxElements / out[i]) return invalid("the tiled tensor has more than 2^40 elements");
    out[i] *= rep[i];
  }
  QD_RETURN_IF_ERROR(checked_numel(out).status());
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}

Status run_Tile(KernelCtx& c) {
  const Shape& in = c.in[0]->shape();
  const Shape& out = c.out[0]->shape();
  const int64_t n = c.out[0]->numel();
  if (n == 0) return Status::ok();
  const size_t r = out.size();
  if (r == 0) {
    std::memcpy(c.out[0]->raw(), c.in[0]->raw(), c.in[0]->nbytes());
    return Status::ok();
  }
  const std::vector<int64_t> in_st = strides_of(in);
  const size_t esz = dtype_size(c.in[0]->dtype());
  const int64_t row_in = in[r - 1] * static_cast<int64_t>(esz);
  const int64_t reps = out[r - 1] / in[r - 1];
  const auto* x = static_cast<const std::byte*>(c.in[0]->raw());
  auto* y = static_cast<std::byte*>(c.out[0]->raw());
  // Each output row (last dim) is the matching input row repeated; rows map to input rows modulo the input dims.
  std::vector<int64_t> pos(r, 0);
  for (int64_t i = 0; i < n; i += out[r - 1]) {
    int64_t src = 0;
    for (size_t d = 0; d + 1 < r; ++d) src += (pos[d] % in[d]) * in_st[d];
    for (int64_t k = 0; k < reps; ++k) std::memcpy(y + (i * esz) + k * row_in, x + src * esz, row_in);
    for (size_t d = r - 1; d-- > 0;) {
      if (++pos[d] < out[d]) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

}  // namespace qd::ops
