// qdeploy eval: COCO bbox mAP with pycocotools' numbers.
//   qdeploy eval --annotations GT.json --results DETS.json [--json] [--per-class]   evaluates a results file
//   qdeploy eval MODEL|PLAN --images DIR --annotations GT.json                      (runs a detector: not yet)
// Both modes end in report_coco(): a model run only has to produce the CocoDetection list (tasks/ decode + NMS +
// unletterbox, then eval/coco_categories.h to_coco_detections) and may write it with --save-results.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/file_io.h"
#include "eval/coco_eval.h"
#include "eval/coco_json.h"

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

// Model mode: decode + NMS + unletterbox over --images, then report_coco(). Needs the runtime engine.
int run_eval_model(const EvalArgs& a) {
  return report(unsupported("evaluating a model ('" + a.model + "') needs the runtime engine, which this build does "
                            "not have yet; run the detector elsewhere and pass its detections with --results FILE"));
}

int run_eval(const EvalArgs& a) {
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
  sub->add_option("--img-ids", a->img_ids, "Evaluate only these image ids (default: all images of --annotations)")
      ->delimiter(',');
  sub->add_option("--save-results", a->save_results, "Also write the detections as a COCO results JSON");
  sub->add_flag("--per-class", a->per_class, "Also print AP and AP50 of each category");
  sub->add_flag("--json", a->json, "Machine-readable output");
  sub->add_flag("-q,--quiet", a->quiet, "No progress lines or warnings on stderr");
  return [a] { return run_eval(*a); };
}

}  // namespace qd::cli
