// The "plugins" plan section: the plugin ops a plan's graph uses, one per line as "domain::name@version<TAB>source",
// so that loading a plan without them says which to load before anything else is read (exit 2, never a crash).
#pragma once

#include <string>

#include "ir/graph.h"
#include "plan/plan_file.h"

namespace qd {

// The section's text for g; empty when g uses no plugin op (the plan then has no such section).
std::string encode_plugin_list(const Graph& g);
// OK when every plugin op the plan lists is registered; otherwise an error listing the missing ones with the
// library each was built from.
Status check_plugin_list(const PlanFile& plan);

}  // namespace qd
