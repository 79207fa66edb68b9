// Pad: constant, reflect, edge (and wrap, opset 19) padding; negative pads crop. pads/value are attributes before
// opset 11 and inputs from 11 (axes, opset 18, is accepted too). The kernel maps every output coordinate to an input
// coordinate per axis and copies by element width.
#include "ops/movement.h"
#include "ops/op_geometry.h"

namespace qd::ops {

Expected<PadGeom> pad_geom(const InferCtx& c) {
  const Shape& in = c.shape(0);
  const size_t r = in.size();
  const std::string mode = QD_TRY(c.node.attrs.get_string("mode", "constant"));
  PadGeom g;
  if (mode == "constant") g.mode = PadMode::kConstant;
  else if (mode == "reflect") g.mode = PadMode::kReflect;
  else if (mode == "edge") g.mode = PadMode::kEdge;
  else if (mode == "wrap") g.mode = PadMode::kWrap;
  else return invalid("mode must be constant, reflect, edge or wrap; got '" + mode + "'");
  std::vector<int64_t> pads;
  if (c.node.opset < 11 && !c.has_input(1)) {
    pads = QD_TRY(c.node.attrs.get_ints("pads"));
  } else {
    if (!c.has_input(1)) return invalid("Pad (opset 11+) needs the pads input");
    if (c.rank(1) != 1) return invalid("pads must be 1-D, got shape " + shape_str(c.shape(1)));
    pads = QD_TRY(c.const_ints(1));
  }
  std::vector<int> axes;
  if (c.has_input(3)) {
    const std::vector<int64_t> raw = QD_TRY(c.const_ints(3));
    axes = QD_TRY(normalize_axes(raw, r));
  } else {
    for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int>(i));
  }
  if (pads.size() != 2 * axes.size()) {
    return invalid("pads has " + std::to_string(pads.size()) + " entries; it needs 2 per padded axis (" +
                   std::to_string(2 * axes.size()) + ") for input " + shape_str(in));
  }
  g.begin.assign(r, 0);
  g.out = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = axes[i];
    const int64_t b = pads[i], e = pads[i + axes.size()];
    if (b < -kMaxElements || b > kMaxElements || e < -kMaxElements || e > kMaxElements) {
      return invalid("pad " + std::to_string(b) + "/" + std::to_string(e) + " is out of range");
    }
    const int64_t o = in[a] + b + e;
    if (o < 0) {
      return invalid("pads " + std::to_string(b) + " and " + std::to_string(e) + " crop axis " + std::to_string(a) +
                     " of size " + std::to_string(in[a]) + " below zero");
    }
    if (o > 0 && in[a] == 0 && g.mode != PadMode::kConstant) {
      return invalid("cannot pad empty axis " + std::to_string(a) + " in " + mode + " mode");
    }
    g.out[a] = o;
    g.begin[a] = b;
  }
  QD_RETURN_IF_ERROR(checked_numel(g.out).status());
  return g;
}

int64_t pad_map_coord(int64_t o, int64_t begin, int64_t n, PadMode mode) {
  const int64_t s = o - begin;
  if (s >= 0 && s < n) return s;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return s < 0 ? 0 : n - 1;
    case PadMode::kWrap: return ((s % n) + n) % n;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int64_t p = 2 * (n - 1);
      const int64_t m = ((s % p) + p) % p;
      return m < n ? m : p - m;
    }
  }
  return -1;
}

Status infer_Pad(InferCtx& c) {
  PadGeom g = QD_TRY(pad_geom(c));
  if (c.has_input(2) && c.dtype(2) != c.dtype(0)) {
    return invalid(std::string("constant_value is ") + dtype_name(c.dtype(2)) + " but the data is " +
                   dtype_name(c.dtype(0)));
  }
  c.set_output(0, c.dtype(0), std::move(g.out));
  return Status::ok();
}

Status run_Pad(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const PadGeom g = QD_TRY(pad_geom(ic));
  const Tensor& x = *c.in[0];
  Tensor& y = *c.out[0];
  // The padding value, as one element of the data's type.
  Tensor value(x.dtype(), {});
  if (c.in.size() > 2 && c.in[2] && c.in[2]->numel() > 0) {
    if (c.in[2]->numel() != 1) return invalid("constant_value must have one element");
    std::memcpy(value.raw(), c.in[2]->raw(), value.nbytes());
  } else if (c.node.attrs.has("value")) {
    value.set_f64(0, QD_TRY(c.node.attrs.get_float("value")));
  }
  const Shape& in = x.shape();
  const Shape& out = y.shape();
  const size_t r = out.size();
  if (y.numel() == 0) return Status::ok();
  if (r == 0) {
    std::memcpy(y.raw(), x.raw(), x.nbytes());
    return Status::ok();
  }
  std::vector<std::vector<int64_t>> maps(r);
  for (size_t d = 0; d < r; ++d) {
    maps[d].resize(out[d]);
    for (int64_t o = 0; o < out[d]; ++o) maps[d][o] = pad_map_coord(o, g.begin[d], in[d], g.mode);
  }
  const std::vector<int64_t> st = strides_of(in);
  return dispatch_width(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U* px = x.data<U>();
    U* py = y.data<U>();
    const U v = *value.data<U>();
    const int64_t inner = out[r - 1];
    const std::vector<int64_t>& last = maps[r - 1];
    std::vector<int64_t> pos(r, 0);
    for (int64_t i = 0; i < y.numel(); i += inner) {
      int64_t base = 0;
      bool constant_row = false;
      for (size_t d = 0; d + 1 < r; ++d) {
        const int64_t m = maps[d][pos[d]];
        if (m < 0) constant_row = true;
        else base += m * st[d];
      }
      for (int64_t j = 0; j < inner; ++j) py[i + j] = (constant_row || last[j] < 0) ? v : px[base + last[j]];
      for (size_t d = r - 1; d-- > 0;) {
        if (++pos[d] < out[d]) break;
        pos[d] = 0;
      }
    }
    return Status::ok();
  });
}

}  // namespace qd::ops
