// Image decoding/encoding: round trips, conversions, and bad files that must give errors, not crashes.
#include <gtest/gtest.h>
#include <png.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>

#include "core/file_io.h"
#include "tasks/image_io.h"
#include "test_util.h"

namespace qd {
namespace {

Image noise_image(int w, int h, uint32_t seed) {
  Image img(w, h);
  uint32_t s = seed;
  for (auto& v : img.data) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<uint8_t>(s >> 24);
  }
  return img;
}

Image smooth_image(int w, int h) {
  Image img(w, h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = img.pixel(x, y);
      p[0] = static_cast<uint8_t>(x * 255 / (w - 1));
      p[1] = static_cast<uint8_t>(y * 255 / (h - 1));
      p[2] = static_cast<uint8_t>(128 + (x - y) / 4);
    }
  }
  return img;
}

std::string png_bytes(const Image& img) { return *encode_png(img); }
std::string jpeg_bytes(const Image& img) { return *encode_jpeg(img, 90); }

void put_be32(std::string& s, size_t at, uint32_t v) {
  s[at] = static_cast<char>(v >> 24);
  s[at + 1] = static_cast<char>(v >> 16);
  s[at + 2] = static_cast<char>(v >> 8);
  s[at + 3] = static_cast<char>(v);
}

// Sets the IHDR width/height of a PNG and fixes the chunk CRC, so only our size check can object.
std::string png_with_size(std::string png, uint32_t w, uint32_t h) {
  put_be32(png, 16, w);
  put_be32(png, 20, h);
  const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17));
  put_be32(png, 29, crc);
  return png;
}

// Sets the frame size in a baseline JPEG's SOF0 marker.
std::string jpeg_with_size(std::string jpg, uint16_t w, uint16_t h) {
  for (size_t i = 2; i + 9 < jpg.size(); ++i) {
    if (static_cast<uint8_t>(jpg[i]) == 0xFF && static_cast<uint8_t>(jpg[i + 1]) == 0xC0) {
      jpg[i + 5] = static_cast<char>(h >> 8);
      jpg[i + 6] = static_cast<char>(h & 0xFF);
      jpg[i + 7] = static_cast<char>(w >> 8);
      jpg[i + 8] = static_cast<char>(w & 0xFF);
      return jpg;
    }
  }
  ADD_FAILURE() << "no SOF0 marker";
  return jpg;
}

TEST(ImageIo, PngRoundTripIsExact) {
  const Image img = noise_image(37, 23, 1);
  const auto back = decode_image(png_bytes(img), "mem");
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->width, 37);
  EXPECT_EQ(back->height, 23);
  EXPECT_EQ(back->channels, 3);
  EXPECT_EQ(back->data, img.data);
}

TEST(ImageIo, JpegRoundTripIsClose) {
  const Image img = smooth_image(64, 48);
  const auto back = decode_image(*encode_jpeg(img, 95), "mem");
  ASSERT_TRUE(back) << back.status().to_string();
  ASSERT_EQ(back->data.size(), img.data.size());
  double sum = 0;
  int worst = 0;
  for (size_t i = 0; i < img.data.size(); ++i) {
    const int d = std::abs(int(img.data[i]) - int(back->data[i]));
    sum += d;
    worst = std::max(worst, d);
  }
  EXPECT_LT(sum / img.data.size(), 2.0);
  EXPECT_LT(worst, 24);
}

TEST(ImageIo, EncodingIsDeterministic) {
  const Image img = noise_image(50, 40, 7);
  EXPECT_EQ(*encode_jpeg(img, 90), *encode_jpeg(img, 90));
  EXPECT_EQ(*encode_png(img), *encode_png(img));
  EXPECT_NE(*encode_jpeg(img, 90), *encode_jpeg(img, 50));
}

TEST(ImageIo, GrayPngBecomesRgb) {
  // Write an 8-bit grayscale PNG with libpng directly.
  struct Sink {
    static void write(png_structp p, png_bytep d, png_size_t n) {
      static_cast<std::string*>(png_get_io_ptr(p))->append(reinterpret_cast<char*>(d), n);
    }
    static void flush(png_structp) {}
  };
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, Sink::write, Sink::flush);
  png_set_IHDR(png, info, 3, 2, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  uint8_t rows[2][3] = {{0, 100, 200}, {50, 150, 255}};
  png_bytep ptrs[2] = {rows[0], rows[1]};
  png_write_image(png, ptrs);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  const auto img = decode_image(out, "gray.png");
  ASSERT_TRUE(img) << img.status().to_string();
  ASSERT_EQ(img->width, 3);
  ASSERT_EQ(img->height, 2);
  EXPECT_EQ(img->pixel(1, 0)[0], 100);
  EXPECT_EQ(img->pixel(1, 0)[1], 100);
  EXPECT_EQ(img->pixel(1, 0)[2], 100);
  EXPECT_EQ(img->pixel(2, 1)[2], 255);
}

TEST(ImageIo, ReadWriteFilesByExtension) {
  const std::string dir = test::temp_dir("image_io");
  const Image img = noise_image(16, 8, 3);
  ASSERT_TRUE(write_image(dir + "/a.png", img).is_ok());
  ASSERT_TRUE(write_image(dir + "/b.JPG", img).is_ok());
  const auto a = read_image(dir + "/a.png");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->data, img.data);
  const auto b = read_image(dir + "/b.JPG");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->width, 16);
  EXPECT_EQ(sniff_image_format(*read_file(dir + "/b.JPG")), ImageFormat::kJpeg);
  const Status bad_ext = write_image(dir + "/c.bmp", img);
  EXPECT_FALSE(bad_ext.is_ok());
  EXPECT_NE(bad_ext.message().find(".png"), std::string::npos);
  const auto missing = read_image(dir + "/nope.png");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(ImageIo, EncodeRejectsMalformedImages) {
  Image img(4, 4);
  img.data.resize(5);
  EXPECT_FALSE(encode_png(img));
  EXPECT_FALSE(encode_jpeg(img));
  EXPECT_FALSE(encode_jpeg(Image(4, 4), 0));
  EXPECT_FALSE(encode_png(Image()));
}

// Each bad input must come back as an error that names the source.
void expect_error(const std::string& bytes, const std::string& what_fragment) {
  const auto r = decode_image(bytes, "bad.img");
  ASSERT_FALSE(r) << "decoded a bad file (" << what_fragment << ")";
  EXPECT_NE(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("bad.img"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(what_fragment), std::string::npos) << r.status().message();
}

TEST(ImageIo, BadFilesGiveErrors) {
  const Image img = noise_image(40, 30, 5);
  const std::string png = png_bytes(img), jpg = jpeg_bytes(img);
  expect_error("", "empty");
  expect_error("GIF89a........", "not a JPEG or PNG");
  expect_error(png.substr(0, png.size() / 2), "truncated");
  expect_error(png.substr(0, 8), "truncated");       // signature only
  expect_error(png.substr(0, 20), "truncated");      // cut inside IHDR
  expect_error(jpg.substr(0, jpg.size() / 2), "truncated");
  expect_error(jpg.substr(0, 3), "corrupt JPEG");    // magic only
  expect_error(jpg.substr(0, 40), "corrupt JPEG");   // cut inside the headers
  std::string png_crc = png;
  png_crc[png_crc.size() / 2] ^= 0x55;  // inside IDAT: CRC or zlib error
  expect_error(png_crc, "corrupt PNG");
  std::string jpg_garbage = jpg;
  for (size_t i = 4; i < 200 && i < jpg_garbage.size(); ++i) jpg_garbage[i] = static_cast<char>(0xFF ^ i);
  expect_error(jpg_garbage, "corrupt JPEG");
}

TEST(ImageIo, OversizedHeadersAreRefusedBeforeAllocating) {
  const Image img = noise_image(8, 8, 9);
  expect_error(png_with_size(png_bytes(img), 20000, 8), "larger than the limit");
  expect_error(png_with_size(png_bytes(img), 8, 100000), "larger than the limit");
  expect_error(png_with_size(png_bytes(img), 0, 8), "corrupt PNG");  // libpng rejects a zero width itself
  expect_error(jpeg_with_size(jpeg_bytes(img), 20000, 20000), "larger than the limit");
  expect_error(jpeg_with_size(jpeg_bytes(img), 16385, 8), "larger than the limit");
}

}  // namespace
}  // namespace qd
