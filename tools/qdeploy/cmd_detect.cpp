// qdeploy detect MODEL IMAGE|DIR... --out DIR: detections as annotated images and a JSON list.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "build_flags.h"
#include "commands.h"
#include "gpu_pipeline.h"
#include "core/file_io.h"
#include "tasks/detector.h"
#include "tasks/draw.h"

namespace qd::cli {

namespace {

struct DetectArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string out;
  std::string names;
  BuildFlags build;
  float conf = 0.25f, iou = 0.45f;
  int max_det = 300;
  int batch = 1;
  bool quiet = false;
  bool cpu_pipeline = false;
};

void annotate(Image& img, const std::vector<Detection>& dets, const std::vector<std::string>& names) {
  const int thickness = std::max(1, std::min(img.width, img.height) / 320);
  for (auto it = dets.rbegin(); it != dets.rend(); ++it) {  // best last, so it is drawn on top
    const Detection& d = *it;
    const Color c = class_color(d.class_id);
    const int x1 = static_cast<int>(d.x1), y1 = static_cast<int>(d.y1);
    draw_rect(img, x1, y1, static_cast<int>(d.x2), static_cast<int>(d.y2), c, thickness);
    char label[96];
    std::snprintf(label, sizeof label, "%s %.2f", names[d.class_id].c_str(), d.score);
    draw_label(img, x1, std::max(0, y1 - text_height() - 2), label, c);
  }
}

int run_detect(const DetectArgs& a) {
  if (a.batch < 1 || a.batch > 256) return report(invalid("--batch must be in 1..256"));
  auto files = list_images(a.inputs);
  if (!files) return report(files.status());
  // detect.py's letterbox; --calib images get the same.
  constexpr const char* kDetectLetterbox = "ultralytics";
  auto spec = preprocess_from_flag(a.build.preprocess);
  if (!spec) return report(spec.status());
  auto options = detector_options_for(*spec, kDetectLetterbox);
  if (!options) return report(options.status());
  DetectorOptions opt = *options;
  BuildFlags build = a.build;
  build.calib_letterbox = kDetectLetterbox;
  const auto tb = std::chrono::steady_clock::now();
  auto engine = build_from_flags(a.model, build);
  if (!engine) return report(engine.status());
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tb).count();
  opt.post.conf_thres = a.conf;
  opt.post.iou_thres = a.iou;
  opt.post.max_det = a.max_det;
  auto det = Detector::create(engine->get(), opt);
  if (!det) return report(Status(det.status()).prefix(a.model));
  auto names = class_names(a.names, det->num_classes());
  if (!names) return report(names.status());
  if (Status s = make_dirs(a.out); !s) return report(s);
  std::printf("model %s on %s, input %dx%d, %d classes (built in %.0f ms)\n", a.model.c_str(),
              (*engine)->describe().c_str(), det->input_width(), det->input_height(), det->num_classes(), build_ms);

  const int64_t fixed = (*engine)->inputs()[0].shape[0];
  const int batch = fixed > 0 ? static_cast<int>(fixed) : a.batch;  // a fixed batch wins
  // GPU pre/post-processing when the engine runs on CUDA (else a no-op); `gpu` owns it while det is used.
  std::string why = "--cpu-pipeline";
  auto gpu = a.cpu_pipeline ? Expected<std::shared_ptr<void>>(std::shared_ptr<void>())
                            : use_gpu_pipeline(**engine, *det, static_cast<int>(batch), &why, files->size());
  if (!gpu) return report(gpu.status());
  if (*gpu) {
    std::printf("pipeline: GPU (letterbox into the engine input, CUDA graph, batched NMS on the device), batch %d\n",
                batch);
  } else {
    std::printf("pipeline: CPU letterbox and NMS, batch %d%s%s%s\n", batch, why.empty() ? "" : " (", why.c_str(),
                why.empty() ? "" : ")");
  }
  nlohmann::json all = nlohmann::json::array();
  DetectTimings total;
  double decode_ms = 0;
  size_t n_images = 0;
  for (size_t start = 0; start < files->size(); start += batch) {
    const size_t end = std::min(files->size(), start + batch);
    const auto t0 = std::chrono::steady_clock::now();
    auto decoded = read_images({files->begin() + start, files->begin() + end});
    if (!decoded) return report(decoded.status());
    std::vector<Image>& imgs = *decoded;
    decode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<const Image*> ptrs;
    for (auto& im : imgs) ptrs.push_back(&im);
    auto dets = det->detect(ptrs, &total);
    if (!dets) return report(dets.status());
    for (size_t k = 0; k < imgs.size(); ++k) {
      const std::string& path = (*files)[start + k];
      const std::string base = std::filesystem::path(path).filename().string();
      nlohmann::json j = {{"file", path}, {"width", imgs[k].width}, {"height", imgs[k].height}};
      j["detections"] = nlohmann::json::array();
      if (!a.quiet) std::printf("%s: %zu objects\n", base.c_str(), (*dets)[k].size());
      for (const Detection& d : (*dets)[k]) {
        j["detections"].push_back({{"class_id", d.class_id}, {"class", (*names)[d.class_id]}, {"score", d.score},
                                   {"box", {d.x1, d.y1, d.x2, d.y2}}});
        if (!a.quiet) {
          std::printf("  %-12s %.3f  [%.1f, %.1f, %.1f, %.1f]\n", (*names)[d.class_id].c_str(), d.score, d.x1, d.y1,
                      d.x2, d.y2);
        }
      }
      all.push_back(j);
      annotate(imgs[k], (*dets)[k], *names);
      const std::string stem = std::filesystem::path(base).stem().string();
      if (Status s = write_image(a.out + "/" + stem + ".jpg", imgs[k], 90); !s) return report(s);
    }
    n_images += imgs.size();
  }
  if (Status s = write_file_atomic(a.out + "/detections.json", all.dump(1) + "\n"); !s) return report(s);
  std::printf("%s", format_timings(total, decode_ms).c_str());
  std::printf("wrote %zu annotated images and detections.json to %s\n", n_images, a.out.c_str());
  return 0;
}

}  // namespace

RunFn add_detect(CLI::App& app) {
  auto a = std::make_shared<DetectArgs>();
  auto* sub = app.add_subcommand("detect", "Detect objects in images; write annotated images and detections.json");
  sub->add_option("model", a->model, "YOLOv5 ONNX model")->required();
  sub->add_option("inputs", a->inputs, "Image files or folders")->required();
  sub->add_option("--out", a->out, "Output folder")->required();
  sub->add_option("--conf", a->conf, "Confidence threshold")->capture_default_str();
  sub->add_option("--iou", a->iou, "NMS IoU threshold")->capture_default_str();
  sub->add_option("--max-det", a->max_det, "Detections kept per image")->capture_default_str();
  sub->add_option("--batch", a->batch, "Images per inference")->capture_default_str();
  sub->add_option("--names", a->names, "Text file with one class name per line (default: Fashion-MNIST for 10 "
                                       "classes, COCO for 80)");
  sub->add_flag("--quiet", a->quiet, "Print only the summary");
  sub->add_flag("--cpu-pipeline", a->cpu_pipeline, "With a CUDA engine, keep letterbox and NMS on the CPU (the "
                                                   "engine's output goes through the host), e.g. to compare");
  add_build_flags(sub, a->build);
  return [a] { return run_detect(*a); };
}

}  // namespace qd::cli
