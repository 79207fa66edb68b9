#include "tasks/model_input.h"

#include <algorithm>
#include <cmath>

namespace qd {

Expected<LetterboxOptions> letterbox_options(const std::string& style, int size) {
  if (style == "cudla") return cudla_letterbox_options();
  LetterboxOptions o;
  if (style == "val") o.style = LetterboxStyle::kYoloV5Val;
  else if (style == "ultralytics") o.style = LetterboxStyle::kUltralytics;
  else return invalid("--letterbox must be val, ultralytics or cudla, got '" + style + "'");
  if (size <= 0 || size > kMaxImageSide) {
    return invalid("network input size " + std::to_string(size) + " is out of range");
  }
  o.width = o.height = size;
  return o;
}

Expected<Image> classifier_input(const Image& img, int w, int h) {
  if (img.empty()) return invalid("classifier input: empty image");
  if (w < 1 || h < 1 || w > kMaxImageSide || h > kMaxImageSide) {
    return invalid("classifier input: bad network size " + std::to_string(w) + "x" + std::to_string(h));
  }
  if (img.width == w && img.height == h) return img;
  const int iw = w - w / 8, ih = h - h / 8;
  const double r = std::min(static_cast<double>(iw) / img.width, static_cast<double>(ih) / img.height);
  const int rw = std::max(1, std::min(iw, static_cast<int>(std::lround(img.width * r))));
  const int rh = std::max(1, std::min(ih, static_cast<int>(std::lround(img.height * r))));
  Image scaled;
  if (rw == img.width && rh == img.height) scaled = img;
  else if (rw <= img.width && rh <= img.height) scaled = QD_TRY(resize_area(img, rw, rh));
  else scaled = QD_TRY(resize_linear(img, rw, rh));
  Image out(w, h, 0);
  const int ox = (w - rw) / 2, oy = (h - rh) / 2;
  for (int y = 0; y < rh; ++y) {
    std::copy(scaled.pixel(0, y), scaled.pixel(0, y) + scaled.row_bytes(), out.pixel(ox, oy + y));
  }
  return out;
}

}  // namespace qd
