#include "plan/stream_schedule.h"

#include <algorithm>
#include <set>

namespace qd {
namespace {

bool touches(const std::vector<int>& ids, const std::set<int>& s) {
  return std::any_of(ids.begin(), ids.end(), [&](int id) { return s.count(id) > 0; });
}

bool conflict(const LayerAccess& a, const LayerAccess& b) {
  const std::set<int> bw(b.writes.begin(), b.writes.end());
  const std::set<int> br(b.reads.begin(), b.reads.end());
  return touches(a.writes, bw) || touches(a.writes, br) || touches(a.reads, bw);
}

}  // namespace

bool StreamSchedule::any_side() const { return std::find(side.begin(), side.end(), true) != side.end(); }

StreamSchedule schedule_side_branches(const std::vector<LayerAccess>& layers) {
  const int n = static_cast<int>(layers.size());
  // The main chain: the last layer and every layer whose results it needs, directly or not (a layer that writes
  // what a main layer after it reads). The others lead only to other outputs: they go to the side stream.
  std::vector<bool> side(n, true);
  std::set<int> needed;  // what the main layers after the current one read
  for (int l = n - 1; l >= 0; --l) {
    const LayerAccess& a = layers[l];
    if (l < n - 1 && !touches(a.writes, needed)) continue;
    side[l] = false;
    needed.insert(a.reads.begin(), a.reads.end());
  }
  // Each side layer goes right after the last main layer before it that it conflicts with (-1: before every layer),
  // but not before the side layer preceding it (the side stream runs them in order).
  std::vector<int> anchor(n, -1);
  int prev = -1;
  for (int l = 0; l < n; ++l) {
    if (!side[l]) continue;
    int a = prev;
    for (int k = l - 1; k > prev; --k) {
      if (!side[k] && conflict(layers[k], layers[l])) {
        a = k;
        break;
      }
    }
    anchor[l] = prev = a;
  }

  std::vector<std::vector<int>> side_after(n + 1);  // [a + 1]: the side layers anchored at layer a
  for (int l = 0; l < n; ++l) {
    if (side[l]) side_after[anchor[l] + 1].push_back(l);
  }
  StreamSchedule s;
  s.order = side_after[0];
  for (int l = 0; l < n; ++l) {
    if (side[l]) continue;
    s.order.push_back(l);
    s.order.insert(s.order.end(), side_after[l + 1].begin(), side_after[l + 1].end());
  }

  std::set<int> side_reads, side_writes;  // what side layers touched since the main stream last waited for them
  bool forked = false;
  for (size_t pos = 0; pos < s.order.size(); ++pos) {
    const LayerAccess& a = layers[s.order[pos]];
    const bool on_side = side[s.order[pos]];
    bool wait = false;
    if (on_side) {
      wait = !forked || !s.side[pos - 1];  // a side run starts: everything before it on the main stream is done
      forked = true;
      side_reads.insert(a.reads.begin(), a.reads.end());
      side_writes.insert(a.writes.begin(), a.writes.end());
    } else if (touches(a.writes, side_reads) || touches(a.writes, side_writes) || touches(a.reads, side_writes)) {
      wait = true;
      side_reads.clear();
      side_writes.clear();
    }
    s.side.push_back(on_side);
    s.wait.push_back(wait);
  }
  return s;
}

}  // namespace qd
