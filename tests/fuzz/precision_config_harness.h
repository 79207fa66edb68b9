// The precision-config fuzz harness, shared by fuzz_precision_config and the unit test that replays
// tests/fuzz/regressions/precision_config/* and the seed corpus: parse_precision_config on untrusted JSON; what
// parses must survive format -> parse unchanged. Every parse error is fine; a crash (an escaping exception
// included), a sanitizer report, a leak, a hang or a kInternal status is a bug.
#pragma once

#include <cmath>
#include <string>

#include "quant/precision_config.h"

namespace qd::fuzz {

inline Status precision_config_one_input(const std::string& text) {
  auto c = parse_precision_config(text, "fuzz");
  if (!c) return c.status();
  for (const auto& [name, s] : c->int8_tensor_scales) {
    if (!std::isfinite(s) || !(s > 0)) return internal("parse_precision_config accepted scale of '" + name + "'");
  }
  for (const auto& [name, v] : c->weight_scales) {
    if (v.empty()) return internal("parse_precision_config accepted no weight scales for '" + name + "'");
    for (float s : v) {
      if (!std::isfinite(s) || !(s > 0)) return internal("parse_precision_config accepted scale of '" + name + "'");
    }
  }
  auto d = parse_precision_config(format_precision_config(*c), "round trip");
  if (!d) return internal("a parsed config does not parse again once formatted: " + d.status().to_string());
  if (d->int8_tensor_scales != c->int8_tensor_scales || d->fp16_nodes != c->fp16_nodes ||
      d->fp32_nodes != c->fp32_nodes || d->weight_scales != c->weight_scales) {
    return internal("format -> parse changed the precision config");
  }
  return Status::ok();
}

}  // namespace qd::fuzz
