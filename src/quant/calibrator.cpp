#include "quant/calibrator.h"

#include <cmath>

#include "ops/interpret.h"

namespace qd {

Expected<CalibAlgo> parse_calib_algo(const std::string& name) {
  if (name == "minmax") return CalibAlgo::kMinMax;
  if (name == "entropy") return CalibAlgo::kEntropy;
  if (name == "percentile") return CalibAlgo::kPercentile;
  if (name == "mse") return CalibAlgo::kMse;
  return invalid("--algo must be minmax, entropy, percentile or mse, got '" + name + "'");
}

const char* calib_algo_trt_name(CalibAlgo a) {
  switch (a) {
    case CalibAlgo::kMinMax: return "MinMaxCalibration";
    case CalibAlgo::kEntropy: return "EntropyCalibration2";
    case CalibAlgo::kPercentile: return "PercentileCalibration";
    case CalibAlgo::kMse: return "MseCalibration";
  }
  return "?";
}

Calibrator::Calibrator(const Graph& g, CalibOptions opt) : g_(g), opt_(opt) {
  for (int v : g.inputs) {
    if (g.values[v].dtype == DType::kFloat32) order_.push_back(g.values[v].name);
  }
  for (const Node& n : g.nodes) {
    for (int o : n.outputs) {
      if (o >= 0 && g.values[o].dtype == DType::kFloat32) order_.push_back(g.values[o].name);
    }
  }
}

void Calibrator::add(const std::string& name, const Tensor& t, bool histogram) {
  if (t.dtype() != DType::kFloat32) return;
  const float* p = t.data<float>();
  const int64_t n = t.numel();
  if (!histogram) {
    double m = max_[name];
    for (int64_t i = 0; i < n; ++i) {
      const double a = std::fabs(static_cast<double>(p[i]));
      if (a > m && std::isfinite(a)) m = a;
    }
    max_[name] = m;
    return;
  }
  const double m = max_[name];
  auto& h = hist_[name];
  if (h.empty()) h.assign(static_cast<size_t>(opt_.bins), 0.0);
  if (m <= 0) {
    h[0] += static_cast<double>(n);
    return;
  }
  const double inv = opt_.bins / m;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(p[i]));
    if (!std::isfinite(a)) continue;
    const int b = std::min(opt_.bins - 1, static_cast<int>(a * inv));
    h[static_cast<size_t>(b)] += 1.0;
  }
}

Status Calibrator::run(const std::map<std::string, Tensor>& feeds, bool histogram) {
  for (const auto& [name, t] : feeds) add(name, t, histogram);
  ReferenceRunOptions ro;
  ro.observer = [&](const Node& n, const std::vector<const Tensor*>& outs) {
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] && n.outputs[i] >= 0) add(g_.values[n.outputs[i]].name, *outs[i], histogram);
    }
  };
  return run_reference(g_, feeds, ro).status();
}

Status Calibrator::observe_range(const std::map<std::string, Tensor>& feeds) { return run(feeds, false); }
Status Calibrator::observe_histogram(const std::map<std::string, Tensor>& feeds) { return run(feeds, true); }

namespace {

double kl_threshold(const std::vector<double>& hist, int levels) {
  const int bins = static_cast<int>(hist.size());
  double best_kl = INFINITY;
  int best_i = bins;
  std::vector<double> p, q;
  for (int i = levels; i <= bins; ++i) {
    p.assign(hist.begin(), hist.begin() + i);
    double outliers = 0;
    for (int j = i; j < bins; ++j) outliers += hist[j];
    p[i - 1] += outliers;
    q.assign(static_cast<size_t>(i), 0.0);
    for (int l = 0; l < levels; ++l) {  // level l covers bins [start, end)
      const int start = static_cast<int>(static_cast<int64_t>(l) * i / levels);
      const int end = static_cast<int>(static_cast<int64_t>(l + 1) * i / levels);
      double sum = 0;
      int nonzero = 0;
      for (int j = start; j < end; ++j) {
        sum += hist[j];  // the clipped mass stays with P only, as in TensorRT's calibrator
        nonzero += p[j] > 0;
      }
      if (nonzero == 0) continue;
      for (int j = start; j < end; ++j) {
        if (p[j] > 0) q[j] = sum / nonzero;
      }
    }
    double ps = 0, qs = 0;
    for (int j = 0; j < i; ++j) {
      ps += p[j];
      qs += q[j];
    }
    if (ps <= 0 || qs <= 0) continue;
    double kl = 0;
    for (int j = 0; j < i; ++j) {
      if (p[j] <= 0) continue;
      const double pj = p[j] / ps;
      const double qj = q[j] > 0 ? q[j] / qs : 1e-12;  // only the last bin (holding the outliers) can get here
      kl += pj * std::log(pj / qj);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best_i = i;
    }
  }
  return best_i;
}

}  // namespace

double Calibrator::amax_from_histogram(const std::vector<double>& hist, double max, const CalibOptions& opt) {
  const int bins = static_cast<int>(hist.size());
  const double width = max / bins;
  double total = 0;
  for (double h : hist) total += h;
  if (max <= 0 || total <= 0) return max;
  switch (opt.algo) {
    case CalibAlgo::kMinMax:
      return max;
    case CalibAlgo::kPercentile: {
      const double target = total * opt.percentile / 100.0;
      double cum = 0;
      for (int b = 0; b < bins; ++b) {
        cum += hist[b];
        if (cum >= target) return (b + 1) * width;
      }
      return max;
    }
    case CalibAlgo::kMse: {
      double best = INFINITY, best_t = max;
      for (int i = std::max(1, bins / 16); i <= bins; i += 16) {
        const double t = i * width, step = t / 127.0;
        double err = 0;
        for (int b = 0; b < bins; ++b) {
          if (hist[b] == 0) continue;
          const double c = (b + 0.5) * width;
          const double d = c > t ? c - t : c - std::nearbyint(c / step) * step;
          err += hist[b] * d * d;
        }
        if (err < best) {
          best = err;
          best_t = t;
        }
      }
      return best_t;
    }
    case CalibAlgo::kEntropy: {
      // Post-ReLU tensors hold a large share of exact zeros in bin 0; left as is, that spike dominates P and drags
      // the threshold far too low. Like NVIDIA's pytorch-quantization, bin 0 takes bin 1's count for the search.
      std::vector<double> h = hist;
      if (h.size() > 1) h[0] = h[1];
      return kl_threshold(h, 128) * width;
    }
  }
  return max;
}

CalibCache Calibrator::result() const {
  CalibCache cache;
  cache.algorithm = calib_algo_trt_name(opt_.algo);
  for (const auto& name : order_) {
    auto m = max_.find(name);
    if (m == max_.end()) continue;
    double amax = m->second;
    if (needs_histograms()) {
      auto h = hist_.find(name);
      if (h != hist_.end()) amax = amax_from_histogram(h->second, m->second, opt_);
    }
    if (!(amax > 0)) amax = 1.0;
    cache.set(name, static_cast<float>(amax / 127.0));
  }
  return cache;
}

}  // namespace qd
