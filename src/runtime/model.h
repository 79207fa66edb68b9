// Loading a model for execution: import ONNX, bind input shapes, infer shapes and fold constants.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace qd {

// Parses repeated "NAME:1x3x640x640" flags into a map.
Expected<std::map<std::string, Shape>> parse_shape_flags(const std::vector<std::string>& flags);
// Imports `path` and prepares it (passes/prepare_graph) with the given input shapes.
Expected<Graph> load_prepared(const std::string& path, const std::map<std::string, Shape>& shapes);

}  // namespace qd
