// ir::Graph -> ONNX. Meant for graphs as the importer makes them (before prepare_graph), e.g. a QAT model with its
// Q/DQ pairs removed: every node is a default-domain ONNX op, constants become initializers, and the node and value
// names are kept, so that calibration caches and layer lists written for the graph also name the exported model.
#pragma once

#include <string>

#include "ir/graph.h"

namespace qd {

// The model as serialized ModelProto bytes (tensors inline as raw_data; models over 2 GiB are refused).
Expected<std::string> export_onnx_bytes(const Graph& g);
// Writes the model to `path` atomically.
Status export_onnx_file(const Graph& g, const std::string& path);

}  // namespace qd
