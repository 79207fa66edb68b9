#include "ops/window.h"

namespace qd::ops {

Expected<Window> read_window(const AttrMap& a, size_t k, const std::vector<int64_t>& kernel) {
  Window w;
  w.kernel = QD_TRY(a.get_ints("kernel_shape", kernel));
  if (w.kernel.size() != k) {
    return invalid("kernel_shape has " + std::to_string(w.kernel.size()) + " entries; the input has " +
                   std::to_string(k) + " spatial dims");
  }
  w.strides = QD_TRY(a.get_ints("strides", std::vector<int64_t>(k, 1)));
  w.dilations = QD_TRY(a.get_ints("dilations", std::vector<int64_t>(k, 1)));
  w.pads = QD_TRY(a.get_ints("pads", std::vector<int64_t>(2 * k, 0)));
  w.auto_pad = QD_TRY(a.get_string("auto_pad", std::string("NOTSET")));
  if (w.strides.size() != k || w.dilations.size() != k || w.pads.size() != 2 * k) {
    return invalid("strides, dilations and pads must have one entry per spatial dim (pads two)");
  }
  for (size_t i = 0; i < k; ++i) {
    if (w.kernel[i] <= 0 || w.kernel[i] > (1 << 20)) return invalid("kernel size must be positive");
    if (w.strides[i] <= 0 || w.strides[i] > (1 << 20)) return invalid("strides must be positive (got " + std::to_string(w.strides[i]) + ")");
    if (w.dilations[i] <= 0 || w.dilations[i] > (1 << 20)) return invalid("dilations must be positive");
  }
  for (int64_t p : w.pads) {
    if (p < 0 || p > (1 << 20)) return invalid("pads must be non-negative (got " + std::to_string(p) + ")");
  }
  if (w.auto_pad != "NOTSET" && w.auto_pad != "VALID" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER") {
    return invalid("unknown auto_pad '" + w.auto_pad + "'");
  }
  return w;
}

Expected<std::vector<int64_t>> window_output(const std::vector<int64_t>& in, Window* w, bool ceil_mode) {
  const size_t k = in.size();
  std::vector<int64_t> out(k);
  for (size_t i = 0; i < k; ++i) {
    const int64_t eff = (w->kernel[i] - 1) * w->dilations[i] + 1;
    if (w->auto_pad == "SAME_UPPER" || w->auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + w->strides[i] - 1) / w->strides[i];
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * w->strides[i] + eff - in[i]);
      const int64_t small = total / 2;
      w->pads[i] = w->auto_pad == "SAME_UPPER" ? small : total - small;
      w->pads[i + k] = total - w->pads[i];
      continue;
    }
    if (w->auto_pad == "VALID") w->pads[i] = w->pads[i + k] = 0;
    const int64_t padded = in[i] + w->pads[i] + w->pads[i + k];
    if (eff > padded) {
      return invalid("kernel (" + std::to_string(eff) + " with dilation) is larger than the padded input (" +
                     std::to_string(padded) + ") in spatial dim " + std::to_string(i));
    }
    int64_t span = padded - eff;
    out[i] = (ceil_mode ? (span + w->strides[i] - 1) / w->strides[i] : span / w->strides[i]) + 1;
    // With ceil_mode, the last window must start inside the input or left padding.
    if (ceil_mode && (out[i] - 1) * w->strides[i] >= in[i] + w->pads[i]) --out[i];
  }
  return out;
}

void fill_plane(ConvGeom& g, const Shape& x, const Shape& wt, const Window& win, const std::vector<int64_t>& out) {
  if (x.size() == 3) {
    g.h = 1; g.w = x[2]; g.kh = 1; g.kw = wt[2]; g.oh = 1; g.ow = out[0];
    g.sh = 1; g.sw = win.strides[0]; g.dh = 1; g.dw = win.dilations[0]; g.ph = 0; g.pw = win.pads[0];
  } else {
    g.h = x[2]; g.w = x[3]; g.kh = wt[2]; g.kw = wt[3]; g.oh = out[0]; g.ow = out[1];
    g.sh = win.strides[0]; g.sw = win.strides[1]; g.dh = win.dilations[0]; g.dw = win.dilations[1];
    g.ph = win.pads[0]; g.pw = win.pads[1];
  }
}

}  // namespace qd::ops
