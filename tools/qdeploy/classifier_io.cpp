#include "classifier_io.h"

#include <chrono>
#include <fstream>
#include <set>

#include "calib_data.h"

namespace qd::cli {

Expected<ClassifierInput> classifier_input_for(const std::string& model, const std::string& preprocess,
                                               const Engine& engine) {
  const auto& in = engine.inputs();
  if (in.size() != 1) return invalid(model + ": a classifier needs one image input");
  ClassifierInput c;
  c.spec = QD_TRY(preprocess_from_flag(preprocess));
  PreprocessSpec sized = c.spec;  // a dynamic size the spec does not give: 32
  const bool nhwc = c.spec.tensor.layout == TensorLayout::kNHWC;
  if (sized.height == 0 && in[0].shape.size() == 4 && in[0].shape[nhwc ? 1 : 2] <= 0) sized.height = 32;
  if (sized.width == 0 && in[0].shape.size() == 4 && in[0].shape[nhwc ? 2 : 3] <= 0) sized.width = 32;
  QD_RETURN_IF_ERROR(resolve_input_size(sized, in[0].shape, &c.width, &c.height).prefix(model));
  return c;
}

Expected<std::vector<Tensor>> run_classifier(Engine& engine, const std::string& input, const std::vector<Image>& imgs,
                                             const ClassifierInput& c, ClassifierTimings* timings) {
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::time_point t0) { return std::chrono::duration<double, std::milli>(clock::now() - t0).count(); };
  std::vector<const Image*> ptrs;
  for (const auto& im : imgs) ptrs.push_back(&im);
  const auto t0 = clock::now();
  auto x = images_to_model_input(ptrs, c.spec, c.width, c.height, ResizeMode::kFit);
  if (!x) return x.status();
  const auto t1 = clock::now();
  auto out = engine.run({{input, *x}});
  if (timings) {
    timings->preprocess_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
    timings->inference_ms += ms(t1);
  }
  return out;
}

Expected<std::vector<std::string>> read_class_names(const std::string& path) {
  std::ifstream f(path);
  if (!f) return not_found("--labels '" + path + "' cannot be read");
  std::vector<std::string> names;
  std::set<std::string> seen;
  std::string line;
  while (std::getline(f, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    if (!seen.insert(line).second) return invalid("--labels '" + path + "' lists class '" + line + "' twice");
    names.push_back(line);
  }
  if (names.empty()) return invalid("--labels '" + path + "' lists no class names");
  return names;
}

}  // namespace qd::cli
