// The calibration-cache fuzz harness, shared by fuzz_calib_cache and the unit test that replays
// tests/fuzz/regressions/calib_cache/* and the seed corpus: parse_calib_cache on untrusted text (TensorRT's cache
// format); what parses must survive format -> parse unchanged (header, names in order, scale bit patterns). Every
// parse error is fine; a crash, a sanitizer report, a leak, a hang or a kInternal status is a bug.
#pragma once

#include <cmath>
#include <cstring>
#include <string>

#include "quant/calib_cache.h"

namespace qd::fuzz {

inline Status calib_cache_one_input(const std::string& text) {
  auto c = parse_calib_cache(text, "fuzz");
  if (!c) return c.status();
  for (const auto& [name, s] : c->scales) {
    if (name.empty() || !(s > 0) || !std::isfinite(s)) return internal("parse_calib_cache accepted '" + name + "'");
    float back;
    if (!hex_to_float(float_to_hex(s), &back) || std::memcmp(&back, &s, 4) != 0) {
      return internal("float_to_hex/hex_to_float changed the scale of '" + name + "'");
    }
  }
  auto d = parse_calib_cache(format_calib_cache(*c), "round trip");
  if (!d) return internal("a parsed cache does not parse again once formatted: " + d.status().to_string());
  if (d->version != c->version || d->algorithm != c->algorithm || d->scales.size() != c->scales.size()) {
    return internal("format -> parse changed the cache's header or size");
  }
  for (size_t i = 0; i < c->scales.size(); ++i) {
    if (d->scales[i].first != c->scales[i].first ||
        std::memcmp(&d->scales[i].second, &c->scales[i].second, 4) != 0) {
      return internal("format -> parse changed the entry of '" + c->scales[i].first + "'");
    }
  }
  return Status::ok();
}

}  // namespace qd::fuzz
