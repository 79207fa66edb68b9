// qat2ptq: turns a QAT model (QuantizeLinear/DequantizeLinear pairs) into the same model without Q/DQ plus per-tensor
// INT8 scales, as NVIDIA's qdq-translator does for TensorRT and DLA (which take implicit quantization: a float model
// and a calibration cache). Scales come from the Q/DQ pairs (quant/qdq.h), then from rules that carry them to
// tensors without a Q/DQ (docs/quantization.md, section "qat2ptq", lists every rule):
//   range-keeping ops (Relu, MaxPool, Pad with zeros/edge/reflect/wrap, Reshape, Transpose, Flatten, Squeeze,
//     Unsqueeze, nearest Resize/Upsample): input and output share a scale, carried in both directions;
//   Concat: output = max of its inputs' scales; inputs without a scale take the output's;
//   SiLU, Mul(x, Sigmoid(x)): the Sigmoid output gets 1/127 (range [0, 1]); x and the Mul output share a scale;
//   optionally, a Conv output without a scale whose only reader is a two-input Add gets scale 1 (DLA's Conv+Add
//     fusion needs a scale there; qdq-translator's --add_unary_ew_scales_for_dla).
// Tensors left without a scale are listed, and their consumers are the fp16 nodes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/calib_cache.h"

namespace qd {

struct Qat2PtqOptions {
  bool unit_scale_for_add = false;
};

struct TensorScale {
  std::string tensor;
  float scale = 0;
  std::string rule;  // where it came from: "Q/DQ", "Relu (forward)", "Concat (backward)", ...
};

struct Qat2Ptq {
  // Without Q/DQ. The weights are the dequantized QAT weights q * s (what the QAT model computed with), so float
  // fallback layers compute what was trained and re-quantizing them per channel lands within half a step of q * s.
  Graph model;
  std::vector<TensorScale> scales;                           // activations, graph order
  std::map<std::string, std::vector<float>> weight_scales;   // the QAT per-output-channel weight scales
  std::vector<std::string> unscaled;    // float activations left without a scale, graph order
  std::vector<std::string> fp16_nodes;  // the consumers of the unscaled tensors, graph order, no repeats
  int pairs = 0;                        // Q/DQ pairs removed

  const TensorScale* find(const std::string& tensor) const;
};

// `g` as imported (before prepare_graph). Errors (from strip_qdq) name the node: a non-zero zero point, a Q and its
// DQ with different scales, a per-axis activation scale.
Expected<Qat2Ptq> qat_to_ptq(Graph g, const Qat2PtqOptions& opt);

// One `node:int8` or `node:fp16` line per node (trtexec's --layerPrecisions spelling, one per line).
std::string format_layer_precisions(const Qat2Ptq& r);

// Writes DIR/model.onnx, DIR/model.cache (TensorRT text format, header from `header`), DIR/model.json (the precision
// config: quant/precision_config.h) and DIR/model.layer_precisions.txt. Everything is serialized before the first
// file is written, and each file is written atomically, so a file in DIR is complete or absent.
Status write_qat2ptq(const Qat2Ptq& r, const std::string& dir, const CalibCache& header);

}  // namespace qd
