// inspect MODEL --target cuda --svg F: the layout plan (plan/layout.h) as a strip, one box per node in graph order,
// green on the fast layers, grey in the ONNX form, a red mark before each node that reads a reformat.
#pragma once

#include <string>

#include "ir/graph.h"
#include "plan/layout.h"

namespace qd::cli {

std::string layout_svg(const Graph& g, const LayoutPlan& p, const std::string& title);

}  // namespace qd::cli
