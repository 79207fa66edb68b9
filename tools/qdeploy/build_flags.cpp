#include "build_flags.h"

#include <algorithm>
#include <filesystem>

#include "runtime/model.h"

namespace qd::cli {

void add_build_flags(CLI::App* sub, BuildFlags& f) {
  sub->add_option("--device", f.device, "cpu or cuda")->capture_default_str();
  sub->add_option("--precision", f.precision, "fp32, fp16 or int8")->capture_default_str();
  sub->add_option("--shapes", f.shapes, "Bind input shapes, e.g. images:1x3x640x640 (repeatable)");
  sub->add_option("--calib-cache", f.calib_cache, "INT8 activation scales (TensorRT calibration cache text format)");
  sub->add_option("--int8-mode", f.int8_mode, "CPU INT8: exact (integer arithmetic) or fake (float quantize-dequantize)")
      ->capture_default_str();
  sub->add_option("--fp16-layers", f.fp16_layers, "Layers kept in fp16 (names or regexes, comma separated)")->delimiter(',');
  sub->add_option("--fp32-layers", f.fp32_layers, "Layers kept in fp32 (names or regexes, comma separated)")->delimiter(',');
}

Expected<std::unique_ptr<Engine>> build_from_flags(const std::string& model, const BuildFlags& f) {
  BuildOptions opt;
  opt.device = f.device;
  opt.precision = f.precision;
  opt.shapes = QD_TRY(parse_shape_flags(f.shapes));
  opt.calib_cache = f.calib_cache;
  opt.int8_mode = f.int8_mode;
  opt.fp16_layers = f.fp16_layers;
  opt.fp32_layers = f.fp32_layers;
  return build_engine(model, opt);
}

Expected<std::vector<std::string>> list_images(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  auto is_image = [](const fs::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
  };
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.is_regular_file() && is_image(e.path())) found.push_back(e.path().string());
      }
      if (found.empty()) return invalid("no .jpg/.jpeg/.png images in folder '" + p + "'");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p, ec)) {
      out.push_back(p);
    } else {
      return not_found("'" + p + "' is neither an image file nor a folder");
    }
  }
  return out;
}

}  // namespace qd::cli
