// OpType: one enumerator per supported op, in ONNX spelling, generated from ops.def.
#pragma once

#include <optional>
#include <string>

namespace qd {

enum class OpType : int {
#define QD_OP(name, ...) name,
#include "ops/ops.def"
#undef QD_OP
  kCount
};

const char* op_name(OpType op);
// The op for an ONNX op_type in the default domain; nullopt when qdeploy does not support it.
std::optional<OpType> op_from_name(const std::string& name);

}  // namespace qd
