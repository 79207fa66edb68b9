// Replays a fuzz target's regressions (tests/fuzz/regressions/SUB/*) and seed corpus (tests/fuzz/corpus/SUB/*) through
// its harness in a unit test: every input must end in a clean result or an error that is not kInternal (and, under
// ASan/UBSan in CI, without a sanitizer report). A file named open-* reproduces a bug not fixed yet: it is listed as
// skipped instead of crashing the test binary (tests/fuzz/regressions/README.md).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/status.h"
#include "test_util.h"

namespace qd::fuzz {

// Call it as the last statement of a test (it may mark the test skipped).
// `one_input` gets the file's bytes and whether it is a regression (else a seed).
inline void replay_fuzz_inputs(const std::string& sub,
                               const std::function<Status(const std::string&, bool regression)>& one_input) {
  namespace fs = std::filesystem;
  int regressions = 0, seeds = 0;
  std::vector<std::string> open;
  for (const std::string kind : {"regressions", "corpus"}) {
    const fs::path dir = fs::path(test::source_dir()) / "tests/fuzz" / kind / sub;
    if (!fs::exists(dir)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file() || name[0] == '.' || name == "README.md") continue;
      if (name.rfind("open-", 0) == 0) {
        open.push_back(name);
        continue;
      }
      files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& p : files) {
      SCOPED_TRACE(p.string());
      std::ifstream f(p, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const Status st = one_input(bytes, kind == "regressions");
      EXPECT_NE(st.code(), StatusCode::kInternal) << st.to_string();
      ++(kind == "regressions" ? regressions : seeds);
    }
  }
  EXPECT_GT(regressions + seeds, 0) << "no fuzz regressions or seeds for '" << sub << "' under tests/fuzz";
  if (!open.empty()) {
    std::string list;
    for (const auto& o : open) list += " " + o;
    GTEST_SKIP() << regressions << " regression and " << seeds << " seed file(s) pass; " << open.size()
                 << " reproduce open bugs:" << list;
  }
  std::cout << "[ replayed ] " << regressions << " regression and " << seeds << " seed file(s) of " << sub << "\n";
}

inline void replay_fuzz_inputs(const std::string& sub, const std::function<Status(const std::string&)>& one_input) {
  replay_fuzz_inputs(sub, [&](const std::string& bytes, bool) { return one_input(bytes); });
}

}  // namespace qd::fuzz
