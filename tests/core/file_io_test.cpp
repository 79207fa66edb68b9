#include <gtest/gtest.h>

#include <filesystem>

#include "core/file_io.h"
#include "test_util.h"

namespace qd {

TEST(FileIo, AtomicWriteAndRead) {
  const std::string dir = test::temp_dir("fileio");
  const std::string p = dir + "/a.bin";
  ASSERT_TRUE(write_file_atomic(p, std::string("hello")).is_ok());
  EXPECT_EQ(*read_file(p), "hello");
  ASSERT_TRUE(write_file_atomic(p, std::string("bye")).is_ok());
  EXPECT_EQ(*read_file(p), "bye");
  // No temporary files are left behind.
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file();
  EXPECT_EQ(n, 1);
}

TEST(FileIo, Errors) {
  EXPECT_EQ(read_file("/nonexistent/x").status().code(), StatusCode::kNotFound);
  const std::string dir = test::temp_dir("fileio2");
  EXPECT_FALSE(read_file(dir));  // a directory
  ASSERT_TRUE(write_file_atomic(dir + "/big", std::string(100, 'x')).is_ok());
  auto r = read_file(dir + "/big", 10);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("limit"), std::string::npos);
  EXPECT_FALSE(write_file_atomic("/nonexistent/dir/x", std::string("a")).is_ok());
}

TEST(StatusTest, NodeContextAndExitCodes) {
  Status s = invalid("kernel larger than input");
  s.at_node("conv1", "Conv");
  s.at_node("outer", "X");  // the innermost node wins
  EXPECT_EQ(s.to_string(), "node 'conv1' (Conv): kernel larger than input");
  EXPECT_EQ(exit_code(s), 2);
  EXPECT_EQ(exit_code(internal("bug")), 1);
  EXPECT_EQ(exit_code(Status::ok()), 0);
}

}  // namespace qd
