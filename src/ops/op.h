// The interface every op implements: shape/type inference and a reference (CPU, fp32-exact) kernel.
// Each op lives in src/ops/<op>.cpp (small families share a file) and is listed once in ops.def.
#pragma once

#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_traits.h"

namespace qd {

// What shape inference sees of one node. All input shapes are static here: the graph's symbolic dims are bound
// before inference (see passes/infer_shapes). Values are known for constants, and for every input when executing.
class InferCtx {
 public:
  InferCtx(const Node& node, std::vector<DType> in_types, std::vector<Shape> in_shapes,
           std::vector<const Tensor*> in_values)
      : node(node), in_types_(std::move(in_types)), in_shapes_(std::move(in_shapes)), in_values_(std::move(in_values)),
        out_types_(node.outputs.size(), DType::kUndefined), out_shapes_(node.outputs.size()) {}

  const Node& node;
  size_t num_inputs() const { return in_types_.size(); }
  bool has_input(size_t i) const { return i < node.inputs.size() && node.inputs[i] >= 0; }
  DType dtype(size_t i) const { return in_types_[i]; }
  const Shape& shape(size_t i) const { return in_shapes_[i]; }
  size_t rank(size_t i) const { return in_shapes_[i].size(); }
  // The input's data when it is known at this point (constants; every input during execution), else nullptr.
  const Tensor* value(size_t i) const { return has_input(i) ? in_values_[i] : nullptr; }
  // An input that must be known to infer shapes (e.g. Reshape's shape): its integer elements, or an error.
  Expected<std::vector<int64_t>> const_ints(size_t i) const;
  Expected<std::vector<float>> const_floats(size_t i) const;

  size_t num_outputs() const { return out_types_.size(); }
  bool has_output(size_t i) const { return i < node.outputs.size() && node.outputs[i] >= 0; }
  void set_output(size_t i, DType t, Shape s) {
    out_types_[i] = t;
    out_shapes_[i] = std::move(s);
  }
  DType out_dtype(size_t i) const { return out_types_[i]; }
  const Shape& out_shape(size_t i) const { return out_shapes_[i]; }

 private:
  std::vector<DType> in_types_;
  std::vector<Shape> in_shapes_;
  std::vector<const Tensor*> in_values_;
  std::vector<DType> out_types_;
  std::vector<Shape> out_shapes_;
};

// What a reference kernel sees: inputs (nullptr where omitted) and outputs already allocated with the inferred
// types and shapes (nullptr where the node does not produce them).
struct KernelCtx {
  const Node& node;
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
};

using InferFn = Status (*)(InferCtx&);
using RunFn = Status (*)(KernelCtx&);

struct OpSchema {
  const char* name;
  int min_inputs, max_inputs;    // max -1: variadic
  int min_outputs, max_outputs;
  InferFn infer;
  RunFn run;
  OpTraits traits;
};

const OpSchema& op_schema(OpType op);
// Node n of g as inference sees it: its inputs' types and shapes from g's values, constants' data (absent inputs
// undefined and empty).
InferCtx infer_ctx_for(const Graph& g, const Node& n);
// Checks arity; then runs the op's inference. Errors carry the node's name and op.
Status infer_node(InferCtx& ctx);
// After infer_node: allocates the outputs with the inferred types and shapes and runs the reference kernel on
// `inputs` (skipped when no output holds an element: nothing to compute, and a kernel must not loop over the rows
// of an empty 3x2^32x0). Returns one tensor per node output (empty where the node omits one); errors name the node.
Expected<std::vector<Tensor>> run_node(const InferCtx& ctx, const std::vector<const Tensor*>& inputs);

// Declarations of every op's functions (defined in the op files).
namespace ops {
#define QD_OP(name, ...)          \
  Status infer_##name(InferCtx&); \
  Status run_##name(KernelCtx&);
#include "ops/ops.def"
#undef QD_OP
}  // namespace ops

}  // namespace qd
