#include "runtime/cpu_target.h"

#include "ops/op.h"
#include "ops/op_traits.h"

namespace qd {

Support CpuTarget::supports(const Graph&, const Node& n, const NodeFormats& f) const {
  if (f.has(TensorPrecision::kFp16)) {
    return Support::no("the reference computes in fp32 (the float layers of fp16 and INT8 builds run in fp32)",
                       "docs/quantization.md (Semantics)");
  }
  if (f.has(TensorPrecision::kInt8)) {
    const Int8Rule r = n.op < OpType::kCount ? op_traits(n.op).int8 : Int8Rule::kFloat;
    if (r != Int8Rule::kWeights && r != Int8Rule::kInteger) {
      return Support::no(std::string(op_name(n.op)) +
                             " runs in float on dequantized values (INT8 covers Conv and Gemm inputs, and Q/DQ)",
                         "src/ops/ops.def (int8 trait)");
    }
  }
  return Support::ok({}, "src/ops/ops.def");
}

}  // namespace qd
