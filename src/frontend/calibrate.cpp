#include "frontend/calibrate.h"

#include "frontend/frontend.h"

namespace qd {

Expected<CalibCache> calibrate_batches(const std::string& model, int num_batches, const CalibBatchFn& batch,
                                       const CalibOptions& opt, const CalibProgressFn& progress,
                                       CalibReport* report) {
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
  if (report) *report = cal.report();
  return cal.result();
}

}  // namespace qd
