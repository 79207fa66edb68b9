// Concat and Split along one axis: block copies of contiguous runs (any dtype).
#include "ops/movement.h"

namespace qd::ops {

namespace {

Expected<int> concat_axis(const InferCtx& c) {
  const int64_t axis = QD_TRY(c.node.attrs.get_int("axis"));
  return normalize_axis(axis, c.rank(0));
}

// Sizes of Split's parts along the axis: from the split input (opset 13) or attribute, from num_outputs (opset 18),
// else equal parts.
Expected<std::vector<int64_t>> split_sizes(const InferCtx& c, int axis) {
  const int64_t dim = c.shape(0)[axis];
  const int64_t parts = static_cast<int64_t>(c.num_outputs());
  std::vector<int64_t> split;
  if (c.has_input(1) && c.node.attrs.has("num_outputs")) {
    return invalid("Split takes either the split input or the num_outputs attribute, not both");
  }
  if (c.has_input(1) && numel(c.shape(1)) > 0) {  // an empty split input means equal parts
    if (c.rank(1) != 1) return invalid("split must be 1-D, got shape " + shape_str(c.shape(1)));
    split = QD_TRY(c.const_ints(1));
  } else if (c.node.attrs.has("split")) {
    split = QD_TRY(c.node.attrs.get_ints("split"));
  } else if (c.node.attrs.has("num_outputs")) {
    // Opset 18: parts of ceil(dim / n), the last one smaller when n does not divide the axis.
    const int64_t n = QD_TRY(c.node.attrs.get_int("num_outputs"));
    if (n != parts) {
      return invalid("num_outputs is " + std::to_string(n) + " but the node has " + std::to_string(parts) + " outputs");
    }
    const int64_t chunk = (dim + parts - 1) / parts;
    if (chunk * (parts - 1) >= dim && dim > 0) {
      return invalid("axis " + std::to_string(axis) + " of size " + std::to_string(dim) + " cannot give " +
                     std::to_string(parts) + " non-empty parts of " + std::to_string(chunk));
    }
    for (int64_t i = 0; i < parts; ++i) split.push_back(std::min(chunk, std::max<int64_t>(dim - i * chunk, 0)));
  } else {
    if (dim % parts != 0) {
      return invalid("axis " + std::to_string(axis) + " has size " + std::to_string(dim) + ", which does not split into " +
                     std::to_string(parts) + " equal parts; give the part sizes in 'split'");
    }
    return std::vector<int64_t>(parts, dim / parts);
  }
  if (static_cast<int64_t>(split.size()) != parts) {
    return invalid("split lists " + std::to_string(split.size()) + " sizes but the node has " + std::to_string(parts) +
                   " outputs");
  }
  int64_t sum = 0;
  for (int64_t s : split) {
    if (s < 0 || s > dim) return invalid("split size " + std::to_string(s) + " is negative or larger than the axis");
    sum += s;
  }
  if (sum != dim) {
    return invalid("split sizes add up to " + std::to_string(sum) + " but axis " + std::to_string(axis) +
                   " has size " + std::to_string(dim));
  }
  return split;
}

}  // namespace

Status infer_Concat(InferCtx& c) {
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) return invalid("input " + std::to_string(i) + " is missing");
  }
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  if (c.rank(0) == 0) return invalid("Concat takes tensors of rank >= 1, got a scalar");
  const int axis = QD_TRY(concat_axis(c));
  Shape out = c.shape(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    const Shape& s = c.shape(i);
    bool ok = s.size() == out.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = static_cast<int>(d) == axis || s[d] == out[d];
    if (!ok) {
      return invalid("input " + std::to_string(i) + " has shape " + shape_str(s) + ", which does not match input 0's " +
                     shape_str(c.shape(0)) + " outside axis " + std::to_string(axis));
    }
    out[axis] += s[axis];
    if (out[axis] > kMaxElements) return invalid("the concatenated axis is too large");
  }
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}

Status run_Concat(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const int axis = QD_TRY(concat_axis(ic));
  const Shape& ys = c.out[0]->shape();
  const size_t esz = dtype_size(c.out[0]->dtype());
  const int64_t outer = dim_product(ys, 0, axis);
  const int64_t row = dim_product(ys, axis, ys.size()) * esz;  // bytes of one output row
  auto* y = static_cast<std::byte*>(c.out[0]->raw());
  int64_t col = 0;
  for (const Tensor* t : c.in) {
    const int64_t chunk = dim_product(t->shape(), axis, t->rank()) * esz;
    const auto* x = static_cast<const std::byte*>(t->raw());
    if (chunk) {
      for (int64_t o = 0; o < outer; ++o) std::memcpy(y + o * row + col, x + o * chunk, chunk);
    }
    col += chunk;
  }
  return Status::ok();
}

Status infer_Split(InferCtx& c) {
  if (c.rank(0) == 0) return invalid("Split takes a tensor of rank >= 1, got a scalar");
  const int axis = QD_TRY(normalize_axis(QD_TRY(c.node.attrs.get_int("axis", 0)), c.rank(0)));
  const std::vector<int64_t> split = QD_TRY(split_sizes(c, axis));
  for (size_t i = 0; i < split.size(); ++i) {
    Shape s = c.shape(0);
    s[axis] = split[i];
    c.set_output(i, c.dtype(0), std::move(s));
  }
  return Status::ok();
}

Status run_Split(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const int axis = QD_TRY(normalize_axis(QD_TRY(c.node.attrs.get_int("axis", 0)), ic.rank(0)));
  const std::vector<int64_t> split = QD_TRY(split_sizes(ic, axis));
  const Shape& xs = c.in[0]->shape();
  const size_t esz = dtype_size(c.in[0]->dtype());
  const int64_t outer = dim_product(xs, 0, axis);
  const int64_t inner = dim_product(xs, axis + 1, xs.size()) * esz;
  const int64_t row = xs[axis] * inner;
  const auto* x = static_cast<const std::byte*>(c.in[0]->raw());
  int64_t col = 0;
  for (size_t i = 0; i < split.size(); ++i) {
    const int64_t chunk = split[i] * inner;
    if (i < c.out.size() && c.out[i] && chunk) {
      auto* y = static_cast<std::byte*>(c.out[i]->raw());
      for (int64_t o = 0; o < outer; ++o) std::memcpy(y + o * chunk, x + o * row + col, chunk);
    }
    col += chunk;
  }
  return Status::ok();
}

}  // namespace qd::ops
