// Slice: per-axis start/end/step with ONNX's clamping (out-of-range starts and ends clamp, negative steps walk
// backwards). Attributes before opset 10, inputs (with steps) from 10. The kernel is a strided copy (any dtype).
#include <algorithm>
#include <limits>

#include "ops/movement.h"
#include "ops/op_geometry.h"

namespace qd::ops {

namespace {

Expected<std::vector<int64_t>> slice_list(const InferCtx& c, size_t input, const char* attr, bool required) {
  if (c.node.opset < 10 && !c.has_input(1)) {
    if (!required && !c.node.attrs.has(attr)) return std::vector<int64_t>{};
    return c.node.attrs.get_ints(attr);
  }
  if (!c.has_input(input)) {
    if (required) return invalid(std::string(attr) + " input is missing");
    return std::vector<int64_t>{};
  }
  if (c.rank(input) != 1) return invalid(std::string(attr) + " must be 1-D, got shape " + shape_str(c.shape(input)));
  return c.const_ints(input);
}

}  // namespace

Expected<SliceGeom> slice_geom(const InferCtx& c) {
  const Shape& in = c.shape(0);
  const size_t r = in.size();
  const std::vector<int64_t> starts = QD_TRY(slice_list(c, 1, "starts", true));
  const std::vector<int64_t> ends = QD_TRY(slice_list(c, 2, "ends", true));
  std::vector<int64_t> axes_raw = QD_TRY(slice_list(c, 3, "axes", false));
  std::vector<int64_t> steps = QD_TRY(slice_list(c, 4, "steps", false));
  if (ends.size() != starts.size()) {
    return invalid("starts has " + std::to_string(starts.size()) + " entries but ends has " +
                   std::to_string(ends.size()));
  }
  if (axes_raw.empty() && !c.has_input(3) && !c.node.attrs.has("axes")) {
    for (size_t i = 0; i < starts.size(); ++i) axes_raw.push_back(static_cast<int64_t>(i));
  }
  if (axes_raw.size() != starts.size()) {
    return invalid("axes has " + std::to_string(axes_raw.size()) + " entries but starts has " +
                   std::to_string(starts.size()));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (steps.size() != starts.size()) {
    return invalid("steps has " + std::to_string(steps.size()) + " entries but starts has " +
                   std::to_string(starts.size()));
  }
  const std::vector<int> axes = QD_TRY(normalize_axes(axes_raw, r));
  SliceGeom g{in, std::vector<int64_t>(r, 0), std::vector<int64_t>(r, 1)};
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = axes[i];
    const int64_t dim = in[a];
    int64_t step = steps[i];
    if (step == 0) return invalid("step for axis " + std::to_string(a) + " is 0");
    // A step longer than the dim takes at most one element; clamping it keeps the arithmetic in range.
    step = std::max<int64_t>(-kMaxElements - 1, std::min<int64_t>(kMaxElements + 1, step));
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s = s < -dim ? -1 : s + dim;  // avoids overflow for INT64_MIN
    if (e < 0) e = e < -dim ? -1 : e + dim;
    int64_t len;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len = e > s ? 1 + (e - s - 1) / step : 0;
    } else if (dim == 0) {
      len = 0;
    } else {  // as the spec (and ONNX Runtime) say: start clamps to [0, dim-1], end to [-1, dim-1]
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      len = s > e ? 1 + (s - e - 1) / -step : 0;
    }
    g.out[a] = len;
    g.start[a] = len ? s : 0;
    g.step[a] = len > 1 ? step : 1;  // keeps stride products bounded by the tensor size
  }
  return g;
}

Status infer_Slice(InferCtx& c) {
  if (c.node.opset >= 10 && c.num_inputs() < 3) {
    return invalid("Slice (opset 10+) takes data, starts, ends and optional axes, steps inputs");
  }
  SliceGeom g = QD_TRY(slice_geom(c));
  c.set_output(0, c.dtype(0), std::move(g.out));
  return Status::ok();
}

Status run_Slice(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const SliceGeom g = QD_TRY(slice_geom(ic));
  const std::vector<int64_t> in_st = strides_of(c.in[0]->shape());
  std::vector<int64_t> st(in_st.size());
  int64_t base = 0;
  for (size_t d = 0; d < in_st.size(); ++d) {
    st[d] = in_st[d] * g.step[d];
    base += in_st[d] * g.start[d];
  }
  return strided_copy(*c.in[0], *c.out[0], st, base);
}

}  // namespace qd::ops
