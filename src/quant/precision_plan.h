// The precision plan: which arithmetic each node of a prepared graph runs in and why, and the scale and zero point of
// each tensor an INT8 node reads. Computed once from the graph and the build's Int8Options (calibration cache
// scales, a QAT model's Q/DQ scales, the precision config, --fp16-layers/--fp32-layers); the reference INT8 rewrite
// (lower_int8), the CUDA builder and `qdeploy inspect` read it instead of deciding again. Precisions and reasons are
// enums; they become words only where a person or a file reads them (precision_words).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/precision.h"
#include "ir/graph.h"

namespace qd {

struct Int8Options;  // quant/int8.h

// Why a node runs at its precision. The rules (DESIGN.md, INT8 semantics), in the order they are applied to a Conv,
// Gemm or MatMul: kNotQuantizable, kAsked, kNoScale, kNoWeightScale, else kQuantized.
enum class PrecisionReason {
  kQuantized,       // int8: its data input has an activation scale and its weights are quantized (given scales or
                    // max|w| per output channel)
  kNotQuantizable,  // float: no INT8 form (has_int8_form: weights not a float constant, a MatMul's not 2-d, input
                    // not float, Gemm with transA or with alpha or beta other than 1)
  kAsked,           // float: named by --fp16-layers / --fp32-layers or the precision config's float nodes
  kNoScale,         // float: its data input has no activation scale
  kNoWeightScale,   // float: the model quantizes weights explicitly and leaves this node's without scales
  kNoInt8Compute,   // not a Conv, Gemm or MatMul: no INT8 compute of its own (data movement follows its tensors'
                    // formats)
};

struct NodePrecision {
  Precision precision = Precision::kFp32;
  PrecisionReason reason = PrecisionReason::kNoInt8Compute;
};

// How one tensor is quantized: q = clamp(round_half_even(x / scale) + zero_point, lo, hi), int8 [-128, 127] when
// symmetric (zero point 0), uint8 [0, 255] when asymmetric (a QAT model's uint8 Q/DQ pair; CPU reference only).
struct TensorQuant {
  float scale = 0.f;
  int zero_point = 0;
  bool asymmetric = false;
};

struct PrecisionPlan {
  // What a node that does not run in INT8 runs in on the target the plan is for (fp32 on the CPU reference, fp16 in
  // a CUDA INT8 build).
  Precision float_precision = Precision::kFp32;
  std::vector<NodePrecision> nodes;    // one per node of the graph it was computed on, in the graph's order
  std::map<int, TensorQuant> tensors;  // value id -> its quantization, for every data input of an INT8 node

  bool is_int8(size_t node) const { return node < nodes.size() && nodes[node].precision == Precision::kInt8; }
};

// Conv, Gemm and MatMul: the ops with an INT8 form of their own (a MatMul by constant weights is the Linear layer
// exporters write for inputs of rank > 2).
bool is_int8_compute(OpType op);

// Whether node n (an is_int8_compute op) has that form: constant fp32 weights as its second input (a MatMul's 2-d,
// [C, K]), a data input that is not a constant and is float where the graph knows its type (an imported graph does
// not yet), and for a Gemm no transA and alpha = beta = 1.
bool has_int8_form(const Graph& g, const Node& n);

// Node n's precision under opt (the rules above), and for an INT8 node its data input's quantization in *input.
// Errors as compute_precision's. What compute_precision computes for each node, and what the Q/DQ exporter asks
// of each node of an imported graph.
Expected<NodePrecision> node_precision(const Graph& g, const Node& n, const Int8Options& opt,
                                       Precision float_precision, TensorQuant* input);

// The plan of a prepared graph (shapes inferred) under `opt` (its mode does not matter). Errors for a scale that is
// not a positive finite number or per-channel weight scales whose count is not the weight's channel count, at the
// first INT8 node that has one, as lower_int8 reports them.
Expected<PrecisionPlan> compute_precision(const Graph& g, const Int8Options& opt,
                                          Precision float_precision = Precision::kFp32);

// The words reports, plan files and `inspect` print: "int8", or "float" with why: "float (asked)", "float (no scale)",
// "float (no weight scale)", "float (not quantizable)"; a node that is not a Conv, Gemm or MatMul prints its
// precision's name.
std::string precision_words(const NodePrecision& p);

// The one Conv, Gemm or MatMul of a report (quant/int8.h's Int8Report) and the precision the plan gave it.
struct LayerPrecision {
  std::string node, op;
  int64_t macs = 0;
  NodePrecision precision;
};

}  // namespace qd
