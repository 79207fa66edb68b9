// qdeploy eval: COCO bbox mAP with pycocotools' numbers.
//   qdeploy eval --annotations GT.json --results DETS.json [--json] [--per-class]   evaluates a results file
//   qdeploy eval MODEL|PLAN --images DIR --annotations GT.json                      runs a detector on the images
//   qdeploy eval MODEL|PLAN --fmnist DIR | --classes DIR                            top-1 of a classifier
// Both modes end in report_coco(): a model run only has to produce the CocoDetection list (tasks/ decode + NMS +
// unletterbox, then eval/coco_categories.h to_coco_detections) and may write it with --save-results.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gpu_pipeline.h"
#include "core/file_io.h"
#include "eval/coco_eval.h"
#include "eval/coco_json.h"
#include "eval/coco_categories.h"
#include "eval/topk.h"
#include "build_flags.h"
#include "classifier_io.h"
#include "core/progress.h"
#include "tasks/detector.h"
#include "tasks/fmnist.h"
#include "tasks/model_input.h"
#include "tasks/preprocess.h"

namespace qd::cli {

namespace {

struct EvalArgs {
  std::string model;  // MODEL|PLAN (model mode)
  std::string images;
  std::string annotations;
  std::string results;
  std::string save_results;
  std::vector<int64_t> img_ids;
  bool json = false;
  bool per_class = false;
  bool quiet = false;
  bool cpu_pipeline = false;
  BuildFlags build;
  int batch = 8;
  int imgsz = 640;
  float conf = 0.001f, iou = 0.65f;
  int max_det = 300;
  std::string letterbox = kDefaultLetterbox;
  std::string class_map = "sorted";
  std::string fmnist;
  std::string split = "test";
  std::string classes;  // image-folder classification: DIR/<class_name>/*.jpg|png
  std::string labels;   // optional: one class name per line (line i = label i)
};

// Files above this size get progress lines on stderr.
constexpr uint64_t kLargeFile = uint64_t{16} << 20;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t file_size_or_zero(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

class Progress {
 public:
  explicit Progress(bool on) : on_(on && ::isatty(STDERR_FILENO) != 0), lines_(on) {}
  void line(const std::string& s) const {
    if (lines_) std::fprintf(stderr, "%s\n", s.c_str());
  }
  CocoProgressFn fn() const {
    if (!on_) return nullptr;
    return [](const char* stage, size_t done, size_t total) {
      std::fprintf(stderr, "\r%s %zu/%zu", stage, done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }

 private:
  bool on_;
  bool lines_;
};

void print_warnings(const CocoDataset& ds, const CocoEvalResult& r) {
  for (const auto& w : ds.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (r.num_unknown_category > 0) {
    std::string ids;
    for (int64_t id : r.unknown_category_examples) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    std::fprintf(stderr,
                 "warning: %zu of %zu detections have a category id the annotations do not list (e.g. %s); they are "
                 "ignored, as pycocotools ignores them. If the ids are a model's class indices (0..79 for COCO), map "
                 "them to the dataset's category ids (COCO: 1..90, see docs/coco-eval.md).\n",
                 r.num_unknown_category, r.num_detections, ids.c_str());
  }
  if (r.num_outside_img_ids > 0) {
    std::fprintf(stderr, "note: %zu detections are on images outside --img-ids and were not evaluated\n",
                 r.num_outside_img_ids);
  }
}

// Evaluates and prints: the 12 summarize() lines (optionally a per-class table), or JSON with --json.
int report_coco(const EvalArgs& a, const CocoDataset& ds, const std::vector<CocoDetection>& dets, bool large) {
  const Progress progress(large && !a.quiet);
  CocoEvalParams params;
  params.img_ids = a.img_ids;
  const auto t0 = std::chrono::steady_clock::now();
  auto res = evaluate_coco_bbox(ds, dets, params, progress.fn());
  if (!res) {
    Status s = res.status();
    if (!a.results.empty() && s.message().rfind("detection #", 0) == 0) s.prefix(a.results);
    return report(s);
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "evaluated %zu images x %zu categories in %.2f s", res->params.img_ids.size(), res->K,
                seconds_since(t0));
  progress.line(buf);
  if (!a.quiet) print_warnings(ds, *res);

  if (a.json) {
    std::fputs(coco_summary_json(*res, &ds).c_str(), stdout);
    return 0;
  }
  std::fputs(format_coco_summary(*res).c_str(), stdout);
  if (a.per_class) {
    std::unordered_map<int64_t, std::string> names;
    for (const auto& c : ds.categories) names[c.id] = c.name;
    const auto ap = coco_per_category_ap(*res);
    const auto ap50 = coco_per_category_ap(*res, 0.5);
    std::printf("\n%8s  %-24s %8s %8s\n", "id", "category", "AP", "AP50");
    for (size_t k = 0; k < res->K; ++k) {
      std::printf("%8lld  %-24s %8.3f %8.3f\n", static_cast<long long>(res->cat_ids[k]),
                  names[res->cat_ids[k]].substr(0, 24).c_str(), ap[k], ap50[k]);
    }
  }
  return 0;
}

Expected<CocoDataset> load_annotations(const EvalArgs& a, const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto ds = load_coco_instances(a.annotations);
  if (ds) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "read %zu images, %zu annotations, %zu categories in %.2f s", ds->images.size(),
                  ds->annotations.size(), ds->categories.size(), seconds_since(t0));
    progress.line(buf);
  }
  return ds;
}

int run_eval_results(const EvalArgs& a) {
  const bool large = file_size_or_zero(a.annotations) > kLargeFile || file_size_or_zero(a.results) > kLargeFile;
  const Progress progress(large && !a.quiet);
  auto ds = load_annotations(a, progress);
  if (!ds) return report(ds.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto dets = load_coco_results(a.results);
  if (!dets) return report(dets.status());
  char buf[128];
  std::snprintf(buf, sizeof buf, "read %zu detections in %.2f s", dets->size(), seconds_since(t0));
  progress.line(buf);
  if (!a.save_results.empty()) {
    if (Status s = write_coco_results(a.save_results, *dets); !s) return report(s);
  }
  return report_coco(a, *ds, *dets, large || dets->size() > 200000);
}

// Model mode: decode (parallel) + letterbox + run + NMS + unletterbox over the annotated images, then report_coco().
int run_eval_model(const EvalArgs& a) {
  if (a.batch < 1 || a.batch > 256) return report(invalid("--batch must be in 1..256"));
  const Progress quiet_progress(false);
  auto ds = load_annotations(a, quiet_progress);
  if (!ds) return report(ds.status());
  auto spec = preprocess_from_flag(a.build.preprocess);
  if (!spec) return report(spec.status());
  auto options = detector_options_for(*spec, a.letterbox, a.imgsz);
  if (!options) return report(options.status());
  DetectorOptions opt = *options;
  BuildFlags build = a.build;
  build.calib_letterbox = a.letterbox;  // --calib images letterboxed as the evaluated ones
  auto engine = build_from_flags(a.model, build);
  if (!engine) return report(engine.status());
  opt.post.conf_thres = a.conf;
  opt.post.iou_thres = a.iou;
  opt.post.max_det = a.max_det;
  opt.post.multi_label = true;  // as ultralytics val.py
  auto det = Detector::create(engine->get(), opt);
  if (!det) return report(Status(det.status()).prefix(a.model));
  auto mapping = parse_class_mapping(a.class_map);
  if (!mapping) return report(mapping.status());
  auto cat_ids = class_to_category_ids(*mapping, *ds, det->num_classes());
  if (!cat_ids) return report(cat_ids.status());

  // The images to run: those of --img-ids when given (the others would not be evaluated), else all.
  std::vector<size_t> run_idx;
  const std::set<int64_t> wanted(a.img_ids.begin(), a.img_ids.end());
  for (size_t k = 0; k < ds->images.size(); ++k) {
    if (wanted.empty() || wanted.count(ds->images[k].id)) run_idx.push_back(k);
  }
  const size_t n = run_idx.size();
  const int64_t fixed = (*engine)->inputs()[0].shape[0];
  const size_t batch = fixed > 0 ? static_cast<size_t>(fixed) : static_cast<size_t>(a.batch);  // a fixed batch wins
  // GPU pre/post-processing when the engine runs on CUDA (else a no-op); `gpu` owns it while det is used.
  std::string why = "--cpu-pipeline";
  auto gpu = a.cpu_pipeline ? Expected<std::shared_ptr<void>>(std::shared_ptr<void>())
                            : use_gpu_pipeline(**engine, *det, static_cast<int>(batch), &why, n);
  if (!gpu) return report(gpu.status());
  if (!a.quiet) {
    if (*gpu) {
      std::fprintf(stderr, "pipeline: GPU (letterbox into the engine input, CUDA graph, batched NMS on the device), "
                           "batch %zu\n", batch);
    } else {
      std::fprintf(stderr, "pipeline: CPU letterbox and NMS, batch %zu%s%s%s\n", batch, why.empty() ? "" : " (",
                   why.c_str(), why.empty() ? "" : ")");
    }
  }
  std::vector<int64_t> image_ids(n);
  std::vector<Detection> all;
  DetectTimings t;
  double decode_ms = 0;
  const auto t0 = std::chrono::steady_clock::now();
  qd::Progress progress("eval", static_cast<int64_t>(n));
  for (size_t start = 0; start < n; start += batch) {
    const size_t end = std::min(n, start + batch);
    const auto td = std::chrono::steady_clock::now();
    std::vector<std::string> paths;
    for (size_t k = start; k < end; ++k) paths.push_back(a.images + "/" + ds->images[run_idx[k]].file_name);
    auto decoded = read_images(paths);
    if (!decoded) return report(decoded.status());
    std::vector<Image>& imgs = *decoded;
    decode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - td).count();
    std::vector<const Image*> ptrs;
    for (auto& im : imgs) ptrs.push_back(&im);
    auto dets = det->detect(ptrs, &t);
    if (!dets) return report(dets.status());
    for (size_t k = 0; k < imgs.size(); ++k) {
      image_ids[start + k] = ds->images[run_idx[start + k]].id;
      for (Detection d : (*dets)[k]) {
        d.image = static_cast<int64_t>(start + k);
        all.push_back(d);
      }
    }
    if (!a.quiet) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f img/s", end / seconds_since(t0));
      progress.update(static_cast<int64_t>(end), rate);
    }
  }
  if (!a.quiet) {
    std::fprintf(stderr, "%s\n%s", (*engine)->describe().c_str(), format_timings(t, decode_ms).c_str());
  }
  auto coco = to_coco_detections(all, image_ids, *cat_ids);
  if (!coco) return report(coco.status());
  if (!a.save_results.empty()) {
    if (Status s = write_coco_results(a.save_results, *coco); !s) return report(s);
  }
  return report_coco(a, *ds, *coco, false);
}

// Classification: top-1 / top-5 on Fashion-MNIST (IDX files), images prepared as the shipped classifiers expect.
int run_eval_fmnist(const EvalArgs& a) {
  auto split = load_fmnist(a.fmnist, a.split);
  if (!split) return report(split.status());
  auto engine = build_from_flags(a.model, a.build);
  if (!engine) return report(engine.status());
  const auto& in = (*engine)->inputs();
  auto cin = classifier_input_for(a.model, a.build.preprocess, **engine);
  if (!cin) return report(cin.status());
  const int batch = in[0].shape[0] > 0 ? static_cast<int>(in[0].shape[0]) : a.batch;  // a fixed batch wins
  TopK acc;
  const auto t0 = std::chrono::steady_clock::now();
  qd::Progress progress("eval", split->count);
  for (int start = 0; start < split->count; start += batch) {
    const int end = std::min(split->count, start + batch);
    std::vector<Image> imgs;
    for (int i = start; i < end; ++i) imgs.push_back(fmnist_image_32(*split, i));
    auto out = run_classifier(**engine, in[0].name, imgs, *cin);
    if (!out) return report(out.status());
    Status st = acc.add((*out)[0], split->labels.data() + start);
    if (!st) return report(st);
    if (!a.quiet) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.0f img/s", end / seconds_since(t0));
      progress.update(end, rate);
    }
  }
  if (a.json) {
    nlohmann::json j = {{"images", acc.count}, {"top1", acc.top1()}, {"top5", acc.top5()}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s on Fashion-MNIST %s (%lld images, %s): top-1 %.2f%%  top-5 %.2f%%\n", a.model.c_str(),
                a.split.c_str(), static_cast<long long>(acc.count), (*engine)->describe().c_str(), 100 * acc.top1(),
                100 * acc.top5());
  }
  return 0;
}

struct ClassTree {
  std::vector<std::string> names;           // label index -> class name
  std::vector<std::string> paths;           // every image
  std::vector<int> labels;                  // per image
};

Expected<ClassTree> scan_class_tree(const std::string& dir, const std::string& labels_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return not_found("--classes '" + dir + "' is not a folder (expected DIR/<class_name>/*.jpg|png)");
  }
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory()) found.push_back(e.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) return invalid("--classes '" + dir + "' has no class folders (expected DIR/<class_name>/*.jpg|png)");
  ClassTree t;
  t.names = labels_file.empty() ? found : QD_TRY(read_class_names(labels_file));
  std::map<std::string, int> index;
  for (size_t i = 0; i < t.names.size(); ++i) index.emplace(t.names[i], static_cast<int>(i));
  for (const auto& name : found) {
    auto it = index.find(name);
    if (it == index.end()) {
      return invalid("class folder '" + name + "' of --classes is not in --labels '" + labels_file + "'");
    }
    auto imgs = list_images({dir + "/" + name});
    if (!imgs) return Status(imgs.status()).prefix("--classes: class '" + name + "'");
    for (auto& p : *imgs) {
      t.paths.push_back(std::move(p));
      t.labels.push_back(it->second);
    }
  }
  return t;
}

// Classification on an image-folder tree: top-1 / top-5 and per-class top-1.
int run_eval_classes(const EvalArgs& a) {
  auto tree = scan_class_tree(a.classes, a.labels);
  if (!tree) return report(tree.status());
  auto engine = build_from_flags(a.model, a.build);
  if (!engine) return report(engine.status());
  const auto& in = (*engine)->inputs();
  auto cin = classifier_input_for(a.model, a.build.preprocess, **engine);
  if (!cin) return report(cin.status());
  const int batch = in[0].shape[0] > 0 ? static_cast<int>(in[0].shape[0]) : a.batch;  // a fixed batch wins
  if (batch < 1) return report(invalid("--batch must be at least 1"));
  const size_t k = tree->names.size();
  std::vector<int64_t> seen(k, 0), right(k, 0);
  int64_t count = 0, top1 = 0, top5 = 0;
  const int n = static_cast<int>(tree->paths.size());
  const auto t0 = std::chrono::steady_clock::now();
  qd::Progress progress("eval", n);
  for (int start = 0; start < n; start += batch) {
    const int end = std::min(n, start + batch);
    auto decoded = read_images({tree->paths.begin() + start, tree->paths.begin() + end});
    if (!decoded) return report(decoded.status());
    auto out = run_classifier(**engine, in[0].name, *decoded, *cin);
    if (!out) return report(out.status());
    const Tensor& logits = (*out)[0];
    const int64_t rows = end - start;
    if (logits.shape().size() != 2 || logits.shape()[0] != rows || logits.shape()[1] < static_cast<int64_t>(k)) {
      return report(invalid(a.model + ": output " + shape_str(logits.shape()) + " is not [N, classes] with at least " +
                            std::to_string(k) + " classes (the class folders / --labels)"));
    }
    const int64_t c = logits.shape()[1];
    for (int64_t r = 0; r < rows; ++r) {
      const int label = tree->labels[static_cast<size_t>(start + r)];
      const double v = logits.get_f64(r * c + label);
      int64_t rank = 0;  // ties rank the lower class index first (as eval --fmnist's TopK)
      for (int64_t j = 0; j < c; ++j) {
        const double u = logits.get_f64(r * c + j);
        if (u > v || (u == v && j < label)) ++rank;
      }
      ++count;
      ++seen[static_cast<size_t>(label)];
      if (rank < 1) {
        ++top1;
        ++right[static_cast<size_t>(label)];
      }
      if (rank < 5) ++top5;
    }
    if (!a.quiet) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.0f img/s", end / seconds_since(t0));
      progress.update(end, rate);
    }
  }
  const double acc1 = count ? static_cast<double>(top1) / count : 0, acc5 = count ? static_cast<double>(top5) / count : 0;
  if (a.json) {
    nlohmann::json per = nlohmann::json::array();
    for (size_t i = 0; i < k; ++i) {
      if (!seen[i]) continue;
      per.push_back({{"label", i}, {"name", tree->names[i]}, {"images", seen[i]},
                     {"top1", static_cast<double>(right[i]) / seen[i]}});
    }
    nlohmann::json j = {{"images", count}, {"classes", k}, {"top1", acc1}, {"top5", acc5}, {"per_class", per}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s on %s (%lld images, %zu classes, %s): top-1 %.2f%%  top-5 %.2f%%\n", a.model.c_str(),
                a.classes.c_str(), static_cast<long long>(count), k, (*engine)->describe().c_str(), 100 * acc1, 100 * acc5);
    if (a.per_class) {
      for (size_t i = 0; i < k; ++i) {
        if (seen[i]) std::printf("%4zu  %-24s %6lld images  top-1 %.2f%%\n", i, tree->names[i].substr(0, 24).c_str(),
                                 static_cast<long long>(seen[i]), 100.0 * right[i] / seen[i]);
      }
    }
  }
  return 0;
}

int run_eval(const EvalArgs& a) {
  if (!a.classes.empty()) {
    if (a.model.empty()) return report(invalid("--classes evaluates a classifier: give the MODEL"));
    if (!a.fmnist.empty()) return report(invalid("give either --classes DIR or --fmnist DIR, not both"));
    return run_eval_classes(a);
  }
  if (!a.labels.empty()) return report(invalid("--labels goes with --classes DIR"));
  if (!a.fmnist.empty()) {
    if (a.model.empty()) return report(invalid("--fmnist evaluates a classifier: give the MODEL"));
    return run_eval_fmnist(a);
  }
  if (a.annotations.empty()) return report(invalid("--annotations GT.json is required (COCO instances format)"));
  if (!a.results.empty() && !a.model.empty()) {
    return report(invalid("give either a MODEL to run or --results to evaluate, not both"));
  }
  if (!a.results.empty()) {
    if (!a.images.empty()) return report(invalid("--images is for evaluating a MODEL; --results needs no images"));
    return run_eval_results(a);
  }
  if (a.model.empty()) {
    return report(invalid("nothing to evaluate: give --results DETS.json (a COCO results file) or a MODEL with --images"));
  }
  if (a.images.empty()) return report(invalid("evaluating a MODEL needs --images DIR"));
  return run_eval_model(a);
}

}  // namespace

RunFn add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* sub = app.add_subcommand("eval", "COCO bbox mAP of a results file (pycocotools' numbers), or of a model");
  sub->add_option("model", a->model, "ONNX model or plan to run (needs --images)");
  sub->add_option("--annotations", a->annotations, "COCO instances JSON (ground truth)");
  sub->add_option("--results", a->results, "COCO results JSON: [{image_id, category_id, bbox [x,y,w,h], score}, ...]");
  sub->add_option("--images", a->images, "Folder of images to run MODEL on");
  sub->add_option("--img-ids", a->img_ids, "Run and evaluate only these image ids (default: all images of --annotations)")
      ->delimiter(',');
  sub->add_option("--save-results", a->save_results, "Also write the detections as a COCO results JSON");
  sub->add_flag("--per-class", a->per_class, "Also print AP and AP50 of each category");
  sub->add_flag("--json", a->json, "Machine-readable output");
  sub->add_flag("-q,--quiet", a->quiet, "No progress lines or warnings on stderr");
  sub->add_option("--batch", a->batch, "Images per inference (model mode)")->capture_default_str();
  sub->add_flag("--cpu-pipeline", a->cpu_pipeline, "With a CUDA engine, keep letterbox and NMS on the CPU (the "
                                                   "engine's output goes through the host), e.g. to compare");
  sub->add_option("--imgsz", a->imgsz, "Network input size when the model's is dynamic (640, 672)")->capture_default_str();
  sub->add_option("--conf", a->conf, "Confidence threshold")->capture_default_str();
  sub->add_option("--iou", a->iou, "NMS IoU threshold")->capture_default_str();
  sub->add_option("--max-det", a->max_det, "Detections kept per image")->capture_default_str();
  add_letterbox_option(sub, a->letterbox);
  sub->add_option("--class-map", a->class_map, "Model class index -> category id: sorted (the dataset's ids in "
                                               "order), coco80 (COCO-trained models), identity")->capture_default_str();
  sub->add_option("--fmnist", a->fmnist, "Classification: Fashion-MNIST IDX folder (e.g. /usr/share/datasets/fashion-mnist)");
  sub->add_option("--split", a->split, "Fashion-MNIST split: test or train")->capture_default_str();
  sub->add_option("--classes", a->classes, "Classification: image folders DIR/<class_name>/*.jpg|png (labels: class "
                                           "names sorted, or --labels)");
  sub->add_option("--labels", a->labels, "With --classes: file of class names, one per line (line i = label i)");
  add_build_flags(sub, a->build);
  return [a] { return run_eval(*a); };
}

}  // namespace qd::cli
