// NumPy .npz archives (np.savez, np.savez_compressed): a zip of .npy files, one per array, named by the array's key.
// Reading parses the zip's central directory with bounds checks (zip64 fields as numpy writes them, entries stored or
// deflated, CRC-32 checked), then each member with parse_npy. Writing stores the arrays uncompressed, as np.savez.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace qd {

struct NpzArray {
  std::string name;  // the key (the member's name without ".npy")
  Tensor tensor;
};

// Parses an in-memory .npz; `what` names the source in error messages. The arrays come in the archive's order.
// Refuses encrypted or multi-disk archives, compression methods other than stored (0) and deflate (8), members not
// named *.npy, duplicate keys, and more than `max_bytes` of array data in all.
Expected<std::vector<NpzArray>> parse_npz(const std::string& bytes, const std::string& what,
                                          size_t max_bytes = size_t{8} << 30);
Expected<std::vector<NpzArray>> read_npz(const std::string& path);
// Stored (uncompressed) members; refuses keys that are empty or repeated, and archives past zip's 4 GiB limits.
Expected<std::string> encode_npz(const std::vector<NpzArray>& arrays);
Status write_npz(const std::string& path, const std::vector<NpzArray>& arrays);

}  // namespace qd
