// Checked file reading and atomic file writing.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace qd {

// Reads a whole file; refuses files larger than max_bytes (a clear error, not an allocation failure).
Expected<std::string> read_file(const std::string& path, uint64_t max_bytes = uint64_t{4} << 30);
// Writes to PATH.tmp-XXXX in the same folder, then renames over PATH: readers never see half a file.
Status write_file_atomic(const std::string& path, const void* data, size_t size);
inline Status write_file_atomic(const std::string& path, const std::string& bytes) {
  return write_file_atomic(path, bytes.data(), bytes.size());
}
// Creates a directory and its parents; ok when it exists.
Status make_dirs(const std::string& path);

}  // namespace qd
