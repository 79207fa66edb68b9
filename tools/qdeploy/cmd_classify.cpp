// qdeploy classify MODEL|PLAN IMAGE|DIR...: the top classes of each image, and where the time went.
// Images are prepared as eval --fmnist / --classes prepare them (classifier_io.h: --preprocess, default fit into the
// inner 7/8 with values x / 255; `--preprocess imagenet` for ImageNet models).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include <nlohmann/json.hpp>

#include "build_flags.h"
#include "classifier_io.h"
#include "commands.h"

namespace qd::cli {

namespace {

struct ClassifyArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string labels;
  int top = 5;
  int batch = 1;
  bool json = false;
  BuildFlags build;
};

using clock = std::chrono::steady_clock;
double ms_since(clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
}

struct Ranked {
  int64_t id;
  double score, prob;
};

// The k best of one row of logits, best first (ties: the lower class index first), with the row's softmax.
std::vector<Ranked> top_k(const Tensor& logits, int64_t row, int64_t classes, int k) {
  std::vector<double> v(static_cast<size_t>(classes));
  for (int64_t j = 0; j < classes; ++j) v[static_cast<size_t>(j)] = logits.get_f64(row * classes + j);
  const double mx = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += std::exp(x - mx);
  std::vector<int64_t> idx(static_cast<size_t>(classes));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  const size_t n = std::min(static_cast<size_t>(k), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(), [&](int64_t a, int64_t b) {
    const double x = v[static_cast<size_t>(a)], y = v[static_cast<size_t>(b)];
    return x > y || (x == y && a < b);
  });
  std::vector<Ranked> out;
  for (size_t i = 0; i < n; ++i) {
    const double s = v[static_cast<size_t>(idx[i])];
    out.push_back({idx[i], s, std::exp(s - mx) / sum});
  }
  return out;
}

int run_classify(const ClassifyArgs& a) {
  if (a.top < 1) return report(invalid("--top must be at least 1"));
  if (a.batch < 1 || a.batch > 256) return report(invalid("--batch must be in 1..256"));
  auto files = list_images(a.inputs);
  if (!files) return report(files.status());
  std::vector<std::string> names;
  if (!a.labels.empty()) {
    auto n = read_class_names(a.labels);
    if (!n) return report(n.status());
    names = std::move(*n);
  }
  const auto tb = clock::now();
  auto engine = build_from_flags(a.model, a.build);
  if (!engine) return report(engine.status());
  const double build_ms = ms_since(tb);
  auto cin = classifier_input_for(a.model, a.build.preprocess, **engine);
  if (!cin) return report(cin.status());
  const auto& in = (*engine)->inputs();
  const int64_t fixed = in[0].shape[0];
  const size_t batch = fixed > 0 ? static_cast<size_t>(fixed) : static_cast<size_t>(a.batch);  // a fixed batch wins
  const std::string preprocess =
      cin->spec.given ? preprocess_spec_str(cin->spec) : "default (fit into the inner 7/8, values x/255)";

  nlohmann::json images = nlohmann::json::array();
  ClassifierTimings t;
  double decode_ms = 0;
  int64_t classes = -1;
  for (size_t start = 0; start < files->size(); start += batch) {
    const size_t end = std::min(files->size(), start + batch);
    const auto td = clock::now();
    auto decoded = read_images({files->begin() + static_cast<std::ptrdiff_t>(start),
                                files->begin() + static_cast<std::ptrdiff_t>(end)});
    if (!decoded) return report(decoded.status());
    decode_ms += ms_since(td);
    // A fixed batch larger than the images left: repeat the last one (its results are not reported).
    std::vector<Image>& imgs = *decoded;
    const size_t real = imgs.size();
    while (imgs.size() < batch && fixed > 0) imgs.push_back(imgs.back());
    auto out = run_classifier(**engine, in[0].name, imgs, *cin, &t);
    if (!out) return report(out.status());
    const Tensor& logits = (*out)[0];
    if (logits.shape().size() != 2 || logits.shape()[0] != static_cast<int64_t>(imgs.size()) ||
        logits.shape()[1] < 1) {
      return report(invalid(a.model + ": output '" + (*engine)->outputs()[0].name + "' is [" +
                            shape_str(logits.shape()) + "], not [N, classes]: not a classifier"));
    }
    if (classes < 0) {
      classes = logits.shape()[1];
      if (!names.empty() && static_cast<int64_t>(names.size()) != classes) {
        return report(invalid("--labels '" + a.labels + "' lists " + std::to_string(names.size()) +
                              " class names; the model has " + std::to_string(classes) + " classes"));
      }
      if (!a.json) {
        std::printf("model %s on %s, input %dx%d, %lld classes, preprocess %s (%s in %.0f ms)\n", a.model.c_str(),
                    (*engine)->describe().c_str(), cin->width, cin->height, static_cast<long long>(classes),
                    preprocess.c_str(), is_plan_file(a.model) ? "loaded" : "built", build_ms);
      }
    }
    for (size_t k = 0; k < real; ++k) {
      const std::string& path = (*files)[start + k];
      nlohmann::json top = nlohmann::json::array();
      if (!a.json) std::printf("%s\n", path.c_str());
      for (const Ranked& r : top_k(logits, static_cast<int64_t>(k), classes, a.top)) {
        nlohmann::json e = {{"class_id", r.id}, {"score", r.score}, {"prob", r.prob}};
        if (!names.empty()) e["label"] = names[static_cast<size_t>(r.id)];
        top.push_back(e);
        if (!a.json && names.empty()) {
          std::printf("  %5lld  score %10.4f  prob %.4f\n", static_cast<long long>(r.id), r.score, r.prob);
        } else if (!a.json) {
          std::printf("  %5lld  %-28s score %10.4f  prob %.4f\n", static_cast<long long>(r.id),
                      names[static_cast<size_t>(r.id)].substr(0, 28).c_str(), r.score, r.prob);
        }
      }
      images.push_back({{"file", path}, {"width", imgs[k].width}, {"height", imgs[k].height}, {"top", top}});
    }
  }
  const double n = static_cast<double>(files->size());
  if (a.json) {
    nlohmann::json j = {{"model", a.model},
                        {"engine", (*engine)->describe()},
                        {"input", {{"width", cin->width}, {"height", cin->height}}},
                        {"preprocess", cin->spec.given ? preprocess_spec_str(cin->spec) : ""},
                        {"classes", classes},
                        {"batch", batch},
                        {"images", images},
                        {"timings_ms",
                         {{"build", build_ms},
                          {"decode_per_image", decode_ms / n},
                          {"preprocess_per_image", t.preprocess_ms / n},
                          {"inference_per_batch", t.inference_ms / std::ceil(n / static_cast<double>(batch))}}}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%zu images, batch %zu: decode %.2f ms, preprocess %.2f ms per image; inference %.2f ms per batch\n",
                files->size(), batch, decode_ms / n, t.preprocess_ms / n,
                t.inference_ms / std::ceil(n / static_cast<double>(batch)));
  }
  return 0;
}

}  // namespace

RunFn add_classify(CLI::App& app) {
  auto a = std::make_shared<ClassifyArgs>();
  auto* sub = app.add_subcommand(
      "classify", "Top classes of images with a classifier; images prepared as eval --classes prepares them");
  sub->add_option("model", a->model, "ONNX model or plan: one image input, output [N, classes]")->required();
  sub->add_option("inputs", a->inputs, "Image files (jpg/png) or folders of them")->required();
  sub->add_option("--labels", a->labels, "File of class names, one per line (line i = class i)");
  sub->add_option("--top", a->top, "Classes shown per image")->capture_default_str();
  sub->add_option("--batch", a->batch, "Images per inference (a model's fixed batch wins)")->capture_default_str();
  sub->add_flag("--json", a->json, "Machine-readable output: per image the top classes (class_id, label, score, prob: "
                                   "the softmax of the output row), and the timings");
  add_build_flags(sub, a->build);
  return [a] { return run_classify(*a); };
}

}  // namespace qd::cli
