// Replays the image fuzzer's regressions and seed corpus (tests/fuzz/{regressions,corpus}/image) through its harness.
#include "fuzz/image_harness.h"
#include "fuzz/replay.h"

namespace qd {
namespace {

TEST(ImageFuzz, RegressionsAndSeeds) { fuzz::replay_fuzz_inputs("image", fuzz::image_one_input); }

}  // namespace
}  // namespace qd
