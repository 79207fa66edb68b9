#include "tasks/model_input.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

namespace qd {

namespace {

Expected<int> parse_int(const std::string& key, const std::string& v, int lo, int hi) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) {
    return invalid("--preprocess " + key + "=" + v + ": expected a whole number");
  }
  const int n = std::stoi(v);
  if (n < lo || n > hi) {
    return invalid("--preprocess " + key + "=" + v + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return n;
}

Expected<std::array<float, 3>> parse_triple(const std::string& key, const std::vector<std::string>& parts) {
  if (parts.size() != 1 && parts.size() != 3) {
    return invalid("--preprocess " + key + " takes one number or three (R,G,B in tensor channel order), got " +
                   std::to_string(parts.size()));
  }
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    const std::string& t = parts[parts.size() == 1 ? 0 : i];
    char* end = nullptr;
    const float v = std::strtof(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v)) {
      return invalid("--preprocess " + key + ": '" + t + "' is not a number");
    }
    out[i] = v;
  }
  return out;
}

const char* mode_name(ResizeMode m) {
  switch (m) {
    case ResizeMode::kFit: return "fit";
    case ResizeMode::kStretch: return "stretch";
    case ResizeMode::kCenterCrop: return "center-crop";
    case ResizeMode::kLetterbox: return "letterbox";
    case ResizeMode::kNone: return "none";
    case ResizeMode::kDefault: break;
  }
  return "default";
}

// OpenCV's choice for a plain resize: INTER_AREA when shrinking both ways, INTER_LINEAR otherwise.
Expected<Image> resize_to(const Image& img, int w, int h) {
  if (img.width == w && img.height == h) return img;
  if (w <= img.width && h <= img.height) return resize_area(img, w, h);
  return resize_linear(img, w, h);
}

}  // namespace

Expected<PreprocessSpec> parse_preprocess_spec(const std::string& text) {
  PreprocessSpec s;
  s.given = true;
  // KEY=VALUE items; an item without '=' continues the previous value (mean=0.485,0.456,0.406).
  std::vector<std::pair<std::string, std::vector<std::string>>> items;
  bool preset = false;  // the first item was `imagenet`
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string tok = text.substr(pos, comma - pos);
    while (!tok.empty() && tok.front() == ' ') tok.erase(tok.begin());
    while (!tok.empty() && tok.back() == ' ') tok.pop_back();
    pos = comma + 1;
    if (tok.empty()) {
      if (comma == text.size()) break;
      return invalid("--preprocess '" + text + "': empty item");
    }
    const size_t eq = tok.find('=');
    if (tok == "imagenet" && items.empty() && !preset) {
      preset = true;
      s.resize = ResizeMode::kCenterCrop;
      s.crop = 0.875f;
      s.tensor.mean = {0.485f, 0.456f, 0.406f};
      s.tensor.stddev = {0.229f, 0.224f, 0.225f};
      continue;
    }
    if (eq == std::string::npos) {
      if (items.empty()) return invalid("--preprocess '" + text + "': '" + tok + "' is not KEY=VALUE");
      items.back().second.push_back(tok);
    } else {
      items.push_back({tok.substr(0, eq), {tok.substr(eq + 1)}});
    }
  }
  if (items.empty() && !preset) return invalid("--preprocess is empty; write e.g. size=224,resize=center-crop");
  std::vector<std::string> seen;
  for (const auto& [key, vals] : items) {
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return invalid("--preprocess gives " + key + " twice");
    seen.push_back(key);
    const std::string& v = vals[0];
    auto one = [&, &key = key, &vals = vals]() -> Status {
      if (vals.size() != 1) return invalid("--preprocess " + key + " takes one value");
      return Status::ok();
    };
    if (key == "size") {
      QD_RETURN_IF_ERROR(one());
      const size_t x = v.find('x');
      if (x == std::string::npos) {
        s.width = s.height = QD_TRY(parse_int(key, v, 1, kMaxImageSide));
      } else {
        s.height = QD_TRY(parse_int(key, v.substr(0, x), 1, kMaxImageSide));
        s.width = QD_TRY(parse_int(key, v.substr(x + 1), 1, kMaxImageSide));
      }
    } else if (key == "resize") {
      QD_RETURN_IF_ERROR(one());
      if (v == "fit") s.resize = ResizeMode::kFit;
      else if (v == "stretch") s.resize = ResizeMode::kStretch;
      else if (v == "center-crop") s.resize = ResizeMode::kCenterCrop;
      else if (v == "letterbox") s.resize = ResizeMode::kLetterbox;
      else if (v == "none") s.resize = ResizeMode::kNone;
      else return invalid("--preprocess resize must be fit, stretch, center-crop, letterbox or none, got '" + v + "'");
    } else if (key == "mean") {
      s.tensor.mean = QD_TRY(parse_triple(key, vals));
    } else if (key == "std") {
      s.tensor.stddev = QD_TRY(parse_triple(key, vals));
      for (float x : s.tensor.stddev) {
        if (!(x > 0)) return invalid("--preprocess std must be > 0");
      }
    } else if (key == "order") {
      QD_RETURN_IF_ERROR(one());
      if (v == "rgb") s.tensor.order = ChannelOrder::kRGB;
      else if (v == "bgr") s.tensor.order = ChannelOrder::kBGR;
      else return invalid("--preprocess order must be rgb or bgr, got '" + v + "'");
    } else if (key == "layout") {
      QD_RETURN_IF_ERROR(one());
      if (v == "nchw") s.tensor.layout = TensorLayout::kNCHW;
      else if (v == "nhwc") s.tensor.layout = TensorLayout::kNHWC;
      else return invalid("--preprocess layout must be nchw or nhwc, got '" + v + "'");
    } else if (key == "pad") {
      QD_RETURN_IF_ERROR(one());
      s.pad = QD_TRY(parse_int(key, v, 0, 255));
    } else if (key == "crop") {
      QD_RETURN_IF_ERROR(one());
      char* end = nullptr;
      const float f = std::strtof(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(f > 0.f && f <= 1.f)) {
        return invalid("--preprocess crop=" + v + ": expected a fraction in (0, 1], e.g. 0.875");
      }
      s.crop = f;
    } else {
      return invalid("--preprocess: unknown key '" + key + "' (size, resize, crop, mean, std, order, layout, pad)");
    }
  }
  if (s.crop != 1.f && s.resize != ResizeMode::kCenterCrop) {
    return invalid("--preprocess crop goes with resize=center-crop");
  }
  return s;
}

std::string preprocess_spec_str(const PreprocessSpec& s) {
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",") + item; };
  auto num = [](float v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  if (s.width > 0) add("size=" + std::to_string(s.height) + "x" + std::to_string(s.width));
  if (s.resize != ResizeMode::kDefault) add(std::string("resize=") + mode_name(s.resize));
  if (s.crop != 1.f) add("crop=" + num(s.crop));
  const TensorOptions d;
  if (s.tensor.mean != d.mean) add("mean=" + num(s.tensor.mean[0]) + "," + num(s.tensor.mean[1]) + "," + num(s.tensor.mean[2]));
  if (s.tensor.stddev != d.stddev) {
    add("std=" + num(s.tensor.stddev[0]) + "," + num(s.tensor.stddev[1]) + "," + num(s.tensor.stddev[2]));
  }
  if (s.tensor.order == ChannelOrder::kBGR) add("order=bgr");
  if (s.tensor.layout == TensorLayout::kNHWC) add("layout=nhwc");
  if (s.pad >= 0) add("pad=" + std::to_string(s.pad));
  return out;
}

Status resolve_input_size(const PreprocessSpec& spec, const Shape& shape, int* width, int* height) {
  const bool nhwc = spec.tensor.layout == TensorLayout::kNHWC;
  if (shape.size() != 4 || shape[nhwc ? 3 : 1] != 3) {
    return invalid("an image model needs one input " + std::string(nhwc ? "[N,H,W,3] (layout=nhwc)" : "[N,3,H,W]") +
                   "; this input is [" + shape_str(shape) + "]" +
                   (shape.size() == 4 && shape[nhwc ? 1 : 3] == 3 ? std::string(" (try --preprocess layout=") +
                                                                        (nhwc ? "nchw)" : "nhwc)")
                                                                  : std::string()));
  }
  const int64_t h = shape[nhwc ? 1 : 2], w = shape[nhwc ? 2 : 3];
  if ((h > 0 && spec.height > 0 && h != spec.height) || (w > 0 && spec.width > 0 && w != spec.width)) {
    return invalid("--preprocess size=" + std::to_string(spec.height) + "x" + std::to_string(spec.width) +
                   " disagrees with the model's input [" + shape_str(shape) + "]");
  }
  *height = h > 0 ? static_cast<int>(h) : spec.height;
  *width = w > 0 ? static_cast<int>(w) : spec.width;
  if (*height <= 0 || *width <= 0) {
    return invalid("the model's input [" + shape_str(shape) + "] has a dynamic height or width: give the size to feed "
                   "it, e.g. --preprocess size=640x640");
  }
  return Status::ok();
}

Expected<Image> resize_for_model(const Image& img, const PreprocessSpec& spec, int width, int height,
                                 ResizeMode fallback, LetterboxInfo* info) {
  if (img.empty()) return invalid("preprocess: empty image");
  const ResizeMode mode = spec.resize == ResizeMode::kDefault ? fallback : spec.resize;
  switch (mode) {
    case ResizeMode::kDefault:
    case ResizeMode::kFit:
      return classifier_input(img, width, height);
    case ResizeMode::kStretch:
      return resize_to(img, width, height);
    case ResizeMode::kCenterCrop: {
      const double r = std::max(static_cast<double>(width) / img.width, static_cast<double>(height) / img.height) /
                       static_cast<double>(spec.crop);
      const int rw = std::max(width, static_cast<int>(std::lround(img.width * r)));
      const int rh = std::max(height, static_cast<int>(std::lround(img.height * r)));
      const Image scaled = QD_TRY(resize_to(img, rw, rh));
      Image out(width, height);
      const int ox = (rw - width) / 2, oy = (rh - height) / 2;
      for (int y = 0; y < height; ++y) {
        std::copy(scaled.pixel(ox, oy + y), scaled.pixel(ox, oy + y) + out.row_bytes(), out.pixel(0, y));
      }
      return out;
    }
    case ResizeMode::kLetterbox: {
      LetterboxOptions o;
      o.style = LetterboxStyle::kUltralytics;
      o.width = width;
      o.height = height;
      if (spec.pad >= 0) o.pad_value = static_cast<uint8_t>(spec.pad);
      return letterbox(img, o, info);
    }
    case ResizeMode::kNone:
      if (img.width != width || img.height != height) {
        return invalid("--preprocess resize=none: the image is " + std::to_string(img.width) + "x" +
                       std::to_string(img.height) + " (WxH), the model takes " + std::to_string(width) + "x" +
                       std::to_string(height) + "; choose another resize mode");
      }
      return img;
  }
  return internal("resize_for_model: unknown mode");
}

Expected<Tensor> images_to_model_input(const std::vector<const Image*>& images, const PreprocessSpec& spec, int width,
                                       int height, ResizeMode fallback) {
  std::vector<Image> sized;
  sized.reserve(images.size());
  for (const Image* im : images) sized.push_back(QD_TRY(resize_for_model(*im, spec, width, height, fallback)));
  std::vector<const Image*> ptrs;
  for (const auto& im : sized) ptrs.push_back(&im);
  return images_to_tensor(ptrs, spec.tensor);
}

}  // namespace qd
