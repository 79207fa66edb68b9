// Replays the plan fuzzer's regressions (tests/fuzz/regressions/plan/*) and seed corpus (tests/fuzz/corpus/plan/*)
// through its harness: each ends in an error or a clean run, never a crash, a sanitizer report or a kInternal status.
// A file named open-* reproduces a bug not fixed yet: it is listed as skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "fuzz/plan_harness.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST(PlanFuzz, RegressionsAndSeeds) {
  int n = 0, ran = 0;
  std::vector<std::string> open;
  for (const char* sub : {"tests/fuzz/regressions/plan", "tests/fuzz/corpus/plan"}) {
    const fs::path dir = fs::path(test::source_dir()) / sub;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file() || name[0] == '.' || name == "README.md") continue;
      if (name.rfind("open-", 0) == 0) {
        open.push_back(name);
        continue;
      }
      SCOPED_TRACE(e.path().string());
      bool did_run = false;
      const Status st = fuzz::plan_one_input(slurp(e.path()), &did_run);
      EXPECT_NE(st.code(), StatusCode::kInternal) << st.to_string();
      if (std::string(sub).find("regressions") != std::string::npos) {
        EXPECT_EQ(st.message().find("plan format v"), std::string::npos)
            << "refused for its version before reaching the code it guards; upgrade it (tests/fuzz/upgrade_plan.py)";
      }
      ++n;
      ran += did_run && st.is_ok();
    }
  }
  std::cout << n << " plan regression/seed files, " << ran << " ran end to end\n";
  if (!open.empty()) {
    std::string list;
    for (const auto& o : open) list += " " + o;
    GTEST_SKIP() << open.size() << " file(s) reproduce open bugs:" << list;
  }
  if (n == 0) GTEST_SKIP() << "no plan seeds or regressions";
}

}  // namespace
}  // namespace qd
