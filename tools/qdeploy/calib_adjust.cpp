#include "calib_adjust.h"

#include <cmath>
#include <cstdio>

#include "core/progress.h"
#include "frontend/frontend.h"
#include "onnx/exporter.h"
#include "onnx/importer.h"

namespace qd::cli {

namespace {

constexpr CalibAlgo kCandidates[4] = {CalibAlgo::kMinMax, CalibAlgo::kEntropy, CalibAlgo::kPercentile, CalibAlgo::kMse};

double finite_or(double v, double other) { return std::isfinite(v) ? v : other; }

}  // namespace

void print_calib_report(const CalibReport& r) {
  if (!r.choices.empty()) {
    int count[4] = {0, 0, 0, 0};
    for (const CalibChoice& c : r.choices) ++count[static_cast<int>(c.chosen)];
    {
      std::printf("%-48s %-10s %10s %10s %10s %10s %10s %8s\n", "tensor", "auto", "max|x|", "minmax", "entropy",
                  "percentile", "mse", "SQNR dB");
      for (const CalibChoice& c : r.choices) {
        std::printf("%-48s %-10s %10.4g", c.tensor.c_str(), calib_algo_name(c.chosen), c.max);
        for (int a = 0; a < 4; ++a) std::printf(" %9.4g%s", c.amax[a], a == static_cast<int>(c.chosen) ? "*" : " ");
        std::printf(" %8.2f\n", finite_or(c.sqnr_db(), 999.0));
      }
    }
    std::printf("auto chose, per tensor:");
    for (int a = 0; a < 4; ++a) std::printf(" %s %d%s", calib_algo_name(kCandidates[a]), count[a], a < 3 ? "," : "\n");
    if (r.model_candidates.empty()) {
      std::printf("auto: no data beyond the calibration batches to check the whole model on (give more than "
                  "--batches), so the per-tensor picks stand\n");
    } else {
      std::printf("auto, the whole model on %d held-out images (output SNR against FP32):", r.held_out_images);
      for (size_t i = 0; i < r.model_candidates.size(); ++i) {
        std::printf(" %s %.2f dB%s", r.model_candidates[i].algo.c_str(), r.model_candidates[i].snr_db,
                    i + 1 < r.model_candidates.size() ? "," : "");
      }
      std::printf("; kept %s\n", r.model_pick.c_str());
    }
  }
  if (!r.float_head.empty()) {
    std::printf("detection-head rule: %zu tensors after the head's last convs left without a scale (float), e.g. %s\n",
                r.float_head.size(), r.float_head.back().c_str());
  }
}

Json calib_report_json(const CalibReport& r) {
  Json j;
  Json tensors = Json::array();
  for (const CalibChoice& c : r.choices) {
    Json t;
    t["tensor"] = c.tensor;
    t["chosen"] = calib_algo_name(c.chosen);
    t["max"] = c.max;
    t["amax"] = c.amax[static_cast<int>(c.chosen)];
    t["sqnr_db"] = finite_or(c.sqnr_db(), 999.0);
    Json cand;
    for (int a = 0; a < 4; ++a) cand[calib_algo_name(kCandidates[a])] = {{"amax", c.amax[a]}, {"mse", c.mse[a]}};
    t["candidates"] = cand;
    tensors.push_back(t);
  }
  j["auto_choices"] = tensors;
  if (!r.model_candidates.empty()) {
    Json cand = Json::object();
    for (const CalibModelCandidate& c : r.model_candidates) cand[c.algo] = finite_or(c.snr_db, 999.0);
    j["auto_model"] = {{"held_out_images", r.held_out_images}, {"output_snr_db", cand}, {"kept", r.model_pick}};
  }
  j["float_head_tensors"] = r.float_head;
  return j;
}

Expected<WeightAdjustResult> adjust_and_export(const std::string& model, const ImageBatches& data,
                                               const CalibCache& cache, const WeightAdjustOptions& opt,
                                               const std::string& out_onnx, bool quiet) {
  std::map<std::string, Tensor> first = QD_TRY(data.feeds(0));
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : first) shapes[name] = t.shape();
  const Graph prepared = QD_TRY(load_prepared(model, shapes));
  std::map<std::string, float> scales(cache.scales.begin(), cache.scales.end());
  WeightAdjustOptions o = opt;
  Progress progress(std::string("fit weights (") + (opt.adaround ? "adaround" : "") +
                        (opt.adaround && opt.bias_correction ? " + " : "") +
                        (opt.bias_correction ? "bias correction" : "") + ")",
                    data.num_batches());
  if (!quiet) o.progress = [&](int done) { progress.update(done, "batches"); };
  auto feeds = [&](int k) -> Expected<std::map<std::string, Tensor>> {
    if (k == 0) return first;
    return data.feeds(k);
  };
  WeightAdjustResult r = QD_TRY(adjust_weights(prepared, scales, data.num_batches(), feeds, o));
  Graph g = QD_TRY(import_onnx_file(model));
  QD_RETURN_IF_ERROR(apply_weight_adjustments(g, r).prefix(out_onnx));
  QD_RETURN_IF_ERROR(export_onnx_file(g, out_onnx));
  if (!quiet) {
    std::printf("%-40s %8s %12s %12s %8s %10s\n", "conv", "samples", "err nearest", "err adjusted", "flipped",
                "bias rms");
    double e0 = 0, e1 = 0;
    for (const LayerAdjustment& l : r.layers) {
      const std::string flipped = opt.adaround && !l.rounding_fitted ? "few smp" : std::to_string(l.flipped);
      std::printf("%-40s %8lld %12.4g %12.4g %8s %10.4g\n", l.node.c_str(), static_cast<long long>(l.samples),
                  l.err_nearest, l.err_adjusted, flipped.c_str(), l.bias_shift_rms);
      e0 += l.err_nearest;
      e1 += l.err_adjusted;
    }
    std::printf("%zu convs adjusted; summed output error %.4g -> %.4g (sampled calibration positions)\n",
                r.layers.size(), e0, e1);
    if (opt.adaround) {
      std::printf("(few smp: fewer samples than %d per weight of a patch; that conv keeps round-to-nearest)\n",
                  opt.min_samples_per_weight);
    }
  }
  return r;
}

Json weight_adjust_json(const WeightAdjustResult& r) {
  Json layers = Json::array();
  for (const LayerAdjustment& l : r.layers) {
    layers.push_back({{"node", l.node},
                      {"weight", l.weight},
                      {"samples", l.samples},
                      {"err_nearest", l.err_nearest},
                      {"err_adjusted", l.err_adjusted},
                      {"flipped", l.flipped},
                      {"rounding_fitted", l.rounding_fitted},
                      {"bias_shift_rms", l.bias_shift_rms}});
  }
  return layers;
}

}  // namespace qd::cli
