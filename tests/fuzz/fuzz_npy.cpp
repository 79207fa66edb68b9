// libFuzzer target: .npy bytes -> parse_npy; a parsed tensor must survive encode -> parse unchanged.
#include <cstdlib>
#include <cstring>

#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = qd::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!t) return 0;
  const std::string again = qd::encode_npy(*t);
  auto u = qd::parse_npy(again, "round trip");
  if (!u || u->dtype() != t->dtype() || u->shape() != t->shape() || u->nbytes() != t->nbytes() ||
      (t->nbytes() && std::memcmp(u->raw(), t->raw(), t->nbytes()) != 0)) {
    std::abort();
  }
  return 0;
}
