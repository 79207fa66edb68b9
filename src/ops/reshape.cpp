// Ops that change the shape but keep the elements in order (the kernel is a copy): Reshape, Flatten, Squeeze,
// Unsqueeze.
#include "ops/movement.h"

namespace qd::ops {

namespace {

Status copy_input(KernelCtx& c) {
  if (c.out[0]->nbytes() != c.in[0]->nbytes()) return internal("output size differs from input size");
  if (c.in[0]->nbytes()) std::memcpy(c.out[0]->raw(), c.in[0]->raw(), c.in[0]->nbytes());
  return Status::ok();
}

// Reshape's target: 0 copies the input dim (unless allowzero=1, opset 14), one -1 is inferred.
Expected<Shape> reshape_target(const InferCtx& c) {
  const Shape& in = c.shape(0);
  if (c.rank(1) != 1) return invalid("the shape input must be 1-D, got shape " + shape_str(c.shape(1)));
  const std::vector<int64_t> spec = QD_TRY(c.const_ints(1));
  const bool allowzero = QD_TRY(c.node.attrs.get_int("allowzero", 0)) != 0;
  Shape out(spec.size());
  int infer_at = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == -1) {
      if (infer_at >= 0) return invalid("the target shape has more than one -1; at most one dim can be inferred");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d < -1) {
      return invalid("target dim " + std::to_string(i) + " is " + std::to_string(d) +
                     "; dims must be >= 0, or -1 (inferred), or 0 (copied from the input)");
    }
    if (d == 0) {
      has_zero = true;
      if (!allowzero) {
        if (i >= in.size()) {
          return invalid("target dim " + std::to_string(i) + " is 0 (copy the input's dim) but the input " +
                         shape_str(in) + " has only " + std::to_string(in.size()) + " dims");
        }
        d = in[i];
      }
    }
    if (d != 0 && known > kMaxElements / d) return invalid("the target shape has more than 2^40 elements");
    known *= d;
    out[i] = d;
  }
  const int64_t total = numel(in);
  if (infer_at >= 0) {
    if (allowzero && has_zero) return invalid("with allowzero=1 the target shape cannot hold both 0 and -1");
    if (known == 0 || total % known != 0) {
      return invalid("cannot infer the -1 in target shape: the input " + shape_str(in) + " has " +
                     std::to_string(total) + " elements, not a multiple of the other dims' product " +
                     std::to_string(known));
    }
    out[infer_at] = total / known;
  } else if (known != total) {
    return invalid("cannot reshape " + shape_str(in) + " (" + std::to_string(total) + " elements) to " +
                   shape_str(out) + " (" + std::to_string(known) + " elements)");
  }
  return out;
}

Expected<std::vector<int64_t>> squeeze_axes(const InferCtx& c) {
  if (c.node.opset >= 13 || c.has_input(1)) {
    if (!c.has_input(1)) return std::vector<int64_t>{};
    if (c.rank(1) > 1) return invalid("axes must be 1-D, got shape " + shape_str(c.shape(1)));
    return c.const_ints(1);
  }
  return c.node.attrs.get_ints("axes", std::vector<int64_t>{});
}

}  // namespace

Status infer_Reshape(InferCtx& c) {
  Shape out = QD_TRY(reshape_target(c));
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}
Status run_Reshape(KernelCtx& c) { return copy_input(c); }

Status infer_Flatten(InferCtx& c) {
  const Shape& in = c.shape(0);
  const int64_t r = static_cast<int64_t>(in.size());
  int64_t axis = QD_TRY(c.node.attrs.get_int("axis", 1));
  if (axis < -r || axis > r) {
    return invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r) +
                   " (Flatten takes -rank..rank)");
  }
  if (axis < 0) axis += r;
  c.set_output(0, c.dtype(0), {dim_product(in, 0, axis), dim_product(in, axis, in.size())});
  return Status::ok();
}
Status run_Flatten(KernelCtx& c) { return copy_input(c); }

Status infer_Squeeze(InferCtx& c) {
  const Shape& in = c.shape(0);
  const std::vector<int64_t> raw = QD_TRY(squeeze_axes(c));
  const std::vector<int> axes = QD_TRY(normalize_axes(raw, in.size()));
  std::vector<char> drop(in.size(), 0);
  if (axes.empty() && raw.empty()) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  }
  for (int a : axes) {
    if (in[a] != 1) {
      return invalid("cannot squeeze axis " + std::to_string(a) + " of " + shape_str(in) + ": its size is " +
                     std::to_string(in[a]) + ", not 1");
    }
    drop[a] = 1;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}
Status run_Squeeze(KernelCtx& c) { return copy_input(c); }

Status infer_Unsqueeze(InferCtx& c) {
  const Shape& in = c.shape(0);
  std::vector<int64_t> raw;
  if (c.node.opset >= 13 || c.has_input(1)) {
    if (!c.has_input(1)) return invalid("Unsqueeze (opset 13+) needs the axes input");
    if (c.rank(1) > 1) return invalid("axes must be 1-D, got shape " + shape_str(c.shape(1)));
    raw = QD_TRY(c.const_ints(1));
  } else {
    raw = QD_TRY(c.node.attrs.get_ints("axes"));
  }
  if (raw.size() > 64) return invalid("Unsqueeze adds " + std::to_string(raw.size()) + " axes; at most 64 are allowed");
  const size_t out_rank = in.size() + raw.size();
  const std::vector<int> axes = QD_TRY(normalize_axes(raw, out_rank));
  std::vector<char> added(out_rank, 0);
  for (int a : axes) added[a] = 1;
  Shape out(out_rank);
  size_t k = 0;
  for (size_t i = 0; i < out_rank; ++i) out[i] = added[i] ? 1 : in[k++];
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}
Status run_Unsqueeze(KernelCtx& c) { return copy_input(c); }

}  // namespace qd::ops
