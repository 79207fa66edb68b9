// The other export of a model's INT8 scales: a Q/DQ ONNX (explicit quantization, the only INT8 input TensorRT 11 and
// its strongly typed networks take), placed as TensorRT's Q/DQ guidance recommends and as qdeploy's INT8 contract
// computes (DESIGN.md, "INT8 semantics"):
//   - every INT8 Conv/Gemm gets a per-output-channel weight quantizer (QuantizeLinear -> DequantizeLinear on the float
//     weight, axis 0 for Conv, the output axis for Gemm), with the scales the reference uses;
//   - its activation input gets one per-tensor quantizer, shared by every reader of that tensor, so a residual Add
//     that reads a quantized Conv input reads the quantized value (the residual-add quantizer) and a Concat feeding a
//     Conv is quantized once at its output (one scale for its inputs);
//   - layers left in float have no quantizer and read float tensors.
// Importing the result and building it INT8 (quant/qdq.h strips the pairs back into the same scales) gives the same
// INT8 graph as building the float model with the scales.
#pragma once

#include "ir/graph.h"
#include "quant/int8.h"

namespace qd {

struct QdqExportReport {
  int activation_quantizers = 0, weight_quantizers = 0;
  std::vector<std::string> int8_nodes;  // Conv/Gemm given quantizers, graph order
};

// `g` as imported (not prepared), opt with float_node_names resolved (resolve_float_nodes). Opset >= 13 (per-axis
// Q/DQ). Errors name the node.
Expected<Graph> insert_qdq(const Graph& g, const Int8Options& opt, QdqExportReport* report = nullptr);

}  // namespace qd
