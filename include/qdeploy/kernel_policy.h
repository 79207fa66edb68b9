// KernelPolicy: which GPU kernel families and scheduling features a build may use. The defaults are what qdeploy
// picks for speed; switching one off is for A/B measurements and for isolating a kernel problem. A plan records the
// policy it was built with (a loaded plan runs with it), and the timing cache keeps kernel choices per policy.
#pragma once

#include <string>

#include "qdeploy/status.h"

namespace qdeploy {

// How the GPU runs a batch: as timed by the build (kTimed), or forced whole, or as two halves on two streams, free
// (kLanes) or held within two layers of each other (kLanesInStep).
enum class BatchSplit { kTimed, kWhole, kLanes, kLanesInStep };

struct KernelPolicy {
  // Convolution kernel families the build may time and pick (false: left out of the candidates).
  bool wgmma = true;          // Hopper's wgmma tiles (sm_90a); false also leaves out the TMA tiles and cluster split-K
  bool tma = true;            // the warp-specialized TMA tiles
  bool warp_halo_s2 = true;   // the warp-level kernel of stride-2 3x3 convolutions
  bool warp_pw = true;        // the warp-level pointwise (1x1) kernel
  bool cluster_split = true;  // split-K inside a thread-block cluster
  bool image_stem = true;     // a stem convolution reads the input image itself (false: a space-to-depth pass first)
  // Only the tile configurations whose name contains this text (e.g. "tma_i8_128x128"); empty: all. For profiling
  // one kernel; a layer no such configuration fits fails to build.
  std::string only_config;
  // Epilogue variants (false: the general code path, with the same results).
  bool staged_epilogue = true;  // stores staged through shared memory where the layout allows (false: from registers)
  bool quad_epilogue = true;    // INT8 layers with an int8 output: the quad-transposed register epilogue
  bool small_acc = true;        // INT8: accumulators known to be small converted with an integer add instead of I2F
  bool lean_epilogue = true;    // kernel copies compiled with the one epilogue a layer needs
  // Scheduling.
  bool pdl = true;           // programmatic dependent launch (sm_90): a kernel starts while the one before finishes
  bool side_stream = true;   // branches beside the main chain (detection heads) on a second stream
  bool graph_refine = true;  // near ties between kernels re-timed in the whole network as a CUDA graph
  BatchSplit batch_split = BatchSplit::kTimed;

  bool operator==(const KernelPolicy& o) const { return to_string() == o.to_string(); }
  bool operator!=(const KernelPolicy& o) const { return !(*this == o); }
  bool is_default() const { return to_string().empty(); }
  // The settings that differ from the defaults, comma-separated in a fixed order: "" for the defaults, else e.g.
  // "no-pdl,no-side-stream,split=lanes2,only-config=tma_i8". The words are the members' names with '_' as '-'
  // ("no-warp-halo-s2"), batch_split as split=whole|lanes2|lanes2_step and only_config as only-config=TEXT.
  std::string to_string() const;
  // The inverse of to_string (any order; "" gives the defaults); errors name the word that is not known.
  static Expected<KernelPolicy> parse(const std::string& text);
};

}  // namespace qdeploy
