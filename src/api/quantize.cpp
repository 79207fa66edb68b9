// include/qdeploy/quantize.h: calibration, sensitivity and scoring on the caller's data, over the library's
// calibrator (frontend/calibrate.h, the CLI's loop too), SensitivityAnalysis and evaluators.
#include "qdeploy/quantize.h"

#include <cmath>
#include <utility>

#include "eval/coco_categories.h"
#include "eval/coco_eval.h"
#include "eval/coco_json.h"
#include "eval/topk.h"
#include "frontend/calibrate.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "quant/calib_cache.h"
#include "quant/qdq.h"
#include "quant/sensitivity.h"
#include "runtime/public_types.h"

namespace qdeploy {

namespace {

qd::CalibCache to_cache(const Calibration& c) {
  qd::CalibCache cache;
  cache.algorithm = c.algorithm;
  cache.scales = c.scales;
  return cache;
}

// The source's batch k as library tensors.
qd::Expected<std::map<std::string, qd::Tensor>> fetch(const BatchSource& data, int k) {
  if (!data.batch) return qd::invalid("the batch source has no batch function");
  auto b = qd::from_public(data.batch(k));
  if (!b) return b.status();
  if (b->empty()) return qd::invalid("calibration batch " + std::to_string(k) + " holds no tensors");
  return qd::from_public(*b);
}

}  // namespace

Status Calibration::save(const std::string& path) const {
  return qd::to_public(qd::write_calib_cache(path, to_cache(*this)));
}

std::string Calibration::to_string() const { return qd::format_calib_cache(to_cache(*this)); }

Expected<Calibration> calibrate(const std::string& model_path, const BatchSource& data,
                                const CalibrationOptions& options) {
  auto algo = qd::parse_calib_algo(options.algo);
  if (!algo) return qd::to_public(algo.status());
  qd::CalibOptions opt;
  opt.algo = *algo;
  opt.percentile = options.percentile;
  opt.bins = options.bins;
  opt.float_head = options.float_head;
  if (opt.bins < 128) return Status(StatusCode::kInvalidArgument, "calibration bins must be at least 128");
  const int held = options.held_out_batches;
  if (held < 0 || (held > 0 && held >= data.num_batches)) {
    return Status(StatusCode::kInvalidArgument, "held_out_batches must leave at least one of the " +
                                                    std::to_string(data.num_batches) + " batches to calibrate on");
  }
  const int calib = data.num_batches - held;
  qd::HeldOutBatches held_out;
  if (held > 0) held_out = {held, [&](int k) { return fetch(data, calib + k); }};
  qd::CalibReport report;
  auto cache = qd::calibrate_batches(
      model_path, calib, [&](int k) { return fetch(data, k); }, opt, nullptr, &report, held_out);
  if (!cache) return qd::to_public(cache.status());
  Calibration c;
  c.algorithm = cache->algorithm;
  c.scales = cache->scales;
  c.float_head = report.float_head;
  for (const auto& m : report.model_candidates) c.auto_model_snr_db.emplace_back(m.algo, m.snr_db);
  c.auto_kept = report.model_pick;
  return c;
}

Expected<SensitivityReport> sensitivity(const std::string& model_path, const BatchSource& data,
                                        const SensitivityOptions& options) {
  if (data.num_batches <= 0) return Status(StatusCode::kInvalidArgument, "sensitivity needs at least one batch");
  auto imported = qd::import_onnx_file(model_path);
  if (!imported) return qd::to_public(imported.status());
  qd::Graph g = std::move(*imported);
  qd::Int8Options int8;
  int8.mode = options.exact ? qd::Int8Mode::kExact : qd::Int8Mode::kFake;
  if (qd::has_qdq(g)) {
    auto q = qd::strip_qdq(g);
    if (!q) return qd::to_public(q.status());
    int8.act_scales = q->act_scales;
    int8.weight_scales = q->weight_scales;
  }
  if (!options.calib_cache.empty()) {
    auto cache = qd::read_calib_cache(options.calib_cache);
    if (!cache) return qd::to_public(cache.status());
    QD_API_CHECK(qd::check_cache_names(*cache, g).prefix(options.calib_cache));
    for (const auto& [name, s] : cache->scales) int8.act_scales.emplace(name, s);
  }
  if (int8.act_scales.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "no activation scales: give SensitivityOptions::calib_cache (qdeploy::calibrate writes one) or a "
                  "QAT model with Q/DQ pairs");
  }
  auto first = fetch(data, 0);
  if (!first) return qd::to_public(first.status());
  qd::PrepareOptions prep;
  for (const auto& [name, t] : *first) prep.input_shapes[name] = t.shape();
  QD_API_CHECK(qd::prepare_graph(g, prep).prefix(model_path));

  qd::SnrMetric metric;
  qd::SensitivityAnalysis::Options opt;
  opt.progress = false;
  opt.only_layers = options.only_layers;
  qd::SensitivityAnalysis an(std::move(g), int8, data.num_batches, [&](int k) { return fetch(data, k); }, &metric,
                             opt);
  QD_API_CHECK(an.init());
  if (options.sweep_float) QD_API_CHECK(an.sweep_float());
  if (options.sweep_int8) QD_API_CHECK(an.sweep_int8());
  SensitivityReport r;
  r.all_int8_snr = an.all_int8();
  for (const qd::LayerSensitivity& l : an.layers()) {
    r.layers.push_back({l.name, l.op, l.macs, l.metric_float, l.metric_int8});
  }
  r.ranking = an.ranking();
  return r;
}

Expected<TopK> top_k(const HostTensor& logits, const std::vector<int>& labels) {
  auto t = qd::from_public(logits);
  if (!t) return qd::to_public(t.status());
  if (t->rank() != 2 || t->shape()[0] != static_cast<int64_t>(labels.size())) {
    return Status(StatusCode::kInvalidArgument, "top_k: logits must be [N, classes] with N = " +
                                                    std::to_string(labels.size()) + " (the labels' count)");
  }
  qd::TopK k;
  std::vector<int32_t> l(labels.begin(), labels.end());
  QD_API_CHECK(k.add(*t, l.data()));
  return TopK{k.count, k.correct1, k.correct5};
}

namespace {

Expected<CocoStats> score(const qd::CocoDataset& gt, const std::vector<qd::CocoDetection>& dets) {
  auto r = qd::evaluate_coco_bbox(gt, dets);
  if (!r) return qd::to_public(r.status());
  CocoStats s;
  for (int i = 0; i < qd::kCocoNumStats; ++i) {
    s.names.push_back(qd::kCocoStatNames[i]);
    s.values.push_back(r->stats[i]);
  }
  s.images = r->params.img_ids.size();
  s.detections = r->num_detections;
  return s;
}

}  // namespace

Expected<CocoStats> coco_eval(const std::string& annotations_path, const std::vector<CocoBox>& detections) {
  auto gt = qd::load_coco_instances(annotations_path);
  if (!gt) return qd::to_public(gt.status());
  std::vector<qd::CocoDetection> dets;
  dets.reserve(detections.size());
  for (const CocoBox& b : detections) {
    qd::CocoDetection d;
    d.image_id = b.image_id;
    d.category_id = b.category_id;
    d.bbox[0] = b.x;
    d.bbox[1] = b.y;
    d.bbox[2] = b.w;
    d.bbox[3] = b.h;
    d.score = b.score;
    dets.push_back(d);
  }
  return score(*gt, dets);
}

Expected<CocoStats> coco_eval(const std::string& annotations_path, const std::vector<int64_t>& image_ids,
                              const std::vector<std::vector<Detection>>& detections, int num_classes,
                              const std::string& class_map) {
  if (image_ids.size() != detections.size()) {
    return Status(StatusCode::kInvalidArgument, "coco_eval: " + std::to_string(detections.size()) +
                                                    " detection lists for " + std::to_string(image_ids.size()) +
                                                    " image ids (one list per image)");
  }
  auto gt = qd::load_coco_instances(annotations_path);
  if (!gt) return qd::to_public(gt.status());
  auto mapping = qd::parse_class_mapping(class_map);
  if (!mapping) return qd::to_public(mapping.status());
  auto cats = qd::class_to_category_ids(*mapping, *gt, num_classes);
  if (!cats) return qd::to_public(cats.status());
  std::vector<qd::Detection> flat;
  for (size_t i = 0; i < detections.size(); ++i) {
    for (const Detection& d : detections[i]) {
      flat.push_back({d.x1, d.y1, d.x2, d.y2, d.score, d.class_id, static_cast<int64_t>(i)});
    }
  }
  auto dets = qd::to_coco_detections(flat, image_ids, *cats);
  if (!dets) return qd::to_public(dets.status());
  return score(*gt, *dets);
}

}  // namespace qdeploy
