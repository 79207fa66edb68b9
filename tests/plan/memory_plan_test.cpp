#include "plan/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace qd {
namespace {

bool overlaps_in_time(const BufferLife& a, const BufferLife& b) { return !(a.last < b.first || b.last < a.first); }

void expect_valid(const std::vector<BufferLife>& bufs, const MemoryPlan& p, size_t alignment) {
  ASSERT_EQ(p.offsets.size(), bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % alignment, 0u);
    EXPECT_LE(p.offsets[i] + bufs[i].bytes, p.arena_bytes);
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      if (!bufs[i].bytes || !bufs[j].bytes || !overlaps_in_time(bufs[i], bufs[j])) continue;
      const bool disjoint = p.offsets[i] + bufs[i].bytes <= p.offsets[j] || p.offsets[j] + bufs[j].bytes <= p.offsets[i];
      EXPECT_TRUE(disjoint) << "buffers " << i << " and " << j << " overlap";
    }
  }
}

TEST(MemoryPlan, ChainReusesMemory) {
  // a -> b -> c -> d: each buffer lives from its producer to its consumer, so two buffers suffice.
  std::vector<BufferLife> bufs = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  MemoryPlan p = plan_memory(bufs, 256);
  expect_valid(bufs, p, 256);
  EXPECT_EQ(p.total_bytes, 4000u);
  EXPECT_EQ(p.arena_bytes, 2 * 1024u);
}

TEST(MemoryPlan, SimultaneousBuffersAreDisjoint) {
  std::vector<BufferLife> bufs = {{100, 0, 5}, {200, 0, 5}, {300, 0, 5}};
  MemoryPlan p = plan_memory(bufs, 64);
  expect_valid(bufs, p, 64);
  EXPECT_GE(p.arena_bytes, 600u);
}

TEST(MemoryPlan, RandomLifetimesNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferLife> bufs;
    for (int i = 0; i < 40; ++i) {
      int a = static_cast<int>(rng() % 30), b = a + static_cast<int>(rng() % 8);
      bufs.push_back({static_cast<size_t>(rng() % 5000), a, b});
    }
    MemoryPlan p = plan_memory(bufs, 128);
    expect_valid(bufs, p, 128);
    EXPECT_LE(p.arena_bytes, p.total_bytes + 128 * bufs.size());
  }
}

}  // namespace
}  // namespace qd
