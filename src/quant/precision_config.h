// Precision config (--precision-config FILE.json): per-tensor INT8 scales and per-node precisions, in the JSON that
// qdq-translator and `qdeploy qat2ptq` write:
//   {"int8_tensor_scales": {"tensor": 0.0123, ...},   activation scales; they replace a calibration cache's
//    "fp16_nodes": ["node", ...],                      nodes kept in float (fp16 on the GPU)
//    "fp32_nodes": ["node", ...],                      nodes kept in fp32
//    "weight_scales": {"weight": [s0, s1, ...], ...}}  per-output-channel weight scales (qdeploy's addition: the
//                                                      QAT scales, so a qat2ptq model computes what the QAT model
//                                                      did; TensorRT derives weight scales from the weights)
// Every key is optional; node names are exact names, not regexes.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace qd {

struct Int8Options;

struct PrecisionConfig {
  std::vector<std::pair<std::string, float>> int8_tensor_scales;  // file order
  std::vector<std::string> fp16_nodes, fp32_nodes;
  std::map<std::string, std::vector<float>> weight_scales;
};

// `what` names the source in errors, which give the JSON path: "FILE: $.int8_tensor_scales["x"]: ...".
Expected<PrecisionConfig> parse_precision_config(const std::string& text, const std::string& what);
Expected<PrecisionConfig> read_precision_config(const std::string& path);
std::string format_precision_config(const PrecisionConfig& c);
// Every tensor must be a value of `g`, every node a node of `g`, every weight a constant with one scale per output
// channel; the error names the first offender by its JSON path.
Status check_precision_config(const PrecisionConfig& c, const Graph& g, const std::string& what);
// Reads and checks `path` against `g`, then merges it into `opt`: its scales replace or add to opt->act_scales and
// opt->weight_scales, its fp16 and fp32 nodes join opt->float_nodes.
Status apply_precision_config(const std::string& path, const Graph& g, Int8Options* opt);

}  // namespace qd
