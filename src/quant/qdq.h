// Explicit quantization: reads the scales of a QAT model's QuantizeLinear -> DequantizeLinear pairs and removes the
// pairs, leaving the float model plus the scales (activations per tensor, weights per output channel). The result is
// built with the same INT8 lowering as a calibrated model (quant/int8.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace qd {

struct QdqScales {
  std::map<std::string, float> act_scales;                  // tensor name -> scale
  std::map<std::string, std::vector<float>> weight_scales;  // weight constant name -> per-channel scales
  int pairs = 0;
};

// True when the graph holds QuantizeLinear/DequantizeLinear nodes.
bool has_qdq(const Graph& g);
// Strips the Q/DQ pairs of an imported graph (before prepare_graph). A DequantizeLinear of stored int8 weights (no Q,
// int8 data, per-tensor or axis-0 scales) becomes the float weight it stands for, with its scales as weight scales.
// Errors: a non-zero zero point, a Q and DQ with different scales, a per-axis activation scale, a Q whose output
// feeds anything but DequantizeLinear.
Expected<QdqScales> strip_qdq(Graph& g);

}  // namespace qd
