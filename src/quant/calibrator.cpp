#include "quant/calibrator.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "ops/interpret.h"
#include "quant/precision_plan.h"

namespace qd {

Expected<CalibAlgo> parse_calib_algo(const std::string& name) {
  if (name == "minmax") return CalibAlgo::kMinMax;
  if (name == "entropy") return CalibAlgo::kEntropy;
  if (name == "percentile") return CalibAlgo::kPercentile;
  if (name == "mse") return CalibAlgo::kMse;
  if (name == "auto") return CalibAlgo::kAuto;
  return invalid("the calibration algorithm must be minmax, entropy, percentile, mse or auto, got '" + name + "'");
}

const char* calib_algo_trt_name(CalibAlgo a) {
  switch (a) {
    case CalibAlgo::kMinMax: return "MinMaxCalibration";
    case CalibAlgo::kEntropy: return "EntropyCalibration2";
    case CalibAlgo::kPercentile: return "PercentileCalibration";
    case CalibAlgo::kMse: return "MseCalibration";
    case CalibAlgo::kAuto: return "EntropyCalibration2";
  }
  return "?";
}

const char* calib_algo_name(CalibAlgo a) {
  switch (a) {
    case CalibAlgo::kMinMax: return "minmax";
    case CalibAlgo::kEntropy: return "entropy";
    case CalibAlgo::kPercentile: return "percentile";
    case CalibAlgo::kMse: return "mse";
    case CalibAlgo::kAuto: return "auto";
  }
  return "?";
}

double CalibChoice::sqnr_db() const {
  const double e = mse[static_cast<int>(chosen)];
  if (e <= 0) return INFINITY;
  return 10.0 * std::log10(signal / e);
}

double quant_error_from_histogram(const std::vector<double>& hist, double max, double amax) {
  const int bins = static_cast<int>(hist.size());
  double total = 0, err = 0;
  if (!(max > 0) || !(amax > 0)) return 0;
  const double width = max / bins, step = amax / 127.0;
  constexpr int kPoints = 8;
  for (int b = 0; b < bins; ++b) {
    if (hist[b] == 0) continue;
    total += hist[b];
    double e = 0;
    for (int k = 0; k < kPoints; ++k) {
      const double x = (b + (k + 0.5) / kPoints) * width;
      const double d = x > amax ? x - amax : x - std::min(127.0, std::nearbyint(x / step)) * step;
      e += d * d;
    }
    err += hist[b] * e / kPoints;
  }
  return total > 0 ? err / total : 0;
}

// Defined after amax_from_histogram, whose auto case it serves.
static CalibChoice auto_choice(const std::vector<double>& hist, double max, const CalibOptions& opt);

std::vector<std::string> head_tensors(const Graph& g) {
  std::vector<int> producer(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int o : g.nodes[i].outputs) {
      if (o >= 0) producer[o] = static_cast<int>(i);
    }
  }
  std::set<int> conv_inputs;
  for (const Node& n : g.nodes) {
    if (is_int8_compute(n.op) && !n.inputs.empty() && n.inputs[0] >= 0) conv_inputs.insert(n.inputs[0]);
  }
  std::vector<char> head(g.values.size(), 0);
  for (int output : g.outputs) {  // each output's region on its own: a plain output next to a detector's stays out
    std::vector<char> seen(g.values.size(), 0);
    std::vector<int> stack{output};
    bool sigmoid = false, concat = false;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      // A tensor a Conv/Gemm/MatMul reads belongs to the quantized network: the region stops there.
      if (v < 0 || seen[v] || g.is_constant(v) || conv_inputs.count(v)) continue;
      seen[v] = 1;
      const int p = producer[v];
      if (p < 0 || is_int8_compute(g.nodes[p].op)) continue;  // a graph input, or the head's last Conv
      sigmoid |= g.nodes[p].op == OpType::Sigmoid;
      concat |= g.nodes[p].op == OpType::Concat;
      for (int in : g.nodes[p].inputs) stack.push_back(in);
    }
    if (!sigmoid || !concat) continue;  // a decode joins boxes and scores (or levels); a lone Sigmoid map keeps its scale
    for (size_t v = 0; v < seen.size(); ++v) head[v] |= seen[v];
  }
  std::vector<std::string> out;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (head[v] && g.values[v].dtype == DType::kFloat32) out.push_back(g.values[v].name);
  }
  return out;
}

Calibrator::Calibrator(const Graph& g, CalibOptions opt) : g_(g), opt_(opt) {
  if (opt_.float_head) head_ = head_tensors(g);
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
    case CalibAlgo::kAuto: {
      const CalibChoice c = auto_choice(hist, max, opt);
      return c.amax[static_cast<int>(c.chosen)];
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

static CalibChoice auto_choice(const std::vector<double>& hist, double max, const CalibOptions& opt) {
  CalibChoice c;
  c.max = max;
  double total = 0, sq = 0;
  const double width = max / static_cast<double>(hist.size());
  for (size_t b = 0; b < hist.size(); ++b) {
    const double x = (b + 0.5) * width;
    total += hist[b];
    sq += hist[b] * x * x;
  }
  c.signal = total > 0 ? sq / total : 0;
  int best = -1;
  for (int a = 0; a < 4; ++a) {
    CalibOptions o = opt;
    o.algo = static_cast<CalibAlgo>(a);
    c.amax[a] = Calibrator::amax_from_histogram(hist, max, o);
    c.mse[a] = quant_error_from_histogram(hist, max, c.amax[a]);
    if (best < 0 || c.mse[a] < c.mse[best] || (c.mse[a] == c.mse[best] && c.amax[a] < c.amax[best])) best = a;
  }
  c.chosen = static_cast<CalibAlgo>(best);
  return c;
}

double Calibrator::amax_of(const std::string& name, double max, CalibChoice* choice) const {
  auto h = hist_.find(name);
  if (!needs_histograms() || h == hist_.end()) return max;
  if (opt_.algo != CalibAlgo::kAuto) return amax_from_histogram(h->second, max, opt_);
  CalibChoice c = auto_choice(h->second, max, opt_);
  c.tensor = name;
  if (choice) *choice = c;
  return c.amax[static_cast<int>(c.chosen)];
}

CalibCache Calibrator::result() const {
  CalibCache cache;
  cache.algorithm = calib_algo_trt_name(opt_.algo);
  const std::set<std::string> head(head_.begin(), head_.end());
  for (const auto& name : order_) {
    auto m = max_.find(name);
    if (m == max_.end() || head.count(name)) continue;
    double amax = amax_of(name, m->second, nullptr);
    if (!(amax > 0)) amax = 1.0;
    cache.set(name, static_cast<float>(amax / 127.0));
  }
  return cache;
}

std::vector<CalibChoice> Calibrator::choices() const {
  std::vector<CalibChoice> out;
  if (opt_.algo != CalibAlgo::kAuto) return out;
  const std::set<std::string> head(head_.begin(), head_.end());
  for (const auto& name : order_) {
    auto m = max_.find(name);
    if (m == max_.end() || head.count(name) || hist_.find(name) == hist_.end()) continue;
    CalibChoice c;
    amax_of(name, m->second, &c);
    out.push_back(c);
  }
  return out;
}

}  // namespace qd
