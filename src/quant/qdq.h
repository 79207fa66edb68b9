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
  // Asymmetric activations (uint8 Q/DQ pairs with a zero point, e.g. from qdeploy.qat --asymmetric-activations):
  // tensor name -> zero point in [0, 255]. Only the CPU reference runs them; TensorRT's INT8 is symmetric.
  std::map<std::string, int> act_zero_points;
  std::map<std::string, std::vector<float>> weight_scales;  // weight constant name -> per-channel scales
  int pairs = 0;
};

// "N activations are quantized asymmetrically (uint8 with a zero point, e.g. tensor 'x' with zero point z)": the
// start of the errors of the builds that take only symmetric INT8 (the GPU's, qat2ptq's). zero_points not empty.
std::string asymmetric_summary(const std::map<std::string, int>& zero_points);

// True when the graph holds QuantizeLinear/DequantizeLinear nodes.
bool has_qdq(const Graph& g);
// Strips the Q/DQ pairs of an imported graph (before prepare_graph). A DequantizeLinear of stored int8 weights (no Q,
// int8 data, per-tensor or axis-0 scales) becomes the float weight it stands for, with its scales as weight scales.
// Activation pairs may be uint8 with a zero point (act_zero_points); a pair without a zero point is uint8 with zero
// point 0, as ONNX defines it, unless (opset 21) the Q's output_dtype says int8. Errors: a non-zero int8 zero point,
// uint8 weights, a Q and DQ with different scales or zero points, a per-axis activation scale, a Q whose output
// feeds anything but DequantizeLinear.
Expected<QdqScales> strip_qdq(Graph& g);

}  // namespace qd
