// qdeploy sensitivity MODEL --metric snr|map|top1 ...: which layers INT8 hurts, measured on the reference backend.
// Two sweeps over the quantizable layers (each alone kept in float with the rest INT8; each alone INT8 with the rest
// float), a ranked table, --json, --svg, and --auto-fallback BUDGET: the float layers that bring the metric within the
// budget, as --fp16-layers flags and a precision JSON. The logic lives in quant/sensitivity.h; this file gathers the
// scales, the data and the metric, and writes the results.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "build_flags.h"
#include "calib_data.h"
#include "commands.h"
#include "core/file_io.h"
#include "eval/coco_categories.h"
#include "eval/coco_eval.h"
#include "eval/svg_chart.h"
#include "eval/topk.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "quant/calib_cache.h"
#include "quant/qdq.h"
#include "quant/sensitivity.h"

namespace qd::cli {

namespace {

using Json = nlohmann::ordered_json;  // keys in the order written, for people reading the file

struct SensitivityArgs {
  std::string model;
  std::string metric = "snr";
  std::vector<std::string> data;
  std::string fmnist;
  std::string letterbox = kDefaultLetterbox;
  int batches = 1;
  int batch_size = CalibDefaults::kBatchSize;
  std::string images, annotations;
  int limit = 0;
  std::string preprocess;
  std::string calib_cache;
  std::string algo = CalibDefaults::kAlgo;
  double percentile = CalibDefaults::kPercentile;
  int calib_batches = CalibDefaults::kBatches;
  std::string save_cache;
  std::string int8_mode = "fake";
  std::string sweep = "both";
  std::vector<std::string> layers;
  std::string json, svg;
  double budget = NAN;
  std::string precision_out;
  bool quiet = false;
};

// Top-1 accuracy in percent on Fashion-MNIST labels.
class Top1Metric final : public SensitivityMetric {
 public:
  Top1Metric(const uint8_t* labels, int batch) : labels_(labels), batch_(batch) {}
  void reset() override { acc_ = TopK{}; }
  Status add(int k, const std::vector<Tensor>& outputs) override {
    return acc_.add(outputs[0], labels_ + static_cast<size_t>(k) * batch_);
  }
  Expected<double> value() const override { return 100 * acc_.top1(); }

 private:
  const uint8_t* labels_;
  int batch_;
  TopK acc_;
};

// COCO mAP@[.5:.95] in percent over the images used: decode + NMS + unletterbox as `qdeploy eval` does.
class MapMetric final : public SensitivityMetric {
 public:
  MapMetric(const CocoDataset* ds, std::vector<int64_t> image_ids, std::vector<int64_t> cat_ids, const Detector* det,
            const std::vector<std::vector<LetterboxInfo>>* infos, int batch)
      : ds_(ds), image_ids_(std::move(image_ids)), cat_ids_(std::move(cat_ids)), det_(det), infos_(infos),
        batch_(batch) {}
  void reset() override { dets_.clear(); }
  Status add(int k, const std::vector<Tensor>& outputs) override {
    auto per_image = QD_TRY(det_->postprocess(outputs, (*infos_)[k]));
    for (size_t i = 0; i < per_image.size(); ++i) {
      for (Detection d : per_image[i]) {
        d.image = static_cast<int64_t>(k) * batch_ + static_cast<int64_t>(i);
        dets_.push_back(d);
      }
    }
    return Status::ok();
  }
  Expected<double> value() const override {
    auto coco = QD_TRY(to_coco_detections(dets_, image_ids_, cat_ids_));
    CocoEvalParams params;
    params.img_ids = image_ids_;
    CocoEvalResult r = QD_TRY(evaluate_coco_bbox(*ds_, coco, params));
    return 100 * r.stats[0];
  }

 private:
  const CocoDataset* ds_;
  std::vector<int64_t> image_ids_, cat_ids_;
  const Detector* det_;
  const std::vector<std::vector<LetterboxInfo>>* infos_;
  int batch_;
  std::vector<Detection> dets_;
};

// Everything a metric needs, kept alive for the whole analysis.
struct EvalData {
  int num_batches = 0;
  int images = 0;
  SensitivityAnalysis::BatchFn batches;
  std::unique_ptr<SensitivityMetric> metric;
  std::unique_ptr<ImageBatches> image_batches;
  CocoDataset coco;
  std::unique_ptr<Detector> detector;
  std::vector<std::vector<LetterboxInfo>> infos;
};

// The activation scales: a QAT model's Q/DQ pairs (stripped from `g`), a calibration cache, or calibration on the fly.
Status load_scales(const SensitivityArgs& a, Graph& g, Engine* fp32, Int8Options* int8) {
  if (has_qdq(g)) {
    QdqScales q = QD_TRY(strip_qdq(g));
    int8->act_scales = q.act_scales;
    int8->weight_scales = q.weight_scales;
  }
  if (!a.calib_cache.empty()) {
    CalibCache cache = QD_TRY(read_calib_cache(a.calib_cache));
    Status names = check_cache_names(cache, g);
    if (!names.is_ok()) return names.prefix(a.calib_cache);
    for (const auto& [name, s] : cache.scales) int8->act_scales.emplace(name, s);
  }
  if (!int8->act_scales.empty()) return Status::ok();
  if (a.data.empty() && a.fmnist.empty()) {
    return invalid("no activation scales: give --calib-cache FILE, a QAT model, or calibration images (--data "
                   "DIR|FILES or --fmnist DIR) to calibrate on the fly with --algo");
  }
  CalibOptions opt;
  opt.algo = QD_TRY(parse_calib_algo(a.algo));
  opt.percentile = a.percentile;
  ImageSource src;  // calibrate's source: the train split of Fashion-MNIST
  src.data = a.data;
  src.fmnist = a.fmnist;
  src.batches = a.calib_batches;
  src.batch_size = a.batch_size;
  src.letterbox = a.letterbox;
  src.preprocess = QD_TRY(preprocess_from_flag(a.preprocess));
  ImageBatches calib(src, fp32);
  QD_RETURN_IF_ERROR(calib.init());
  CalibCache cache = QD_TRY(calibrate_model(a.model, calib, opt, a.algo, a.quiet));
  if (!a.save_cache.empty()) QD_RETURN_IF_ERROR(write_calib_cache(a.save_cache, cache));
  for (const auto& [name, s] : cache.scales) int8->act_scales.emplace(name, s);
  return Status::ok();
}

Status make_eval_data(const SensitivityArgs& a, Engine* fp32, EvalData* d) {
  const std::string input = fp32->inputs()[0].name;
  if (a.metric == "snr" || a.metric == "top1") {
    if (a.metric == "top1" && a.fmnist.empty()) return invalid("--metric top1 needs --fmnist DIR (Fashion-MNIST)");
    if (a.metric == "snr" && a.data.empty() && a.fmnist.empty()) {
      return invalid("--metric snr needs images: --data DIR|FILES or --fmnist DIR");
    }
    // SNR: --batches batches; top-1: --limit images (the test split of Fashion-MNIST in both cases).
    const std::vector<std::string> files = a.fmnist.empty() ? a.data : std::vector<std::string>{};
    const bool snr = a.metric == "snr";
    ImageSource src;
    src.data = files;
    src.fmnist = a.fmnist;
    src.fmnist_split = "test";
    src.batches = snr ? a.batches : 0;
    src.batch_size = a.batch_size;
    src.max_images = snr ? 0 : a.limit;
    src.letterbox = a.letterbox;
    src.preprocess = QD_TRY(preprocess_from_flag(a.preprocess));
    d->image_batches = std::make_unique<ImageBatches>(src, fp32);
    QD_RETURN_IF_ERROR(d->image_batches->init());
    const ImageBatches* ib = d->image_batches.get();
    d->num_batches = ib->num_batches();
    d->images = ib->num_batches() * ib->batch();
    d->batches = [ib](int k) -> Expected<std::map<std::string, Tensor>> { return ib->feeds(k); };
    if (a.metric == "snr") d->metric = std::make_unique<SnrMetric>();
    else d->metric = std::make_unique<Top1Metric>(ib->fmnist().labels.data(), ib->batch());
    return Status::ok();
  }
  // map: the detection val set, as `qdeploy eval` runs it (--letterbox, conf 0.001, IoU 0.65, multi-label).
  if (a.images.empty() || a.annotations.empty()) return invalid("--metric map needs --images DIR --annotations FILE");
  d->coco = QD_TRY(load_coco_instances(a.annotations));
  DetectorOptions opt = QD_TRY(detector_options_for(QD_TRY(preprocess_from_flag(a.preprocess)), a.letterbox));
  opt.post.conf_thres = 0.001f;
  opt.post.iou_thres = 0.65f;
  opt.post.multi_label = true;
  d->detector = std::make_unique<Detector>(QD_TRY(Detector::create(fp32, opt)));
  auto cat_ids = QD_TRY(class_to_category_ids(ClassMapping::kSorted, d->coco, d->detector->num_classes()));
  const int64_t fixed = fp32->inputs()[0].shape[0];
  const int batch = fixed > 0 ? static_cast<int>(fixed) : a.batch_size;
  int n = static_cast<int>(d->coco.images.size());
  if (a.limit > 0) n = std::min(n, a.limit);
  n = n / batch * batch;  // whole batches (the prepared graph has a fixed batch)
  if (n == 0) return invalid("not enough images for one batch of " + std::to_string(batch));
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(d->coco.images[i].id);
  d->num_batches = n / batch;
  d->images = n;
  d->infos.resize(d->num_batches);
  d->batches = [d, batch, input, dir = a.images](int k) -> Expected<std::map<std::string, Tensor>> {
    std::vector<std::string> paths;
    for (int i = k * batch; i < (k + 1) * batch; ++i) paths.push_back(dir + "/" + d->coco.images[i].file_name);
    std::vector<Image> imgs = QD_TRY(read_images(paths));
    std::vector<const Image*> ptrs;
    for (auto& im : imgs) ptrs.push_back(&im);
    Tensor x = QD_TRY(d->detector->preprocess(ptrs, &d->infos[k]));
    return std::map<std::string, Tensor>{{input, x}};
  };
  d->metric = std::make_unique<MapMetric>(&d->coco, ids, cat_ids, d->detector.get(), &d->infos, batch);
  return Status::ok();
}

std::string fmt(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

Json num_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

double share(int64_t part, int64_t total) { return total > 0 ? static_cast<double>(part) / total : 0.0; }

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

int run_sensitivity(const SensitivityArgs& a) {
  if (a.metric != "snr" && a.metric != "map" && a.metric != "top1") {
    return report(invalid("--metric must be snr, map or top1, got '" + a.metric + "'"));
  }
  if (a.int8_mode != "fake" && a.int8_mode != "exact") return report(invalid("--int8-mode must be fake or exact"));
  if (a.sweep != "both" && a.sweep != "float" && a.sweep != "int8") {
    return report(invalid("--sweep must be both, float or int8"));
  }
  if (a.batches < 1 || a.batch_size < 1 || a.batch_size > 256 || a.calib_batches < 0 || a.limit < 0) {
    return report(invalid("--batches must be >= 1, --calib-batches >= 0, --batch-size in 1..256, --limit >= 0"));
  }
  if (!a.data.empty() && !a.fmnist.empty()) return report(invalid("give either --data or --fmnist, not both"));
  if (!std::isnan(a.budget) && !std::isfinite(a.budget)) return report(invalid("--auto-fallback must be a number"));
  if (!a.precision_out.empty() && std::isnan(a.budget)) {
    return report(invalid("--precision-out writes the layers --auto-fallback chooses: give --auto-fallback BUDGET"));
  }
  // The FP32 engine tells the input, and is what the detector and the image batches preprocess for.
  ImageSource probe;  // the data's shapes, for a model whose input size is not fixed
  probe.data = a.data;
  probe.fmnist = a.fmnist;
  probe.batch_size = a.batch_size;
  auto spec = preprocess_from_flag(a.preprocess);
  if (!spec) return report(spec.status());
  probe.preprocess = *spec;
  auto engine = engine_for_data(a.model, probe);
  if (!engine) return report(engine.status());
  auto imported = import_onnx_file(a.model);
  if (!imported) return report(Status(imported.status()).prefix(a.model));
  Graph g = std::move(*imported);
  Int8Options int8;
  int8.mode = a.int8_mode == "exact" ? Int8Mode::kExact : Int8Mode::kFake;
  if (Status s = load_scales(a, g, engine->get(), &int8); !s) return report(s);

  auto data = std::make_unique<EvalData>();
  if (Status s = make_eval_data(a, engine->get(), data.get()); !s) return report(s);
  auto first = data->batches(0);
  if (!first) return report(first.status());
  PrepareOptions prep;
  for (const auto& [name, t] : *first) prep.input_shapes[name] = t.shape();
  if (Status s = prepare_graph(g, prep); !s) return report(s.prefix(a.model));

  SensitivityAnalysis::Options opt;
  opt.progress = !a.quiet;
  opt.only_layers = a.layers;
  SensitivityAnalysis an(std::move(g), int8, data->num_batches, data->batches, data->metric.get(), opt);
  if (Status s = an.init(); !s) return report(s);
  std::vector<double> per_output;
  if (a.metric == "snr") per_output = static_cast<SnrMetric*>(data->metric.get())->per_output();
  if (a.sweep != "int8") {
    if (Status s = an.sweep_float(); !s) return report(s);
  }
  if (a.sweep != "float") {
    if (Status s = an.sweep_int8(); !s) return report(s);
  }
  const auto& layers = an.layers();
  const auto order = an.ranking();
  const Int8Report& all = an.all_int8_report();

  FallbackResult fb;
  double target = NAN;
  if (!std::isnan(a.budget)) {
    target = a.metric == "snr" ? a.budget : an.fp32() - a.budget;
    auto r = an.auto_fallback(target);
    if (!r) return report(r.status());
    fb = std::move(*r);
  }

  // The ranked table.
  const char* unit = a.metric == "snr" ? "SNR dB (outputs vs FP32)" : a.metric == "map" ? "mAP50-95 %" : "top-1 %";
  std::printf("%s: %s, %d images, int8 %s, %zu of %zu quantizable layers swept\n", a.model.c_str(), unit,
              data->images, a.int8_mode.c_str(), layers.size(), an.all_int8_report().int8_nodes.size());
  std::printf("FP32 %s   all INT8 %s (%.1f%% of conv/matmul MACs in INT8)\n", fmt(an.fp32()).c_str(),
              fmt(an.all_int8()).c_str(), 100 * share(all.int8_macs, all.total_macs));
  const auto& outs = (*engine)->outputs();
  for (size_t o = 0; o < per_output.size() && o < outs.size(); ++o) {
    std::printf("  all INT8, output %s: %s dB\n", outs[o].name.c_str(), fmt(per_output[o]).c_str());
  }
  if (!all.no_scale_nodes.empty()) {
    std::printf("  %zu layers stay float in every configuration (no scale for their input or weights): %s\n",
                all.no_scale_nodes.size(), join(all.no_scale_nodes, ", ").c_str());
  }
  size_t w = 5;
  for (const auto& l : layers) w = std::max(w, l.name.size());
  std::printf("\n%4s  %-*s  %-6s %7s  %14s  %9s  %15s\n", "rank", static_cast<int>(w), "layer", "op", "MACs %",
              "layer in float", "delta", "only layer int8");
  for (size_t r = 0; r < order.size(); ++r) {
    const LayerSensitivity& l = layers[order[r]];
    const double delta = l.metric_float - an.all_int8();
    std::printf("%4zu  %-*s  %-6s %6.2f%%  %14s  %9s  %15s\n", r + 1, static_cast<int>(w), l.name.c_str(),
                l.op.c_str(), 100 * share(l.macs, all.total_macs), fmt(l.metric_float).c_str(),
                std::isnan(delta) ? "-" : ((delta >= 0 ? "+" : "") + fmt(delta)).c_str(), fmt(l.metric_int8).c_str());
  }
  if (!std::isnan(a.budget)) {
    std::printf("\nauto-fallback (target %s %s): %zu layer(s) in float -> %s, %.1f%% of conv/matmul MACs in INT8%s\n",
                a.metric == "snr" ? "SNR >=" : ">=", fmt(target).c_str(), fb.float_layers.size(),
                fmt(fb.metric).c_str(), 100 * share(fb.report.int8_macs, fb.report.total_macs),
                fb.reached ? "" : " (target NOT reached)");
    if (!fb.float_layers.empty()) std::printf("  --fp16-layers %s\n", join(fb.float_layers, ",").c_str());
  }

  if (!a.json.empty()) {
    Json j;
    j["model"] = a.model;
    j["metric"] = a.metric;
    j["unit"] = a.metric == "snr" ? "dB" : "percent";
    j["int8_mode"] = a.int8_mode;
    j["images"] = data->images;
    j["fp32"] = num_or_null(an.fp32());
    j["all_int8"] = num_or_null(an.all_int8());
    j["int8_macs_share"] = share(all.int8_macs, all.total_macs);
    if (!per_output.empty()) {
      Json po = Json::object();
      for (size_t o = 0; o < per_output.size() && o < outs.size(); ++o) po[outs[o].name] = num_or_null(per_output[o]);
      j["all_int8_snr_per_output"] = po;
    }
    j["no_scale_layers"] = all.no_scale_nodes;
    std::vector<int> rank(layers.size());
    for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int>(r + 1);
    Json arr = Json::array();
    for (size_t i = 0; i < layers.size(); ++i) {
      const LayerSensitivity& l = layers[i];
      arr.push_back({{"name", l.name}, {"op", l.op}, {"macs", l.macs}, {"macs_share", share(l.macs, all.total_macs)},
                     {"metric_layer_float", num_or_null(l.metric_float)},
                     {"delta_vs_all_int8", num_or_null(l.metric_float - an.all_int8())},
                     {"metric_only_layer_int8", num_or_null(l.metric_int8)}, {"rank", rank[i]}});
    }
    j["layers"] = arr;
    if (!std::isnan(a.budget)) {
      j["auto_fallback"] = {{"budget", a.budget},
                            {"target", num_or_null(target)},
                            {"float_layers", fb.float_layers},
                            {"metrics", fb.metrics},
                            {"metric", num_or_null(fb.metric)},
                            {"reached", fb.reached},
                            {"int8_macs_share", share(fb.report.int8_macs, fb.report.total_macs)}};
    }
    if (Status s = write_file_atomic(a.json, j.dump(2) + "\n"); !s) return report(s);
  }
  if (!a.svg.empty()) {
    BarChart c;
    c.title = "INT8 sensitivity per layer: " + std::filesystem::path(a.model).filename().string() + " (" +
              std::to_string(data->images) + " images, " + a.int8_mode + " int8)";
    for (const auto& l : layers) {
      c.rows.push_back(l.name);
      c.highlight.push_back(std::find(fb.float_layers.begin(), fb.float_layers.end(), l.name) != fb.float_layers.end());
    }
    c.highlight_legend = "kept in float by --auto-fallback " + fmt(a.budget);
    const std::string axis = a.metric == "snr" ? "SNR of the outputs vs FP32 (dB)"
                             : a.metric == "map" ? "mAP50-95 (%)" : "top-1 (%)";
    BarPanel pf, pi;
    pf.title = "this layer in float, the rest INT8";
    pi.title = "only this layer INT8, the rest float";
    pf.axis_label = pi.axis_label = axis;
    pf.base = pi.base = an.all_int8();  // bars show the change from all-INT8
    for (const auto& l : layers) {
      pf.values.push_back(l.metric_float);
      pi.values.push_back(l.metric_int8);
    }
    pf.lines.push_back({an.all_int8(), "all INT8: " + fmt(an.all_int8())});
    pi.lines.push_back(pf.lines.back());
    if (std::isfinite(an.fp32())) {
      pf.lines.push_back({an.fp32(), "FP32: " + fmt(an.fp32())});
      pi.lines.push_back({an.fp32(), "FP32: " + fmt(an.fp32())});
    }
    if (!std::isnan(target)) pf.lines.push_back({target, "fallback target: " + fmt(target)});
    if (a.sweep != "int8") c.panels.push_back(pf);
    if (a.sweep != "float") c.panels.push_back(pi);
    if (Status s = write_file_atomic(a.svg, svg_bar_chart(c)); !s) return report(s);
  }
  if (!a.precision_out.empty()) {
    // The format of --precision-config (qdq-translator's): activation scales, and the nodes to run in fp16.
    Json scales = Json::object();
    for (const auto& [name, s] : int8.act_scales) scales[name] = s;
    Json j = {{"int8_tensor_scales", scales}, {"fp16_nodes", fb.float_layers}};
    if (Status s = write_file_atomic(a.precision_out, j.dump(2) + "\n"); !s) return report(s);
  }
  return 0;
}

}  // namespace

RunFn add_sensitivity(CLI::App& app) {
  auto a = std::make_shared<SensitivityArgs>();
  auto* sub =
      app.add_subcommand("sensitivity", "Per-layer INT8 sensitivity (SNR, mAP or top-1) and automatic fallback");
  sub->add_option("model", a->model, "ONNX model")->required();
  sub->add_option("--metric", a->metric, "snr (outputs vs FP32), map (COCO mAP50-95) or top1 (Fashion-MNIST)")
      ->capture_default_str();
  sub->add_option("--data", a->data, "Images (folders or files) or tensor files (.npy, .npz): the SNR data, and the "
                                     "calibration data when there are no scales")->delimiter(',');
  sub->add_option("--fmnist", a->fmnist, "Fashion-MNIST IDX folder: SNR/top-1 on the test split, calibration on train");
  add_letterbox_option(sub, a->letterbox);
  add_preprocess_option(sub, a->preprocess);
  sub->add_option("--batches", a->batches, "SNR: batches of --data to measure on")->capture_default_str();
  sub->add_option("--batch-size", a->batch_size, "Images per batch when the model's batch is dynamic")
      ->capture_default_str();
  sub->add_option("--images", a->images, "map: folder of the val images");
  sub->add_option("--annotations", a->annotations, "map: COCO instances JSON of the val images");
  sub->add_option("--limit", a->limit, "map/top1: use the first N images (0: all)")->capture_default_str();
  sub->add_option("--calib-cache", a->calib_cache, "Activation scales (TensorRT calibration cache)");
  sub->add_option("--algo,--calib-algo", a->algo, "Calibration on the fly: minmax, entropy, percentile or mse")
      ->capture_default_str();
  sub->add_option("--percentile", a->percentile, "For --algo percentile")->capture_default_str();
  sub->add_option("--calib-batches", a->calib_batches,
                  "Calibration on the fly: batches to use (0: all), as calibrate's --batches")->capture_default_str();
  sub->add_option("--save-cache", a->save_cache, "Write the scales calibrated on the fly to this cache");
  sub->add_option("--int8-mode", a->int8_mode, "fake (fast) or exact (integer arithmetic)")->capture_default_str();
  sub->add_option("--sweep", a->sweep, "both, float (each layer alone in float) or int8 (each layer alone in INT8)")
      ->capture_default_str();
  sub->add_option("--layers", a->layers, "Sweep only these layers (names or regexes, comma separated; the others "
                                         "stay as in the configuration each sweep starts from)")->delimiter(',');
  sub->add_option("--json", a->json, "Write the results as JSON");
  sub->add_option("--svg", a->svg, "Write a bar chart of the sweeps (SVG)");
  sub->add_option("--auto-fallback", a->budget,
                  "Keep the most sensitive layers in float until the metric is within BUDGET: for snr the minimum "
                  "SNR in dB, for map/top1 the largest drop from FP32 in points");
  sub->add_option("--precision-out", a->precision_out,
                  "With --auto-fallback: write {\"int8_tensor_scales\": {...}, \"fp16_nodes\": [...]}");
  sub->add_flag("-q,--quiet", a->quiet, "No progress on stderr");
  return [a] { return run_sensitivity(*a); };
}

}  // namespace qd::cli
