// 8-bit RGB images: decoding JPEG/PNG from untrusted bytes, encoding, and reading/writing files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace qd {

// An 8-bit RGB image: rows top to bottom, pixels interleaved R,G,B. `channels` is always 3.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 3;
  std::vector<uint8_t> data;

  Image() = default;
  Image(int w, int h, uint8_t fill = 0)
      : width(w), height(h), data(static_cast<size_t>(w) * static_cast<size_t>(h) * 3, fill) {}
  bool empty() const { return width == 0 || height == 0; }
  size_t row_bytes() const { return static_cast<size_t>(width) * 3; }
  uint8_t* pixel(int x, int y) { return data.data() + (static_cast<size_t>(y) * width + x) * 3; }
  const uint8_t* pixel(int x, int y) const { return data.data() + (static_cast<size_t>(y) * width + x) * 3; }
};

// Largest width or height decode_image accepts (checked from the header, before any allocation).
constexpr int kMaxImageSide = 16384;
// Largest image file read_image reads.
constexpr uint64_t kMaxImageFileBytes = uint64_t{512} << 20;

enum class ImageFormat { kUnknown, kJpeg, kPng };
// Looks at the magic bytes only.
ImageFormat sniff_image_format(const std::string& bytes);

// Decodes a JPEG or PNG (chosen by magic bytes) to RGB. Grayscale, palette, 16-bit, CMYK and alpha images are
// converted (alpha is dropped, as cv2.imread(IMREAD_COLOR) does). `what` names the source in error messages.
// Truncated or corrupt data, and images larger than kMaxImageSide, are errors.
Expected<Image> decode_image(const std::string& bytes, const std::string& what);

// Baseline JPEG, 4:2:0 chroma subsampling, integer DCT: the same image always gives the same bytes.
Expected<std::string> encode_jpeg(const Image& img, int quality = 95);
// 8-bit RGB PNG, zlib level 6, no time or text chunks.
Expected<std::string> encode_png(const Image& img);

Expected<Image> read_image(const std::string& path);
// Reads and decodes several images on all cores (in order; the first error by index wins).
Expected<std::vector<Image>> read_images(const std::vector<std::string>& paths);
// Format by extension (.jpg/.jpeg or .png, any case); written atomically.
Status write_image(const std::string& path, const Image& img, int jpeg_quality = 95);

}  // namespace qd
