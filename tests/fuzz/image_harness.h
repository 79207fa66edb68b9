// The image fuzz harness, shared by fuzz_image and the unit test that replays tests/fuzz/regressions/image/* and the
// seed corpus: decode_image on untrusted bytes (JPEG or PNG by magic bytes); an image that decodes must be consistent
// and, when small, survive a lossless PNG round trip and a JPEG re-encode. Every decode error is fine; a crash, a
// sanitizer report, a leak, a hang or a kInternal status (returned, for the caller to check) is a bug.
#pragma once

#include <string>

#include "tasks/image_io.h"

namespace qd::fuzz {

// Images up to this many pixels are re-encoded (larger ones only decode: encoding them would slow the fuzzer).
constexpr size_t kImageMaxReencodePixels = size_t{1} << 16;

inline Status image_one_input(const std::string& bytes) {
  auto img = decode_image(bytes, "fuzz");
  if (!img) return img.status();
  if (img->channels != 3 || img->width <= 0 || img->height <= 0 || img->width > kMaxImageSide ||
      img->height > kMaxImageSide || img->data.size() != img->row_bytes() * static_cast<size_t>(img->height)) {
    return internal("decode_image returned an inconsistent image " + std::to_string(img->width) + "x" +
                    std::to_string(img->height) + "x" + std::to_string(img->channels) + " with " +
                    std::to_string(img->data.size()) + " bytes");
  }
  if (static_cast<size_t>(img->width) * static_cast<size_t>(img->height) > kImageMaxReencodePixels) {
    return Status::ok();
  }
  auto png = encode_png(*img);
  if (!png) return internal("cannot encode a decoded image as PNG: " + png.status().to_string());
  auto back = decode_image(*png, "PNG round trip");
  if (!back || back->width != img->width || back->height != img->height || back->data != img->data) {
    return internal("the PNG round trip changed the image");
  }
  auto jpg = encode_jpeg(*img, 90);
  if (!jpg) return internal("cannot encode a decoded image as JPEG: " + jpg.status().to_string());
  auto again = decode_image(*jpg, "JPEG re-encode");
  if (!again || again->width != img->width || again->height != img->height) {
    return internal("a re-encoded JPEG does not decode to the same size");
  }
  return Status::ok();
}

}  // namespace qd::fuzz
