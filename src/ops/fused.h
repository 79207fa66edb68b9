// Fused ops: what the builder's fusion passes (src/passes/fuse_*.cpp) make of several ONNX nodes, with typed
// attributes read once here. A model cannot name them (op_from_name does not know kind Fused); the reference runs
// them, so that a fused graph can be checked against the graph it came from.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace qd::ops {

// The activations a conv epilogue applies (ONNX spelling; Silu is x * Sigmoid(x)).
enum class Activation { kNone, kRelu, kSilu, kSigmoid, kLeakyRelu, kHardSwish, kHardSigmoid, kClip };
const char* activation_name(Activation a);
Expected<Activation> activation_from_name(const std::string& s);

// FusedConv: Y = activation(Conv(X, W, B)) [+ R]; inputs X, W, B (optional), R (optional, Y's shape: a residual
// added after the activation, as in a ResNet or YOLOv5 bottleneck). Attributes: Conv's, plus
//   activation (string, default "None"), alpha / beta (floats: LeakyRelu's alpha, HardSigmoid's alpha and beta,
//   Clip's min and max), fused (strings: the names of the nodes folded in, for profiles and error messages).
struct FusedConvAttrs {
  Activation act = Activation::kNone;
  float alpha = 0.f, beta = 0.f;
  bool residual = false;
  std::vector<std::string> fused;
};
Expected<FusedConvAttrs> fused_conv_attrs(const Node& n);
// Writes `a` into n's attributes (the Conv attributes already there stay).
void set_fused_conv_attrs(Node& n, const FusedConvAttrs& a);

// MaxPoolChain: Y1 = MaxPool(X), Yk = MaxPool(Yk-1), 2 to 8 outputs, with one window that keeps the size (odd
// kernel, stride 1, (k - 1) / 2 padding on every side, no dilation, floor mode): SPPF's pools, whose outputs a Concat
// usually joins. Attributes: MaxPool's kernel_shape, pads and strides; fused (strings: the names of the pools after
// the first, which names the node).
// A fused node's "fused" attribute: the names of the nodes folded into it (empty when absent or not strings).
std::vector<std::string> fused_names(const Node& n);
// The window of MaxPool node m when it is such a size-keeping window over a 4-d input of shape `x`, else empty.
Expected<std::vector<int64_t>> same_size_pool_window(const Node& m, const Shape& x);

// One step of an elementwise program: an ONNX elementwise op applied to x, with a float32 constant where the op
// takes a second input. Unary: Relu, Sigmoid, Tanh, Exp, Neg, Abs, Sqrt, Reciprocal, HardSwish, LeakyRelu (alpha in
// a), HardSigmoid (alpha, beta in a, b), Clip (build-time bounds in a, b); binary: Add, Sub, Mul, Div, Pow, Max, Min.
struct ElementwiseStep {
  OpType op = OpType::Relu;
  int operand = -1;        // binary ops: the constant (elementwise_step: its value id; SliceConcat: its input index)
  bool x_first = true;     // binary ops: x is the op's first input
  float a = 0.f, b = 0.f;  // LeakyRelu's alpha; HardSigmoid's alpha and beta; Clip's min and max
};
// Whether node n of g is such a step on value x: one float32 output of x's shape, every other input a float32
// constant (a binary op's broadcasts to x; Clip's bounds known at build time). Fills *st when it is.
Expected<bool> elementwise_step(const Graph& g, const Node& n, int x, ElementwiseStep* st);

// SliceConcat: Y = Concat(P1(X[..., s1 : s1 + n1]), P2(X[..., s2 : s2 + n2]), ...) along the last axis, each Pk an
// elementwise program (possibly empty) on its slice: a detector head's decode (YOLO's xy, wh and confidence columns of
// one sigmoid, each through its own arithmetic), made by fuse_slice_concat. Inputs: X, then the binary steps'
// constants. Attributes: starts, lengths (ints, one per segment), step_counts (ints, steps per segment), step_ops
// (strings, ONNX op names), step_operands (ints: a binary step's input index, else -1), step_x_first (ints),
// step_a / step_b (floats), fused (strings: the Slices and steps folded in, in order).
struct SliceConcatSegment {
  int64_t start = 0, len = 0;
  std::vector<ElementwiseStep> steps;
};
struct SliceConcatAttrs {
  std::vector<SliceConcatSegment> segments;
  std::vector<std::string> fused;
};
Expected<SliceConcatAttrs> slice_concat_attrs(const Node& n);
void set_slice_concat_attrs(Node& n, const SliceConcatAttrs& a);

// Clip's bounds when they are known at build time (attributes before opset 11, float32 scalar constants after;
// absent: unbounded); false when one is computed at run time. lo > hi is left as it is (ONNX: every value becomes hi).
Expected<bool> clip_constant_bounds(const Graph& g, const Node& n, float* lo, float* hi);

// The activation as the unfused reference computes it: in double from the float input, rounded once, except Silu:
// x times Sigmoid(x) rounded to float, as a Mul of the two float tensors.
float activate(Activation a, float x, float alpha, float beta);

}  // namespace qd::ops
