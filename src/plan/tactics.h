// Kernel selection ("tactics"), the part of building that does not depend on the target: which of a layer's kernels
// runs is decided at build time by timing and remembered under the layer's signature in the timing cache (and in the
// plan), so that an engine made again from the same choices, or loaded from a plan, never times. A target with
// kernels (backends/cuda/) presents its tunable layers as TacticLayer and times them through TacticTimer; the
// policy here decides what is timed, what reuses a choice and what happens without one.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace qd {

// Signature -> tactic name: the timing cache's content and a plan's recorded choices.
using TacticChoices = std::map<std::string, std::string>;

struct Tactic {
  std::string name;
  bool optional = false;    // may fail to set up or run on this GPU (a vendor library's algorithm): then skipped
  bool refinable = false;   // takes part in the in-network check of near ties (TacticTimer::refine)
};

// A layer whose kernel is chosen among tactics, as the target presents it.
class TacticLayer {
 public:
  virtual ~TacticLayer() = default;
  // "<kind>:n<batch>:<the rest>": the key the choice is timed and cached under; the batch alone in the second field
  // (nearest_batch_choice). Layers with the same signature take the same tactic.
  virtual std::string signature() const = 0;
  // An older key the choice may be recorded under (plans written before the key grew), or "".
  virtual std::string legacy_signature() const { return {}; }
  virtual int batch() const = 0;
  // The tactics this build may use for the layer, in the order they are timed; the first is the default.
  virtual std::vector<Tactic> tactics() const = 0;
  // Sets the layer up to run `name`; false when it is none of tactics() or cannot run here.
  virtual bool apply(const std::string& name) = 0;
};

// The target's side of timing.
class TacticTimer {
 public:
  virtual ~TacticTimer() = default;
  // The layer's time running `t` (a median, any unit, smaller is faster), the layer left set up to run it; an error
  // when it cannot run (an optional tactic's error skips it; another's fails the build).
  virtual Expected<float> time(TacticLayer& layer, const Tactic& t) = 0;
  // Checks near ties where they run, in the whole network: `close` maps a signature to its pick followed by the
  // tactics that timed close to it alone; the timer applies and records in `choices` what it keeps. Optional.
  virtual Status refine(const std::map<std::string, std::vector<std::string>>& close, TacticChoices* choices) {
    (void)close, (void)choices;
    return Status::ok();
  }
};

struct TacticPolicy {
  // A loaded plan: nothing is timed; a layer without a recorded choice takes the nearest timed batch's, else its
  // first tactic.
  bool frozen = false;
  // Time every signature without a choice. When false (shapes met at run time inside a plan's profile), an untimed
  // batch size takes the nearest timed batch's choice instead.
  bool tune = true;
  // The plan has a shape profile (max shapes): the nearest-batch rule applies; without one every shape is timed.
  bool profile = false;
};

// How near ties are picked for refine at a batch size: up to `candidates` tactics (the pick included) that timed
// within `within` times the pick's time alone.
struct NearTies {
  size_t candidates;
  float within;
};
NearTies near_ties(int batch);

// The choice recorded for the nearest batch size of the same layer (same kind and rest of the signature; the larger
// batch on a tie), or nullptr.
const std::string* nearest_batch_choice(const TacticChoices& choices, const std::string& sig);

struct TacticStats {
  int reused = 0, nearest = 0, defaulted = 0, timed = 0;
};
// Sets every layer to its tactic: the recorded choice of its signature; else, by the policy, timed (recording the
// pick in `choices`), the nearest batch's choice, or its first tactic. `timer` may be null when the policy is frozen.
Expected<TacticStats> select_tactics(const std::vector<TacticLayer*>& layers, TacticChoices* choices,
                                     const TacticPolicy& policy, TacticTimer* timer);

// Timing cache files: {"device": "...", "kernel_policy": "...", "kernels": {signature: tactic}}. Reading one written
// on another GPU model or under another kernel policy (its to_string(); absent for the defaults) leaves `out` as it
// is and warns; a missing file is a new cache.
void read_timing_cache(const std::string& path, const std::string& device, const std::string& policy,
                       TacticChoices* out);
Status write_timing_cache(const std::string& path, const std::string& device, const std::string& policy,
                          const TacticChoices& choices);

}  // namespace qd
