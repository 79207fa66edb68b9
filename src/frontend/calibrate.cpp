#include "frontend/calibrate.h"

#include "frontend/frontend.h"
#include "quant/int8.h"
#include "quant/sensitivity.h"

namespace qd {

namespace {

// auto's check of the whole model (HeldOutBatches): replaces `cache` by the configuration kept and records every
// candidate's output SNR in `report`.
Status select_by_output_snr(const Graph& prepared, const HeldOutBatches& held, CalibCache* cache,
                            CalibReport* report) {
  std::vector<std::pair<std::string, CalibCache>> candidates{{"per-tensor", *cache}};
  for (int a = 0; a < 4; ++a) {
    CalibCache c = *cache;
    for (const CalibChoice& ch : report->choices) {
      c.set(ch.tensor, static_cast<float>((ch.amax[a] > 0 ? ch.amax[a] : 1.0) / 127.0));
    }
    candidates.emplace_back(calib_algo_name(static_cast<CalibAlgo>(a)), std::move(c));
  }
  // One analysis: the FP32 reference and the held-out batches once, then each candidate's scales.
  auto scales_of = [](const CalibCache& c) { return std::map<std::string, float>(c.scales.begin(), c.scales.end()); };
  Int8Options int8;
  int8.mode = Int8Mode::kFake;
  int8.act_scales = scales_of(candidates[0].second);
  SnrMetric snr;
  SensitivityAnalysis::Options o;
  o.progress = false;
  SensitivityAnalysis an(prepared, int8, held.num_batches, held.batch, &snr, o);
  QD_RETURN_IF_ERROR(an.init());
  report->model_candidates.push_back({candidates[0].first, an.all_int8()});
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    const double db = QD_TRY(an.measure_scales(scales_of(candidates[i].second)));
    report->model_candidates.push_back({candidates[i].first, db});
    if (best == 0 || db > report->model_candidates[best].snr_db) best = i;
  }
  if (report->model_candidates[best].snr_db < report->model_candidates[0].snr_db + kAutoModelMarginDb) best = 0;
  const std::map<std::string, Tensor> first = QD_TRY(held.batch(0));  // every batch has its shapes
  int64_t images = 1;
  if (!first.empty() && first.begin()->second.rank() > 0) images = first.begin()->second.shape()[0];
  report->model_pick = candidates[best].first;
  report->held_out_images = static_cast<int>(images * held.num_batches);
  *cache = std::move(candidates[best].second);
  return Status::ok();
}

}  // namespace

Expected<CalibCache> calibrate_batches(const std::string& model, int num_batches, const CalibBatchFn& batch,
                                       const CalibOptions& opt, const CalibProgressFn& progress,
                                       CalibReport* report, const HeldOutBatches& held) {
  if (num_batches <= 0) return invalid("calibration needs at least one batch of model inputs, got none");
  std::map<std::string, Tensor> first = QD_TRY(batch(0));
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : first) shapes[name] = t.shape();
  Graph g = QD_TRY(load_prepared(model, shapes));
  Calibrator cal(g, opt);
  const int passes = cal.needs_histograms() ? 2 : 1;
  const int64_t total = static_cast<int64_t>(passes) * num_batches;
  for (int pass = 0; pass < passes; ++pass) {
    for (int k = 0; k < num_batches; ++k) {
      std::map<std::string, Tensor> x = k == 0 && pass == 0 ? std::move(first) : QD_TRY(batch(k));
      for (const auto& [name, t] : x) {
        auto it = shapes.find(name);
        if (it == shapes.end() || it->second != t.shape()) {
          return invalid("calibration batch " + std::to_string(k) + ": input '" + name + "' has shape " +
                         shape_str(t.shape()) + ", but the first batch's was " +
                         (it == shapes.end() ? std::string("absent") : shape_str(it->second)) +
                         "; every batch must have the same inputs and shapes (drop or pad a short last batch)");
        }
      }
      QD_RETURN_IF_ERROR(pass == 0 ? cal.observe_range(x) : cal.observe_histogram(x));
      if (progress) progress(static_cast<int64_t>(pass) * num_batches + k + 1, total, passes);
    }
  }
  CalibReport local;
  CalibReport* r = report ? report : &local;
  *r = cal.report();
  CalibCache cache = cal.result();
  if (opt.algo != CalibAlgo::kAuto || r->choices.empty() || held.num_batches <= 0) return cache;
  QD_RETURN_IF_ERROR(select_by_output_snr(g, held, &cache, r));
  return cache;
}

}  // namespace qd
