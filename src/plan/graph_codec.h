// ir::Graph <-> bytes, for plans that keep the model's graph (CPU plans). Ops are stored by name, not by OpType
// number, so a plan survives additions to ops.def; a plan naming an op this qdeploy lacks is a clear error.
#pragma once

#include <string>

#include "ir/graph.h"

namespace qd {

// Errors only for graphs a plan cannot hold (a rank above 8, a string tensor).
Expected<std::string> encode_graph(const Graph& g);
// Validates everything (ids in range, each value produced once, topological order, tensor sizes, known ops and
// dtypes) and returns a graph that passes Graph::verify(). Never crashes; allocates about the input's size at most.
Expected<Graph> decode_graph(const std::string& bytes);

}  // namespace qd
