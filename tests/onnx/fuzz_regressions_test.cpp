// Replays every input the ONNX fuzzer once crashed on (tests/fuzz/regressions/onnx/*) through the fuzz harness:
// each must end in an error or a clean run, never a crash, a sanitizer report or a kInternal status.
// A file named open-* reproduces a bug not fixed yet (in a file the importer's owner does not own; see
// tests/fuzz/regressions/README.md): it is listed as skipped instead of crashing the test binary. Drop the prefix
// when it is fixed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/onnx_harness.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;

TEST(FuzzRegressions, Onnx) {
  const fs::path dir = fs::path(test::source_dir()) / "tests/fuzz/regressions/onnx";
  int n = 0;
  std::vector<std::string> open;
  if (fs::exists(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().filename().string()[0] == '.') continue;
      if (e.path().filename().string().rfind("open-", 0) == 0) {
        open.push_back(e.path().filename().string());
        continue;
      }
      SCOPED_TRACE(e.path().string());
      std::ifstream f(e.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const Status st = fuzz::onnx_one_input(bytes);
      EXPECT_NE(st.code(), StatusCode::kInternal) << st.to_string();
      ++n;
    }
  }
  if (!open.empty()) {
    std::string list;
    for (const auto& o : open) list += " " + o;
    GTEST_SKIP() << n << " regression file(s) pass; " << open.size() << " reproduce open bugs:" << list;
  }
  if (n == 0) GTEST_SKIP() << "no regression files in " << dir;
}

// The seed corpus (small valid models and ONNX node tests) through the same harness: a cheap smoke test of the
// importer -> prepare -> run path on every build, without a fuzzer.
TEST(FuzzRegressions, SeedCorpus) {
  const fs::path dir = fs::path(test::source_dir()) / "tests/fuzz/corpus/onnx";
  if (!fs::exists(dir)) GTEST_SKIP() << "no seed corpus in " << dir;
  int n = 0, ran = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    SCOPED_TRACE(e.path().string());
    std::ifstream f(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    bool did_run = false;
    const Status st = fuzz::onnx_one_input(bytes, &did_run);
    EXPECT_NE(st.code(), StatusCode::kInternal) << st.to_string();
    ++n;
    ran += did_run && st.is_ok();
  }
  std::cout << n << " seed models, " << ran << " ran end to end\n";
  EXPECT_GT(ran, 0);
}

}  // namespace
}  // namespace qd
