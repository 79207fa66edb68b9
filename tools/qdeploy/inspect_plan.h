// qdeploy inspect PLAN: the plan's header, sections and per-layer precisions (cmd_inspect.cpp dispatches here).
#pragma once

#include <string>

#include "build_flags.h"

namespace qd::cli {

// Build flags are refused as for any plan (check_flags_for_plan); prints text, or JSON with `json`.
int inspect_plan(const std::string& path, const BuildFlags& flags, bool json);

}  // namespace qd::cli
