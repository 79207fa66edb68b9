// libFuzzer target: .npz bytes -> parse_npz; what parses must survive encode -> parse unchanged (names, dtypes,
// shapes and bytes, in order).
#include <cstdlib>
#include <cstring>

#include "core/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 64 MiB of array data at most: the parser's own limits (deflate ratio, file size) bound it further.
  auto a = qd::parse_npz(std::string(reinterpret_cast<const char*>(data), size), "fuzz", size_t{64} << 20);
  if (!a) return 0;
  auto again = qd::encode_npz(*a);
  if (!again) return 0;  // an empty key cannot be written back
  auto b = qd::parse_npz(*again, "round trip");
  if (!b || b->size() != a->size()) std::abort();
  for (size_t i = 0; i < a->size(); ++i) {
    const qd::Tensor& t = (*a)[i].tensor;
    const qd::Tensor& u = (*b)[i].tensor;
    if ((*a)[i].name != (*b)[i].name || u.dtype() != t.dtype() || u.shape() != t.shape() || u.nbytes() != t.nbytes() ||
        (t.nbytes() && std::memcmp(u.raw(), t.raw(), t.nbytes()) != 0)) {
      std::abort();
    }
  }
  return 0;
}
