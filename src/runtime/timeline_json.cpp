#include "runtime/timeline_json.h"

#include <algorithm>

namespace qd {

nlohmann::json timeline_json(const std::vector<qdeploy::KernelSpan>& run) {
  nlohmann::json kernels = nlohmann::json::array();
  if (run.empty()) return {{"wall_ms", 0.0}, {"busy_ms", 0.0}, {"kernel_ms", 0.0}, {"kernels", kernels}};
  const uint64_t t0 = run.front().start_ns;
  uint64_t last = t0, busy = 0, sum = 0;
  for (const qdeploy::KernelSpan& k : run) {  // in start order: the union grows by what passes the latest end so far
    if (k.end_ns > last) {
      busy += k.end_ns - std::max(k.start_ns, last);
      last = k.end_ns;
    }
    sum += k.end_ns - k.start_ns;
    kernels.push_back({{"name", k.name},
                       {"start_us", (k.start_ns - t0) / 1e3},
                       {"duration_us", (k.end_ns - k.start_ns) / 1e3},
                       {"stream", k.stream}});
  }
  return {{"wall_ms", (last - t0) / 1e6}, {"busy_ms", busy / 1e6}, {"kernel_ms", sum / 1e6}, {"kernels", kernels}};
}

}  // namespace qd
