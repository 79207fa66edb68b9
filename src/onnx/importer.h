// ONNX -> ir::Graph. Every size, index and path in the file is checked; a malformed model is an error that says
// what is wrong and where, never a crash.
#pragma once

#include <string>

#include "ir/graph.h"

namespace qd {

constexpr int kMinOpset = 7;
// The newest default-domain opset onnx 1.23 defines; ops whose semantics changed since are handled per opset.
constexpr int kMaxOpset = 28;

// Loads a model file; external data files are resolved relative to the model's folder and must stay inside it.
Expected<Graph> import_onnx_file(const std::string& path);
// Loads a model from memory. `model_dir` is where external data lives ("" forbids external data); `what` names the
// source in messages.
Expected<Graph> import_onnx_bytes(const std::string& bytes, const std::string& model_dir, const std::string& what);

}  // namespace qd
