// Static cost model: multiply-accumulates per node (by the op's `macs` trait in ops.def: Conv, ConvTranspose, Gemm,
// MatMul) and parameter counts.
#pragma once

#include "ir/graph.h"

namespace qd {

// MACs of one node of a shape-inferred graph (0 for ops without a matrix product), saturating at INT64_MAX: the shapes
// of an untrusted model may multiply past 2^63.
int64_t node_macs(const Graph& g, const Node& n);
// What evaluating the node costs on the reference: its MACs plus, for window ops (pooling, and any op with a
// `kernel_shape`), the window's size times the outputs, and for Einsum its loop's multiplies, which MACs do not count.
// Saturating like node_macs.
int64_t node_work(const Graph& g, const Node& n);
// a + b for MAC totals, saturating the same way.
inline int64_t add_macs(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}
// Elements in the graph's constants of floating-point type (the model's parameters).
int64_t parameter_count(const Graph& g);

}  // namespace qd
