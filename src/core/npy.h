// NumPy .npy files (format 1.0-3.0, little-endian, C order) in and out.
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace qd {

// Parses an in-memory .npy; `what` names the source in error messages.
Expected<Tensor> parse_npy(const std::string& bytes, const std::string& what);
Expected<Tensor> read_npy(const std::string& path);
std::string encode_npy(const Tensor& t);
Status write_npy(const std::string& path, const Tensor& t);

}  // namespace qd
