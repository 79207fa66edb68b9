// Replays the image fuzzer's regressions and seed corpus (tests/fuzz/{regressions,corpus}/image) through its harness.
#include <fstream>
#include <iterator>
#include <tuple>

#include "fuzz/image_harness.h"
#include "fuzz/replay.h"

namespace qd {
namespace {

TEST(ImageFuzz, RegressionsAndSeeds) { fuzz::replay_fuzz_inputs("image", fuzz::image_one_input); }

// Files of a few hundred bytes whose headers declare 16384x16384 (the fuzzer's seeds with their size patched): each
// is refused for its missing data, before the decoder fills gigabytes with gray (one took 2.2 GB and 5 s). An
// arithmetic-coded JPEG of 111 bytes declaring 8327x8236 (found by the fuzzer: 2.6 s under ASan, as arithmetic
// coding stuffs zeros without a warning where its data ends) is refused for its coding.
TEST(ImageFuzz, TinyFilesDeclaringHugeImages) {
  const std::tuple<const char*, const char*, StatusCode> cases[] = {
      {"progressive_444_declares_16384x16384.jpg", "premature end of data segment", StatusCode::kInvalidArgument},
      {"progressive_420_declares_16384x16384.jpg", "premature end of data segment", StatusCode::kInvalidArgument},
      {"baseline_declares_16384x16384.jpg", "premature end of data segment", StatusCode::kInvalidArgument},
      {"png_declares_16384x16384.png", "cannot hold the 16384 x 16384 pixels", StatusCode::kInvalidArgument},
      {"arithmetic_declares_8327x8236.jpg", "arithmetic-coded JPEG", StatusCode::kUnsupported},
  };
  for (const auto& [file, phrase, code] : cases) {
    const std::string path = test::source_dir() + "/tests/fuzz/regressions/image/" + file;
    std::ifstream f(path, std::ios::binary);
    ASSERT_TRUE(f) << path;
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_LT(bytes.size(), 1000u) << path;
    const auto img = decode_image(bytes, file);
    ASSERT_FALSE(img) << file;
    EXPECT_EQ(img.status().code(), code) << img.status().to_string();
    EXPECT_NE(img.status().message().find(phrase), std::string::npos) << img.status().to_string();
  }
}

}  // namespace
}  // namespace qd
