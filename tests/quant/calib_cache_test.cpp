#include <gtest/gtest.h>

#include <cmath>

#include "quant/calib_cache.h"
#include "test_util.h"

namespace qd {

// Lines published in NVIDIA's cuDLA-samples data/model/qat2ptq.cache (YOLOv5s QAT -> PTQ).
constexpr const char* kCuDlaCache =
    "TRT-8600-EntropyCalibration2\n"
    "images: 3c00f9f4\n"
    "/model.0/act/Mul_output_0: 3e6c9314\n"
    "/model.9/m/MaxPool_output_0: 3d5d4052\n";

TEST(CalibCache, ReadsTensorRtLines) {
  auto c = parse_calib_cache(kCuDlaCache, "qat2ptq.cache");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->version, "8600");
  EXPECT_EQ(c->algorithm, "EntropyCalibration2");
  ASSERT_EQ(c->scales.size(), 3u);
  EXPECT_NEAR(*c->find("images"), 0.0078721, 1e-7);  // amax 1.0 / 127
  EXPECT_NEAR(*c->find("images") * 127, 1.0, 1e-3);
  EXPECT_NEAR(*c->find("/model.0/act/Mul_output_0"), 0.2310, 1e-4);
  // Writing it back gives the same bytes.
  EXPECT_EQ(format_calib_cache(*c), kCuDlaCache);
}

TEST(CalibCache, HexIsBitExact) {
  float f;
  ASSERT_TRUE(hex_to_float("3c00f9f4", &f));
  EXPECT_EQ(float_to_hex(f), "3c00f9f4");
  EXPECT_EQ(float_to_hex(1.0f / 127), "3c010204");
  for (float v : {1e-6f, 0.5f, 3.0f / 127, 100.f}) {
    ASSERT_TRUE(hex_to_float(float_to_hex(v), &f));
    EXPECT_EQ(f, v);
  }
}

TEST(CalibCache, AnyHeaderVersionAndNamesWithColons) {
  auto c = parse_calib_cache("TRT-7000-MinMaxCalibration\nonnx::Conv_12: 3c00f9f4\r\n\n", "x");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->version, "7000");
  EXPECT_EQ(c->algorithm, "MinMaxCalibration");
  EXPECT_EQ(c->scales[0].first, "onnx::Conv_12");
}

TEST(CalibCache, RejectsBadFiles) {
  struct Case {
    const char* text;
    const char* phrase;
  };
  const Case cases[] = {
      {"", "empty"},
      {"images: 3c00f9f4\n", "header"},
      {"TRT-abc-Entropy\n", "version"},
      {"TRT-8600-EntropyCalibration2\nimages 3c00f9f4\n", "expected 'tensor_name: hexscale'"},
      {"TRT-8600-EntropyCalibration2\nimages: xyz\n", "hex"},
      {"TRT-8600-EntropyCalibration2\nimages: 123456789\n", "hex"},
      {"TRT-8600-EntropyCalibration2\nimages: 7fc00000\n", "finite and positive"},   // NaN
      {"TRT-8600-EntropyCalibration2\nimages: 7f800000\n", "finite and positive"},   // +Inf
      {"TRT-8600-EntropyCalibration2\nimages: 0\n", "finite and positive"},          // 0
      {"TRT-8600-EntropyCalibration2\nimages: bc00f9f4\n", "finite and positive"},   // negative
      {"TRT-8600-EntropyCalibration2\nimages: 3c00f9f4\nimages: 3c00f9f4\n", "twice"},
  };
  for (const auto& c : cases) {
    auto r = parse_calib_cache(c.text, "bad.cache");
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.phrase), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("bad.cache"), std::string::npos) << r.status().message();
  }
}

TEST(CalibCache, UnknownTensorNames) {
  Graph g;
  g.add_value("images");
  auto c = parse_calib_cache(kCuDlaCache, "x");
  ASSERT_TRUE(c);
  Status s = check_cache_names(*c, g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("2 tensor name(s)"), std::string::npos) << s.message();
}

TEST(CalibCache, FileRoundTrip) {
  const std::string dir = test::temp_dir("cache");
  CalibCache c;
  c.set("a", 0.5f);
  c.set("b", 0.25f);
  c.set("a", 0.125f);
  ASSERT_TRUE(write_calib_cache(dir + "/c.cache", c).is_ok());
  auto r = read_calib_cache(dir + "/c.cache");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r->find("a"), 0.125f);
  EXPECT_EQ(r->scales.size(), 2u);
}

}  // namespace qd
