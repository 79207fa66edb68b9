// Static cost model: multiply-accumulates per node (by the op's `macs` trait in ops.def: Conv, ConvTranspose, Gemm,
// MatMul) and parameter counts.
#pragma once

#include "ir/graph.h"

namespace qd {

// MACs of one node of a shape-inferred graph (0 for ops without a matrix product).
int64_t node_macs(const Graph& g, const Node& n);
// Elements in the graph's constants of floating-point type (the model's parameters).
int64_t parameter_count(const Graph& g);

}  // namespace qd
