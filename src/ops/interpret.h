// The reference interpreter: executes an ir::Graph node by node with the ops' reference kernels. It is the oracle every
// backend is tested against, the CPU engine's executor, and what calibration and sensitivity run (so it lives with the
// ops, below quant/ and runtime/, not in a backend).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace qd {

struct ReferenceRunOptions {
  // Called after each node with the node and its outputs (calibration and sensitivity observe activations this way).
  std::function<void(const Node&, const std::vector<const Tensor*>&)> observer;
  // Keep every intermediate value alive (for debugging / layer comparisons); by default values are freed after
  // their last use.
  bool keep_all = false;
};

// Runs a prepared graph (shapes inferred, see passes/prepare_graph). `inputs` maps graph input names to tensors
// whose dtype and shape must match the graph's. Returns the graph outputs in order.
Expected<std::vector<Tensor>> run_reference(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                            const ReferenceRunOptions& opt = {});

}  // namespace qd
