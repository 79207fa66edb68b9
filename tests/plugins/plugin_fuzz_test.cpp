// The plugin-attribute fuzz harness without a fuzzer: the seed corpus (tests/fuzz/corpus/plugin_attrs) and a few
// thousand seeded random mutations of it, so that every build checks that no attribute set or shape crashes the
// schema check, a plugin's shape inference or its reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/file_io.h"
#include "fuzz/plugin_attrs_harness.h"
#include "qdeploy/plugin.h"
#include "test_util.h"

namespace qd {
namespace {

std::vector<std::string> seeds() {
  std::vector<std::string> v;
  const auto dir = std::filesystem::path(test::source_dir()) / "tests/fuzz/corpus/plugin_attrs";
  for (const auto& e : std::filesystem::directory_iterator(dir)) v.push_back(*read_file(e.path().string(), 1 << 20));
  return v;
}

TEST(PluginFuzz, SeedCorpusRunsWithoutInternalErrors) {
  qdeploy::register_builtin_plugins();
  int ran = 0;
  for (const auto& s : seeds()) {
    bool did = false;
    const Status st = fuzz::plugin_attrs_one_input(s, &did);
    EXPECT_NE(st.code(), StatusCode::kInternal) << st.to_string();
    ran += did;
  }
  EXPECT_GE(ran, 2);  // the corpus reaches the reference, not only the checks
}

TEST(PluginFuzz, RandomMutationsNeverCrash) {
  qdeploy::register_builtin_plugins();
  std::mt19937 rng(55);
  const auto corpus = seeds();
  for (int i = 0; i < 3000; ++i) {
    std::string s = corpus[rng() % corpus.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      switch (rng() % 3) {
        case 0: s[rng() % s.size()] = static_cast<char>(rng()); break;
        case 1: s.insert(s.begin() + static_cast<long>(rng() % s.size()), static_cast<char>(rng())); break;
        default: s.erase(s.begin() + static_cast<long>(rng() % s.size())); break;
      }
    }
    const Status st = fuzz::plugin_attrs_one_input(s);
    ASSERT_NE(st.code(), StatusCode::kInternal) << st.to_string();
  }
}

}  // namespace
}  // namespace qd
