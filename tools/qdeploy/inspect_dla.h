// inspect MODEL --target dla[:VERSION]: which nodes TensorRT places on Orin's DLA and which fall back to the GPU, why,
// the segments and transitions, the DLA subgraph count against the per-core limit, and the I/O formats to build with.
#pragma once

#include <string>

#include "build_flags.h"

namespace qd::cli {

// "dla" or "dla:VERSION" -> VERSION ("" for the default); false when `target` is not a DLA target.
bool parse_dla_target(const std::string& target, std::string* version);

// Prints the placement (text, or JSON with `json`) and writes `svg` when not empty. Returns the exit code.
int inspect_dla(const std::string& model, const std::string& version, const BuildFlags& f, bool json, bool layers,
                const std::string& svg);

}  // namespace qd::cli
