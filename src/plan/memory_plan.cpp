#include "plan/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace qd {

MemoryPlan plan_memory(const std::vector<BufferLife>& buffers, size_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  auto align = [&](size_t v) { return (v + alignment - 1) / alignment * alignment; };
  std::vector<size_t> placed;
  for (size_t i : order) {
    const BufferLife& b = buffers[i];
    plan.total_bytes += b.bytes;
    if (b.bytes == 0) continue;
    // Intervals taken by placed buffers alive at the same time, sorted by offset; take the first gap that fits.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t j : placed) {
      const BufferLife& o = buffers[j];
      if (o.last < b.first || b.last < o.first) continue;
      busy.emplace_back(plan.offsets[j], plan.offsets[j] + o.bytes);
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + b.bytes <= lo) break;
      offset = std::max(offset, align(hi));
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, align(offset + b.bytes));
    placed.push_back(i);
  }
  return plan;
}

}  // namespace qd
