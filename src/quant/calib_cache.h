// INT8 calibration caches in TensorRT's text format, so qdeploy's scales also work with TensorRT on a Jetson:
//   TRT-8600-EntropyCalibration2
//   images: 3c00f9f4
// Each line maps a tensor name to the IEEE-754 bit pattern (hex) of its float32 scale (amax / 127).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace qd {

struct CalibCache {
  std::string version = "8600";                    // the number in the header
  std::string algorithm = "EntropyCalibration2";   // e.g. MinMaxCalibration, EntropyCalibration2, LegacyCalibration
  std::vector<std::pair<std::string, float>> scales;  // in file order

  const float* find(const std::string& tensor) const;
  void set(const std::string& tensor, float scale);  // replaces or appends
};

// Parses cache text; `what` names the source in errors ("FILE:LINE: ..."). Rejects a bad header, malformed lines,
// duplicate names and scales that are NaN, infinite, zero or negative.
Expected<CalibCache> parse_calib_cache(const std::string& text, const std::string& what);
Expected<CalibCache> read_calib_cache(const std::string& path);
std::string format_calib_cache(const CalibCache& cache);
Status write_calib_cache(const std::string& path, const CalibCache& cache);
// Every name in the cache must be a tensor of the graph; the error lists the unknown ones.
Status check_cache_names(const CalibCache& cache, const Graph& g);
// "TRT-8600-EntropyCalibration2" -> version, algorithm (for the --cache-header flag).
Status parse_cache_header(const std::string& header, CalibCache* cache);

// Bit-exact float <-> hex helpers ("3c00f9f4" <-> 0.0078721...).
std::string float_to_hex(float v);
bool hex_to_float(const std::string& hex, float* out);

}  // namespace qd
