#include "runtime/model.h"

namespace qd {

Expected<std::map<std::string, Shape>> parse_shape_flags(const std::vector<std::string>& flags) {
  std::map<std::string, Shape> out;
  for (const auto& f : flags) {
    const size_t colon = f.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return invalid("bad --shapes value '" + f + "'; write NAME:1x3x640x640");
    }
    auto s = parse_shape(f.substr(colon + 1));
    if (!s) return Status(s.status()).prefix("--shapes " + f);
    out[f.substr(0, colon)] = *s;
  }
  return out;
}

}  // namespace qd
