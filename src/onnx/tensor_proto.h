// Checked conversion of ONNX TensorProto (inline, typed-field or external data) to a qdeploy Tensor.
#pragma once

#include <string>

#include "core/tensor.h"
#include "onnx.pb.h"

namespace qd {

// `model_dir` is the folder external data paths are relative to; "" forbids external data. `kind` names the tensor in
// messages ("initializer 'w': raw_data is 100 bytes but ...").
Expected<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& model_dir,
                                   const std::string& kind = "tensor");
// Why a tensor of this ONNX element type cannot be read, and what to do instead.
std::string unsupported_type_message(int32_t onnx_type);
// Resolves an external data location: relative, no "..", and (after following symlinks) inside model_dir.
Expected<std::string> resolve_external_path(const std::string& model_dir, const std::string& location);

}  // namespace qd
