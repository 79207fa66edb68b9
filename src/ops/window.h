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
// Output spatial dims for a forward window (conv/pool); resolves SAME_* auto padding into w->pads.
// Errors when the effective kernel is larger than the padded input.
Expected<std::vector<int64_t>> window_output(const std::vector<int64_t>& in, Window* w, bool ceil_mode);

}  // namespace qd::ops
