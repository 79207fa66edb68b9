// Input-shape flags. (Loading a model, import and prepare, is frontend/frontend.h's load_prepared.)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace qd {

// Parses repeated "NAME:1x3x640x640" flags into a map.
Expected<std::map<std::string, Shape>> parse_shape_flags(const std::vector<std::string>& flags);

}  // namespace qd
