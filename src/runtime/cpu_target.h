// The CPU reference as a build target (plan/target.h): every op of ops.def and every registered plugin has a reference
// kernel, in fp32; INT8 is the reference's exact (or fake-quant) arithmetic on the ops whose weights or inputs the
// INT8 rewrite quantizes.
#pragma once

#include "plan/target.h"

namespace qd {

class CpuTarget : public Target {
 public:
  std::string name() const override { return "cpu"; }
  Support supports(const Graph& g, const Node& n, const NodeFormats& formats) const override;
};

}  // namespace qd
