// The INT8 options of a build: activation scales from a QAT model's Q/DQ pairs, a calibration cache and/or a
// precision config, plus the nodes kept in float. Shared by every engine so that they quantize the same tensors.
#pragma once

#include "ir/graph.h"
#include "quant/int8.h"
#include "runtime/engine.h"

namespace qd {

// `g` as imported; a QAT model's Q/DQ pairs are stripped from it (their scales become the options').
Expected<Int8Options> load_int8_options(Graph& g, const BuildOptions& opt);

}  // namespace qd
