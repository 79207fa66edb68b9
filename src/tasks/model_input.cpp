#include "tasks/model_input.h"

namespace qd {

Expected<LetterboxOptions> letterbox_options(const std::string& style, int size) {
  if (style == "cudla") return cudla_letterbox_options();
  LetterboxOptions o;
  if (style == "val") o.style = LetterboxStyle::kYoloV5Val;
  else if (style == "ultralytics") o.style = LetterboxStyle::kUltralytics;
  else return invalid("--letterbox must be val, ultralytics or cudla, got '" + style + "'");
  if (size <= 0 || size > kMaxImageSide) return invalid("network input size " + std::to_string(size) + " is out of range");
  o.width = o.height = size;
  return o;
}

}  // namespace qd
