// The INT8 options of a build: activation scales from a QAT model's Q/DQ pairs, a calibration cache and/or a
// precision config, plus the nodes kept in float. Shared by every engine so that they quantize the same tensors.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/int8.h"

namespace qd {

// Where a build's INT8 options come from: the INT8 part of the build options (runtime/int8_sources.h maps
// BuildOptions onto it, so that quant/ does not depend on the runtime).
struct Int8Sources {
  Int8Mode mode = Int8Mode::kExact;
  std::string calib_cache;       // TensorRT text format ("" = none)
  std::string precision_config;  // qat2ptq's JSON ("" = none)
  // Nodes kept in float (names or regexes): the --fp32-layers, then the --fp16-layers.
  std::vector<std::string> float_layers;
};

// `g` as imported; a QAT model's Q/DQ pairs are stripped from it (their scales become the options').
Expected<Int8Options> load_int8_options(Graph& g, const Int8Sources& src);

}  // namespace qd
