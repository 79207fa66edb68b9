#include "quant/calib_cache.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/file_io.h"

namespace qd {

const float* CalibCache::find(const std::string& tensor) const {
  for (const auto& [name, s] : scales) {
    if (name == tensor) return &s;
  }
  return nullptr;
}

void CalibCache::set(const std::string& tensor, float scale) {
  for (auto& [name, s] : scales) {
    if (name == tensor) {
      s = scale;
      return;
    }
  }
  scales.emplace_back(tensor, scale);
}

std::string float_to_hex(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%x", bits);
  return buf;
}

bool hex_to_float(const std::string& hex, float* out) {
  if (hex.empty() || hex.size() > 8) return false;
  uint32_t bits = 0;
  for (char ch : hex) {
    int d;
    if (ch >= '0' && ch <= '9') d = ch - '0';
    else if (ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
    else return false;
    bits = bits << 4 | static_cast<uint32_t>(d);
  }
  std::memcpy(out, &bits, 4);
  return true;
}

Status parse_cache_header(const std::string& header, CalibCache* cache) {
  // TRT-<digits>-<algorithm>
  if (header.compare(0, 4, "TRT-") != 0) {
    return invalid("the header '" + header + "' does not start with TRT-<version>-<algorithm>");
  }
  const size_t dash = header.find('-', 4);
  if (dash == std::string::npos || dash == 4 || dash + 1 >= header.size()) {
    return invalid("the header '" + header + "' is not TRT-<version>-<algorithm>");
  }
  const std::string version = header.substr(4, dash - 4);
  const std::string algo = header.substr(dash + 1);
  if (version.find_first_not_of("0123456789") != std::string::npos) {
    return invalid("the header's version '" + version + "' is not a number");
  }
  for (char ch : algo) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') {
      return invalid("the header's algorithm '" + algo + "' has unexpected characters");
    }
  }
  cache->version = version;
  cache->algorithm = algo;
  return Status::ok();
}

Expected<CalibCache> parse_calib_cache(const std::string& text, const std::string& what) {
  CalibCache cache;
  std::set<std::string> seen;
  size_t pos = 0;
  int line_no = 0;
  bool header = false;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = what + ":" + std::to_string(line_no) + ": ";
    if (line.empty()) continue;
    if (!header) {
      Status s = parse_cache_header(line, &cache);
      if (!s.is_ok()) return s.prefix(what + ":" + std::to_string(line_no));
      header = true;
      continue;
    }
    // Tensor names may contain ':' (e.g. "onnx::Conv_12"): split at the last ": ".
    const size_t sep = line.rfind(": ");
    if (sep == std::string::npos || sep == 0) {
      return invalid(where + "expected 'tensor_name: hexscale', got '" + line + "'");
    }
    const std::string name = line.substr(0, sep);
    const std::string hex = line.substr(sep + 2);
    float scale;
    if (!hex_to_float(hex, &scale)) {
      return invalid(where + "'" + hex + "' is not the hex bit pattern of a float32 scale");
    }
    if (!std::isfinite(scale) || scale <= 0.f) {
      return invalid(where + "tensor '" + name + "' has scale " + std::to_string(scale) +
                     "; scales must be finite and positive");
    }
    if (!seen.insert(name).second) return invalid(where + "tensor '" + name + "' appears twice");
    cache.scales.emplace_back(name, scale);
  }
  if (!header) return invalid(what + ": empty calibration cache (no TRT-<version>-<algorithm> header)");
  return cache;
}

Expected<CalibCache> read_calib_cache(const std::string& path) {
  auto text = read_file(path, uint64_t{64} << 20);
  if (!text) return text.status();
  return parse_calib_cache(*text, path);
}

std::string format_calib_cache(const CalibCache& cache) {
  std::string out = "TRT-" + cache.version + "-" + cache.algorithm + "\n";
  for (const auto& [name, s] : cache.scales) out += name + ": " + float_to_hex(s) + "\n";
  return out;
}

Status write_calib_cache(const std::string& path, const CalibCache& cache) {
  return write_file_atomic(path, format_calib_cache(cache));
}

Status check_cache_names(const CalibCache& cache, const Graph& g) {
  std::vector<std::string> unknown;
  for (const auto& [name, s] : cache.scales) {
    if (g.find_value(name) < 0) unknown.push_back(name);
  }
  if (unknown.empty()) return Status::ok();
  std::string list;
  for (size_t i = 0; i < unknown.size() && i < 10; ++i) list += (i ? ", '" : "'") + unknown[i] + "'";
  if (unknown.size() > 10) list += ", ...";
  return invalid(std::to_string(unknown.size()) + " tensor name(s) in the calibration cache are not in the model: " +
                 list + " (was the cache made for another model or export?)");
}

}  // namespace qd
