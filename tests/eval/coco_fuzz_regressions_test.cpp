// Replays the COCO JSON fuzzer's regressions and seed corpus (tests/fuzz/{regressions,corpus}/coco) through its
// harness (instances and results parsing, the results round trip, and evaluation of small pairs).
#include "fuzz/coco_harness.h"
#include "fuzz/replay.h"

namespace qd {
namespace {

TEST(CocoFuzz, RegressionsAndSeeds) { fuzz::replay_fuzz_inputs("coco", fuzz::coco_one_input); }

}  // namespace
}  // namespace qd
