// Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops: attributes, checks, output sizes.
#pragma once

#include <vector>

#include "ir/attr.h"
#include "ops/op.h"

namespace qd::ops {

struct Window {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads;  // begin_0..begin_k-1, end_0..end_k-1
  std::string auto_pad;
};

// Reads kernel_shape (or takes `kernel` when the op derives it from a weight), strides, dilations, pads, auto_pad
// and checks them: positive strides/dilations/kernel, non-negative pads, one entry per spatial dim.
Expected<Window> read_window(const AttrMap& a, size_t spatial_rank, const std::vector<int64_t>& kernel);
// Convolution geometry on a 2-d plane (1-d convolutions run as 2-d with H = 1): shared by Conv, ConvInteger and
// ConvTranspose.
struct ConvGeom {
  int64_t n, c, h, w, m, kh, kw, oh, ow, group;
  int64_t sh, sw, dh, dw, ph, pw;
};
// Fills the plane fields from the input shape x [N, C, spatial...], the weight's kernel dims, the (resolved) window
// and the output spatial dims; n, c, m and group are set by the caller.
void fill_plane(ConvGeom& g, const Shape& x, const Shape& wt, const Window& win, const std::vector<int64_t>& out);

// The geometry of a Conv (and ConvInteger) / ConvTranspose node for input shape x and weight shape wt; *out gets the
// output shape. Defined in conv.cpp / conv_transpose.cpp; the CUDA backend reads nodes through them too.
Expected<ConvGeom> conv_geom(const Node& node, const Shape& x, const Shape& wt, Shape* out);
Expected<ConvGeom> tconv_geom(const Node& node, const Shape& x, const Shape& wt, Shape* out);

// Output spatial dims for a forward window (conv/pool); resolves SAME_* auto padding into w->pads.
// Errors when the effective kernel is larger than the padded input.
Expected<std::vector<int64_t>> window_output(const std::vector<int64_t>& in, Window* w, bool ceil_mode);

}  // namespace qd::ops
