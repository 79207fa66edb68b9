// The question a build target answers about one node, without a device: can it run this node with these tensor
// formats, and if not, why. The builder (placement, fallback, reformats) asks it; `qdeploy inspect --target` prints
// its answers. Rules-only targets (backends/dla/) implement nothing else; targets with kernels add layer
// construction and tactics behind the same question.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace qd {

// The precision of one tensor at a node's boundary, as the build would store it (kFp32 also stands for a tensor that
// is not a float one, in its ONNX dtype).
enum class TensorPrecision { kFp32, kFp16, kInt8 };
const char* precision_name(TensorPrecision p);

// The formats of a node's data tensors (constant inputs such as weights are not listed): one entry per non-constant
// input, in input order, and one per output.
struct NodeFormats {
  std::vector<TensorPrecision> inputs, outputs;
  // Whether any input or output is in precision p.
  bool has(TensorPrecision p) const {
    return std::find(inputs.begin(), inputs.end(), p) != inputs.end() ||
           std::find(outputs.begin(), outputs.end(), p) != outputs.end();
  }
};

// A target's answer: yes or no, why (for a no: what breaks the rule; for a yes: notes worth showing, e.g. a fusion),
// and where the rule comes from (document, version, section), so that a user can check it.
struct Support {
  bool yes = false;
  std::string reason;
  std::string source;

  static Support ok(std::string note = {}, std::string source = {}) { return {true, std::move(note), std::move(source)}; }
  static Support no(std::string reason, std::string source) { return {false, std::move(reason), std::move(source)}; }
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string name() const = 0;
  // `g` is prepared (shapes inferred); `n` is one of its nodes.
  virtual Support supports(const Graph& g, const Node& n, const NodeFormats& formats) const = 0;
  // Whether n, run in the target's own formats (plan/layout.h's fast layout), can also write its result in the ONNX
  // form itself (a conv epilogue writing NCHW fp32), so that readers in the ONNX form need no reformat.
  virtual bool writes_onnx_form(const Graph& g, const Node& n) const {
    (void)g;
    (void)n;
    return false;
  }
};

// Every data tensor of n (the inputs that are not constants, and the outputs) in precision p.
inline NodeFormats uniform_formats(const Graph& g, const Node& n, TensorPrecision p) {
  NodeFormats f;
  for (int v : n.inputs) {
    if (v >= 0 && !g.is_constant(v)) f.inputs.push_back(p);
  }
  for (int v : n.outputs) {
    if (v >= 0) f.outputs.push_back(p);
  }
  return f;
}

inline const char* precision_name(TensorPrecision p) {
  switch (p) {
    case TensorPrecision::kFp32: return "fp32";
    case TensorPrecision::kFp16: return "fp16";
    case TensorPrecision::kInt8: return "int8";
  }
  return "?";
}

}  // namespace qd
