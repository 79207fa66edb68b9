// INT8 for the reference backend: rewrites a prepared graph so that it computes what DESIGN.md's INT8 contract says.
//
// Which tensors are quantized: the data input of every INT8 compute node (Conv; Gemm or MatMul with a constant B:
// has_int8_form) that has an activation scale. Such a tensor is quantized once,
// q = clamp(round_half_even(x / s), -128, 127) (or, for a tensor with a zero point zp, asymmetric uint8:
// clamp(round_half_even(x / s) + zp, 0, 255)), and every consumer sees the quantized value ("one tensor, one
// format": the GPU engine stores it as int8). Data-movement ops between a producer and the quantization point stay
// transparent: max-pooling, concatenation, nearest resizing and reshaping commute with a shared per-tensor
// quantization, so the GPU engine may run them on int8 with that scale.
//
// exact mode: Conv -> QuantizeLinear(x) + ConvInteger(q_x, q_w, zp) (int32: sum (q_x - zp) q_w, padding contributes
//             0) + Cast + Mul(s_x * s_w[c]) + Add(bias);
//             the epilogue (activation, residual add) then runs in fp32 on the result, as in the contract.
//             Gemm and MatMul likewise with MatMulInteger (a MatMul's input may have any rank: rows [..., C]).
// fake mode:  Conv -> Conv(DequantizeLinear(QuantizeLinear(x)), dequantized q_w) + bias in fp32 (fast analysis);
//             agrees with exact mode to float rounding, i.e. within 1 LSB after the next quantization.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/precision_plan.h"

namespace qd {

// kExactDla: exact, with every activation quantized rounding ties away from zero (2.5 -> 3, -2.5 -> -3), as Orin's
// DLA rounds, instead of half to even; weights are quantized as in kExact (TensorRT does that on the host).
enum class Int8Mode { kExact, kFake, kExactDla };

struct WeightQuant {
  Tensor q;                   // int8, same shape as the weight; values in [-127, 127]
  std::vector<float> scales;  // one per output channel
};
// Per-output-channel symmetric quantization along `axis` (0 for Conv weights [M, C/g, kh, kw]; 1 for Gemm's B
// [K, N]): s[c] = max|w[c]| / 127 (1 for an all-zero channel), q = clamp(round_half_even(w / s[c]), -127, 127).
WeightQuant quantize_weights(const Tensor& w, int axis);
// Same, with given scales (from a QAT model).
WeightQuant quantize_weights_with(const Tensor& w, int axis, const std::vector<float>& scales);

struct Int8Options {
  Int8Mode mode = Int8Mode::kExact;
  std::map<std::string, float> act_scales;  // tensor name -> activation scale
  // Asymmetric activations (from a QAT model's uint8 Q/DQ pairs; outside DESIGN.md's symmetric contract, CPU
  // reference only): tensor name -> zero point, q = clamp(round_half_even(x / s) + zp, 0, 255).
  std::map<std::string, int> act_zero_points;
  // Per-channel weight scales of QAT models (weight constant name -> scales); computed from the weights (max|w|)
  // where there are none at all. Once there are some, a Conv/Gemm whose weights have none stays in float.
  std::map<std::string, std::vector<float>> weight_scales;
  std::vector<std::string> float_nodes;     // nodes kept in float (names; a name may be a regex: see matches_any)
  // Nodes kept in float, by exact name only: what a plan stores (untrusted files never reach std::regex).
  std::set<std::string> float_node_names;
};

struct Int8Report {
  std::vector<std::string> int8_nodes;
  std::vector<std::string> float_nodes;       // asked for by the user
  // Quantizable but kept in float: their input has no scale, or the weights are quantized explicitly (weight_scales
  // not empty) and theirs have none.
  std::vector<std::string> no_scale_nodes;
  int64_t int8_macs = 0, total_macs = 0;
  std::vector<LayerPrecision> layers;         // every Conv, Gemm and MatMul, in graph order
};

// The report of a precision plan over the graph it was computed on.
Int8Report int8_report(const Graph& g, const PrecisionPlan& plan);

// The axis of an INT8 Conv's, Gemm's or MatMul's weight that holds its output channels (one weight scale each): 0 for
// a Conv's [M, C/g, k...] and a transposed Gemm B [N, K], 1 for a Gemm or MatMul B [K, N].
int int8_weight_axis(const Node& n);

// Explicit weight quantization (a QAT model's weight Q/DQ pairs, or a precision config's weight scales): a Conv/Gemm
// whose weights have no scales while others have was left in float by the model, as TensorRT runs such a layer, even
// where its input tensor has a scale from another reader. False when there are no weight scales at all (max|w|).
bool weights_left_float(const std::map<std::string, std::vector<float>>& weight_scales, const std::string& weight);

// True when `name` equals one of `patterns` or fully matches one read as an ECMAScript regex.
bool matches_any(const std::string& name, const std::vector<std::string>& patterns);

// opt with its float_nodes patterns resolved into the exact names of g's nodes they match (float_node_names), as a
// plan stores them.
Int8Options resolve_float_nodes(const Graph& g, const Int8Options& opt);

// Rewrites a prepared graph (shapes inferred) for INT8 as `plan` (computed on this graph with these options) says,
// and re-infers its shapes.
Expected<Int8Report> lower_int8(Graph& g, const Int8Options& opt, const PrecisionPlan& plan);
// The same with the plan compute_precision(g, opt) gives.
Expected<Int8Report> lower_int8(Graph& g, const Int8Options& opt);

}  // namespace qd
