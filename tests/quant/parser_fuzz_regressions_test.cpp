// Replays the calibration-cache and precision-config fuzzers' regressions and seed corpora
// (tests/fuzz/{regressions,corpus}/{calib_cache,precision_config}) through their harnesses.
#include "fuzz/calib_cache_harness.h"
#include "fuzz/precision_config_harness.h"
#include "fuzz/replay.h"

namespace qd {
namespace {

TEST(CalibCacheFuzz, RegressionsAndSeeds) { fuzz::replay_fuzz_inputs("calib_cache", fuzz::calib_cache_one_input); }

TEST(PrecisionConfigFuzz, RegressionsAndSeeds) {
  fuzz::replay_fuzz_inputs("precision_config", fuzz::precision_config_one_input);
}

}  // namespace
}  // namespace qd
