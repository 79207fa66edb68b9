#include "plan/stream_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace qd {
namespace {

bool shares(const std::vector<int>& a, const std::vector<int>& b) {
  return std::any_of(a.begin(), a.end(), [&](int x) { return std::find(b.begin(), b.end(), x) != b.end(); });
}
bool conflict(const LayerAccess& a, const LayerAccess& b) {
  return shares(a.writes, b.writes) || shares(a.writes, b.reads) || shares(a.reads, b.writes);
}

// The schedule keeps the meaning of the sequence: a permutation that keeps every conflicting pair in its order, and
// where such a pair runs on different streams, a wait of the later one's stream after the earlier one orders them.
void expect_valid(const std::vector<LayerAccess>& layers, const StreamSchedule& s) {
  const size_t n = layers.size();
  ASSERT_EQ(s.order.size(), n);
  ASSERT_EQ(s.side.size(), n);
  ASSERT_EQ(s.wait.size(), n);
  std::vector<int> pos(n, -1);
  for (size_t p = 0; p < n; ++p) {
    ASSERT_GE(s.order[p], 0);
    ASSERT_LT(s.order[p], static_cast<int>(n));
    ASSERT_EQ(pos[s.order[p]], -1) << "layer " << s.order[p] << " twice";
    pos[s.order[p]] = static_cast<int>(p);
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      if (!conflict(layers[i], layers[j])) continue;
      const int pi = pos[i], pj = pos[j];
      ASSERT_LT(pi, pj) << "conflicting layers " << i << " and " << j << " swapped";
      if (s.side[pi] == s.side[pj]) continue;
      bool ordered = false;
      for (int y = pi + 1; y <= pj && !ordered; ++y) ordered = s.side[y] == s.side[pj] && s.wait[y];
      EXPECT_TRUE(ordered) << "layers " << i << " and " << j << " conflict on different streams with no wait between";
    }
  }
  // The side stream joins the capture through a wait: its first layer waits.
  for (size_t p = 0; p < n; ++p) {
    if (s.side[p]) {
      EXPECT_TRUE(s.wait[p]);
      break;
    }
  }
}

TEST(StreamSchedule, ChainStaysOnTheMainStream) {
  // 0 -> 1 -> 2 -> output 9
  const std::vector<LayerAccess> layers = {{{}, {0}}, {{0}, {1}}, {{1}, {9}}};
  const StreamSchedule s = schedule_side_branches(layers);
  expect_valid(layers, s);
  EXPECT_EQ(s.order, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(s.any_side());
  EXPECT_EQ(s.wait, (std::vector<bool>{false, false, false}));
}

TEST(StreamSchedule, DetectorHeadBranchRunsBesideTheNeck) {
  // A backbone (0), a neck going down (1: P3 features, 2, 3: P5 features) and two heads with their decodes writing
  // slices of one output (id 100), as the ONNX export orders them: the heads and decodes last.
  const std::vector<LayerAccess> layers = {
      {{}, {10}},      // 0 backbone
      {{10}, {11}},    // 1 neck -> P3
      {{11}, {12}},    // 2 neck
      {{12}, {13}},    // 3 neck -> P5
      {{11}, {20}},    // 4 P3 head conv
      {{20}, {100}},   // 5 P3 decode
      {{13}, {21}},    // 6 P5 head conv
      {{21}, {100}},   // 7 P5 decode (last: the main chain)
  };
  const StreamSchedule s = schedule_side_branches(layers);
  expect_valid(layers, s);
  EXPECT_EQ(s.order, (std::vector<int>{0, 1, 4, 5, 2, 3, 6, 7}));
  EXPECT_EQ(s.side, (std::vector<bool>{false, false, true, true, false, false, false, false}));
  // The P3 branch forks once P3 exists; the neck reading P3 alongside it needs no wait; the last decode writes the
  // output the P3 decode wrote, so it waits for the side stream.
  EXPECT_EQ(s.wait, (std::vector<bool>{false, false, true, false, false, false, false, true}));
}

TEST(StreamSchedule, MainLayerOverwritingWhatASideLayerReadsWaits) {
  // 2 reads buffer 5; the main layer 3 reuses buffer 5 for its own result afterwards.
  const std::vector<LayerAccess> layers = {{{}, {5}}, {{5}, {6}}, {{5}, {50}}, {{6}, {5}}, {{5}, {51}}};
  const StreamSchedule s = schedule_side_branches(layers);
  expect_valid(layers, s);
  EXPECT_EQ(s.order, (std::vector<int>{0, 2, 1, 3, 4}));
  EXPECT_EQ(s.side, (std::vector<bool>{false, true, false, false, false}));
  EXPECT_EQ(s.wait, (std::vector<bool>{false, true, false, true, false}));
}

TEST(StreamSchedule, SideLayersReadingOnlyTheInputStartFirst) {
  // Two independent branches from the network input (id 0, written by nobody): the first goes to the side stream
  // and starts before any main layer.
  const std::vector<LayerAccess> layers = {{{0}, {1}}, {{1}, {90}}, {{0}, {2}}, {{2}, {91}}};
  const StreamSchedule s = schedule_side_branches(layers);
  expect_valid(layers, s);
  EXPECT_EQ(s.order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(s.side, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(s.wait, (std::vector<bool>{true, false, false, false}));
}

TEST(StreamSchedule, RandomSequencesKeepTheirMeaning) {
  std::mt19937 rng(7);
  int with_side = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 24), ids = 2 + static_cast<int>(rng() % 12);
    std::vector<LayerAccess> layers(n);
    for (auto& l : layers) {
      for (int k = static_cast<int>(rng() % 4); k > 0; --k) l.reads.push_back(static_cast<int>(rng() % ids));
      for (int k = 1 + static_cast<int>(rng() % 2); k > 0; --k) l.writes.push_back(static_cast<int>(rng() % ids));
    }
    const StreamSchedule s = schedule_side_branches(layers);
    expect_valid(layers, s);
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
    with_side += s.any_side();
  }
  EXPECT_GT(with_side, 300);  // the property was checked on schedules that use the side stream
}

TEST(StreamSchedule, Empty) {
  const StreamSchedule s = schedule_side_branches({});
  EXPECT_TRUE(s.order.empty());
  EXPECT_FALSE(s.any_side());
}

}  // namespace
}  // namespace qd
