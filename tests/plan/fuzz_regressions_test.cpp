// Replays the plan fuzzer's regressions (tests/fuzz/regressions/plan/*) and seed corpus (tests/fuzz/corpus/plan/*)
// through its harness (fuzz/replay.h); a regression must reach the code it guards, not stop at the version check.
#include <gtest/gtest.h>

#include <iostream>

#include "fuzz/plan_harness.h"
#include "fuzz/replay.h"

namespace qd {
namespace {

TEST(PlanFuzz, RegressionsAndSeeds) {
  int ran = 0;
  fuzz::replay_fuzz_inputs("plan", [&](const std::string& bytes, bool regression) {
    bool did_run = false;
    const Status st = fuzz::plan_one_input(bytes, &did_run);
    if (regression) {
      EXPECT_EQ(st.message().find("plan format v"), std::string::npos)
          << "refused for its version before reaching the code it guards; upgrade it (tests/fuzz/upgrade_plan.py)";
    }
    ran += did_run && st.is_ok();
    return st;
  });
  std::cout << ran << " plan files ran end to end\n";
}

}  // namespace
}  // namespace qd
