// Replays the image fuzzer's regressions and seed corpus (tests/fuzz/{regressions,corpus}/image) through its harness.
#include <fstream>
#include <iterator>

#include "fuzz/image_harness.h"
#include "fuzz/replay.h"

namespace qd {
namespace {

TEST(ImageFuzz, RegressionsAndSeeds) { fuzz::replay_fuzz_inputs("image", fuzz::image_one_input); }

// Files of a few hundred bytes whose headers declare 16384x16384 (the fuzzer's seeds with their size patched): each
// is refused for its missing data, before the decoder fills gigabytes with gray (one took 2.2 GB and 5 s).
TEST(ImageFuzz, TinyFilesDeclaringHugeImages) {
  const std::pair<const char*, const char*> cases[] = {
      {"progressive_444_declares_16384x16384.jpg", "premature end of data segment"},
      {"progressive_420_declares_16384x16384.jpg", "premature end of data segment"},
      {"baseline_declares_16384x16384.jpg", "premature end of data segment"},
      {"png_declares_16384x16384.png", "cannot hold the 16384 x 16384 pixels"},
  };
  for (const auto& [file, phrase] : cases) {
    const std::string path = test::source_dir() + "/tests/fuzz/regressions/image/" + file;
    std::ifstream f(path, std::ios::binary);
    ASSERT_TRUE(f) << path;
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_LT(bytes.size(), 1000u) << path;
    const auto img = decode_image(bytes, file);
    ASSERT_FALSE(img) << file;
    EXPECT_EQ(img.status().code(), StatusCode::kInvalidArgument) << img.status().to_string();
    EXPECT_NE(img.status().message().find(phrase), std::string::npos) << img.status().to_string();
  }
}

}  // namespace
}  // namespace qd
