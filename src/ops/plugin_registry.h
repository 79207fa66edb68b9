// Plugin ops (include/qdeploy/plugin.h) inside qdeploy: the run-time tail of the op table. Built-in ops keep their
// compile-time OpType values below OpType::kCount; a registered plugin op gets OpType(kCount + 1 + index), so that a
// Node, op_schema(), op_traits() and op_name() treat it as any other op. Entries are appended, never removed (a
// graph may hold their ids, a loaded library stays loaded); readers take no lock.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "ir/attr.h"
#include "ops/op.h"
#include "qdeploy/plugin.h"

namespace qd {

struct PluginOp {
  qdeploy::OpDef def;
  std::string qualified;  // "domain::name@version": how plans and messages name it
  std::string source;     // "built in", "program" or the library's path
  OpType id = OpType::kCount;
  OpSchema schema{};
};

constexpr int kMaxPluginOps = 256;

// "domain::name@version".
std::string plugin_qualified_name(const std::string& domain, const std::string& name, int version);
// The checks register_plugin_op applies to a declaration (without registering it).
Status check_op_def(const qdeploy::OpDef& def);
// Registers `def` (see qdeploy::PluginRegistrar::add for the rules); `source` names where it came from.
Expected<OpType> register_plugin_op(qdeploy::OpDef def, const std::string& source);

bool is_plugin_op(OpType op);
// The plugin op behind `op`, or nullptr for a built-in op (or an id nothing registered).
const PluginOp* plugin_op(OpType op);
// The op of `domain`::`name` with the highest version <= max_version (any version when max_version <= 0).
const PluginOp* find_plugin_op(const std::string& domain, const std::string& name, int max_version);
const PluginOp* find_plugin_op(const std::string& qualified);
// Whether any op of `domain` is registered (for the importer's messages).
bool plugin_domain_known(const std::string& domain);
std::vector<const PluginOp*> plugin_ops();
// The name a plan stores for `op`: the ONNX spelling for a built-in op, the qualified name for a plugin op.
std::string plan_op_name(OpType op);

// A node's attributes checked against the op's schema: undeclared names, wrong types, values out of range and
// missing required attributes are errors that name the attribute and say what is allowed; defaults are filled in.
Expected<qdeploy::Attrs> resolve_plugin_attrs(const qdeploy::OpDef& def, const AttrMap& attrs);
// The same attributes as the IR holds them (every declared attribute, typed).
AttrMap to_attr_map(const qdeploy::Attrs& attrs);

// Status conversions between the public and the internal error types (same codes).
Status from_plugin_status(const qdeploy::Status& s);
qdeploy::Status to_plugin_status(const Status& s);
DType from_plugin_dtype(qdeploy::DataType t);
qdeploy::DataType to_plugin_dtype(DType t);

}  // namespace qd
