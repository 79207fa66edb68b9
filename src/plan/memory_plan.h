// Activation memory planning: places buffers with known lifetimes in one arena so that buffers alive at the same time
// never overlap. A pure function (no device, no graph), tested on its own.
#pragma once

#include <cstddef>
#include <vector>

namespace qd {

struct BufferLife {
  size_t bytes = 0;
  int first = 0, last = 0;  // the steps (layer indices) that write it first and read it last, inclusive
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per buffer, aligned
  size_t arena_bytes = 0;       // what the arena needs
  size_t total_bytes = 0;       // the sum of all buffers (what giving each its own allocation would need)
};

// Greedy by size (largest first), each buffer at the lowest aligned offset that does not overlap a placed buffer
// whose lifetime intersects its own: the strategy of TFLite's arena planner, near-optimal on CNN chains.
MemoryPlan plan_memory(const std::vector<BufferLife>& buffers, size_t alignment = 256);

}  // namespace qd
