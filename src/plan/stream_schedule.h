// Two-stream scheduling of a layer sequence: layers whose results no later layer of the main chain needs (a
// detector's head branches: P3's head conv and decode while the neck goes on to P4 and P5) run on a side stream,
// started as soon as what they read is ready, so that small layers that leave most SMs idle overlap. A pure function
// (no device, no graph), tested on its own; the CUDA engine executes its result (CudaContext::enqueue).
#pragma once

#include <vector>

namespace qd {

// What a layer reads and writes: ids of the memory it touches (arena buffers, I/O bindings, scratch), numbered by
// the caller. Two layers conflict when one writes what the other reads or writes.
struct LayerAccess {
  std::vector<int> reads, writes;
};

struct StreamSchedule {
  std::vector<int> order;  // the layers in their new sequence (indices into the input); a valid sequential order
  // Per position in `order`:
  std::vector<bool> side;  // runs on the side stream
  // Before it starts, this stream waits for all work enqueued so far on the other stream: a side run's first layer
  // waits for the main stream (its inputs, and memory that earlier layers used); a main layer waits for the side
  // stream when it touches what a side layer not yet waited for touches.
  std::vector<bool> wait;
  bool any_side() const;
};

// The main stream runs the last layer and every layer whose results it needs, directly or not; the others (which
// lead only to other outputs) run on the side stream, each moved up to just after the last main layer it conflicts
// with, in their order among themselves. The caller joins the side stream into the main one after the last layer,
// and must keep every buffer a side layer touches alive until the end of the sequence in its memory plan (from its
// first use in the new order): a main layer waits for the side stream only where they touch the same ids, never on
// account of memory that the plan reuses.
StreamSchedule schedule_side_branches(const std::vector<LayerAccess>& layers);

}  // namespace qd
