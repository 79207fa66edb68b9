// Helpers shared by the end-to-end tests: run the built qdeploy binary (QD_CLI_PATH) as a subprocess and read back
// its exit code, stdout and stderr. Header-only, so that CMakeLists.txt's *_test.cpp glob needs no extra source.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/file_io.h"
#include "test_util.h"

namespace qd::test {

struct CliResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string out, err;
};

// `s` in single quotes, safe to paste into a shell command line.
inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The whole file's bytes ("" if it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs the CLI with `args` (already shell-safe) through the shell; stdout and stderr go through dir/out.txt and
// dir/err.txt.
inline CliResult run_cli(const std::string& dir, const std::string& args) {
  const std::string cmd =
      quote(QD_CLI_PATH) + " " + args + " >" + quote(dir + "/out.txt") + " 2>" + quote(dir + "/err.txt");
  const int rc = std::system(cmd.c_str());
  CliResult r;
  if (rc != -1 && WIFEXITED(rc)) r.exit_code = WEXITSTATUS(rc);
  r.out = slurp(dir + "/out.txt");
  r.err = slurp(dir + "/err.txt");
  return r;
}

// An IDX file of unsigned bytes (big-endian header), as load_fmnist reads it (uncompressed): a Fashion-MNIST split
// of a few images for a test.
inline void write_idx(const std::string& path, const std::vector<int>& dims, const uint8_t* data, size_t n) {
  std::string b = {0, 0, 8, static_cast<char>(dims.size())};
  for (int d : dims) {
    for (int s = 24; s >= 0; s -= 8) b += static_cast<char>((d >> s) & 0xff);
  }
  b.append(reinterpret_cast<const char*>(data), n);
  ASSERT_TRUE(write_file_atomic(path, b).is_ok()) << path;
}

// Exit code 2 and an "error:" line containing `phrase`.
inline void expect_usage_error(const CliResult& r, const std::string& phrase) {
  EXPECT_EQ(r.exit_code, 2) << "stderr: " << r.err;
  EXPECT_NE(r.err.find("error:"), std::string::npos) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << "stderr lacks '" << phrase << "': " << r.err;
}

// A fixture with a fresh temporary folder dir_ per test (named `tag_prefix` + the test's name), removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  explicit CliTest(std::string tag_prefix) : tag_prefix_(std::move(tag_prefix)) {}
  void SetUp() override {
    dir_ = temp_dir(tag_prefix_ + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  CliResult cli(const std::string& args) { return run_cli(dir_, args); }

  std::string dir_;

 private:
  std::string tag_prefix_;
};

}  // namespace qd::test
