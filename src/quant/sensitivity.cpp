#include "quant/sensitivity.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "core/progress.h"
#include "ir/cost.h"
#include "ops/interpret.h"

namespace qd {

namespace {

// lower_int8 reads float_nodes as names or regexes; escaping makes a name match itself only ("model.1" would
// otherwise also match "model_1").
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

double snr_db(double signal, double noise) {
  if (noise <= 0) return INFINITY;
  return 10.0 * std::log10(signal / noise);
}

Status SnrMetric::set_reference(int batch, const std::vector<Tensor>& outputs) {
  if (batch < 0) return internal("negative batch index");
  if (ref_.size() <= static_cast<size_t>(batch)) ref_.resize(batch + 1);
  ref_[batch] = outputs;
  return Status::ok();
}

void SnrMetric::reset() {
  signal_.assign(signal_.size(), 0.0);
  noise_.assign(noise_.size(), 0.0);
}

Status SnrMetric::add(int batch, const std::vector<Tensor>& outputs) {
  if (batch < 0 || static_cast<size_t>(batch) >= ref_.size() || ref_[batch].size() != outputs.size()) {
    return internal("SNR: no reference outputs for batch " + std::to_string(batch));
  }
  signal_.resize(outputs.size(), 0.0);
  noise_.resize(outputs.size(), 0.0);
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& r = ref_[batch][o];
    const Tensor& q = outputs[o];
    if (r.dtype() != DType::kFloat32) continue;  // integer outputs (indices, counts) carry no signal to compare
    if (q.dtype() != DType::kFloat32 || q.shape() != r.shape()) {
      return internal("SNR: output " + std::to_string(o) + " changed shape or type under INT8");
    }
    const float* rp = r.data<float>();
    const float* qp = q.data<float>();
    double s = 0, n = 0;
    for (int64_t i = 0; i < r.numel(); ++i) {
      const double d = static_cast<double>(rp[i]) - qp[i];
      s += static_cast<double>(rp[i]) * rp[i];
      n += d * d;
    }
    signal_[o] += s;
    noise_[o] += n;
  }
  return Status::ok();
}

Expected<double> SnrMetric::value() const {
  double s = 0, n = 0;
  for (size_t o = 0; o < signal_.size(); ++o) {
    s += signal_[o];
    n += noise_[o];
  }
  return snr_db(s, n);
}

std::vector<double> SnrMetric::per_output() const {
  std::vector<double> out;
  for (size_t o = 0; o < signal_.size(); ++o) out.push_back(snr_db(signal_[o], noise_[o]));
  return out;
}

SensitivityAnalysis::SensitivityAnalysis(Graph prepared, Int8Options int8, int num_batches, BatchFn batches,
                                         SensitivityMetric* metric, Options opt)
    : prepared_(std::move(prepared)),
      int8_(std::move(int8)),
      num_batches_(num_batches),
      batches_(std::move(batches)),
      metric_(metric),
      opt_(opt) {}

Expected<std::map<std::string, Tensor>> SensitivityAnalysis::batch(int k) {
  if (static_cast<size_t>(k) < cache_.size() && !cache_[k].empty()) return cache_[k];
  std::map<std::string, Tensor> feeds = QD_TRY(batches_(k));
  size_t bytes = 0;
  for (const auto& [name, t] : feeds) bytes += t.nbytes();
  if (cached_bytes_ + bytes <= opt_.cache_bytes) {
    if (cache_.size() <= static_cast<size_t>(k)) cache_.resize(k + 1);
    cache_[k] = feeds;
    cached_bytes_ += bytes;
  }
  return feeds;
}

Expected<double> SensitivityAnalysis::run(const Graph& g, bool reference) {
  metric_->reset();
  for (int k = 0; k < num_batches_; ++k) {
    auto feeds = QD_TRY(batch(k));
    std::vector<Tensor> outs = QD_TRY(run_reference(g, feeds));
    if (reference) QD_RETURN_IF_ERROR(metric_->set_reference(k, outs));
    QD_RETURN_IF_ERROR(metric_->add(k, outs));
    if (tick_) tick_();
  }
  return metric_->value();
}

Expected<double> SensitivityAnalysis::measure(const std::vector<std::string>& float_layers, Int8Report* report) {
  Graph g = prepared_;
  Int8Options o = int8_;
  for (const auto& name : float_layers) o.float_nodes.push_back(regex_escape(name));
  Int8Report rep = QD_TRY(lower_int8(g, o));
  if (report) *report = std::move(rep);
  return run(g, false);
}

Expected<double> SensitivityAnalysis::measure_scales(const std::map<std::string, float>& act_scales) {
  Graph g = prepared_;
  Int8Options o = int8_;
  o.act_scales = act_scales;
  QD_RETURN_IF_ERROR(lower_int8(g, o).status());
  return run(g, false);
}

Status SensitivityAnalysis::init() {
  if (num_batches_ < 1) return invalid("sensitivity analysis needs at least one batch of data");
  std::unique_ptr<Progress> progress;
  int64_t done = 0;
  if (opt_.progress) {
    progress = std::make_unique<Progress>("sensitivity: fp32 and all-int8", 2 * num_batches_);
    tick_ = [&] { progress->update(++done); };
  }
  auto fp32 = run(prepared_, true);
  auto int8 = fp32 ? measure({}, &all_int8_report_) : fp32;
  tick_ = nullptr;
  if (!fp32) return fp32.status();
  if (!int8) return int8.status();
  fp32_ = *fp32;
  all_int8_ = *int8;

  std::map<std::string, std::vector<const Node*>> by_name;
  for (const Node& n : prepared_.nodes) by_name[n.name].push_back(&n);
  layers_.clear();
  quantizable_ = all_int8_report_.int8_nodes;
  for (const auto& name : quantizable_) {
    const auto& nodes = by_name[name];
    if (nodes.size() != 1) {
      return invalid("node name '" + name + "' is used by " + std::to_string(nodes.size()) +
                     " nodes; per-layer analysis needs unique node names (rename the nodes in the ONNX file)");
    }
    if (opt_.only_layers.empty() || matches_any(name, opt_.only_layers)) {
      layers_.push_back({name, op_name(nodes[0]->op), node_macs(prepared_, *nodes[0])});
    }
  }
  if (quantizable_.empty()) {
    return invalid("no layer runs in INT8 (no Conv/Gemm/MatMul input has an activation scale): check the scales");
  }
  if (layers_.empty()) return invalid("no INT8 layer matches the layers asked for (" + opt_.only_layers[0] + ", ...)");
  return Status::ok();
}

Status SensitivityAnalysis::sweep(bool keep_float) {
  const int64_t total = static_cast<int64_t>(layers_.size()) * num_batches_;
  std::unique_ptr<Progress> progress;
  int64_t done = 0;
  std::string current;
  if (opt_.progress) {
    progress = std::make_unique<Progress>(
        keep_float ? "sensitivity: one layer in float" : "sensitivity: one layer in int8", total);
    tick_ = [&] { progress->update(++done, current); };
  }
  Status st = Status::ok();
  for (size_t i = 0; i < layers_.size() && st.is_ok(); ++i) {
    current = layers_[i].name;
    std::vector<std::string> floats;
    if (keep_float) {
      floats = {layers_[i].name};
    } else {
      for (const auto& name : quantizable_) {
        if (name != layers_[i].name) floats.push_back(name);
      }
    }
    auto m = measure(floats);
    if (!m) st = m.status();
    else (keep_float ? layers_[i].metric_float : layers_[i].metric_int8) = *m;
  }
  tick_ = nullptr;
  return st;
}

Status SensitivityAnalysis::sweep_float() { return sweep(true); }
Status SensitivityAnalysis::sweep_int8() { return sweep(false); }

std::vector<size_t> SensitivityAnalysis::ranking() const {
  std::vector<size_t> order(layers_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const bool by_float = std::any_of(layers_.begin(), layers_.end(),
                                    [](const LayerSensitivity& l) { return !std::isnan(l.metric_float); });
  // Higher "in float" metric first, or lower "alone INT8" metric first; unmeasured (NaN) last; stable in model order.
  auto key = [&](const LayerSensitivity& l) {
    const double v = by_float ? l.metric_float : -l.metric_int8;
    return std::isnan(v) ? -INFINITY : v;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return key(layers_[a]) > key(layers_[b]); });
  return order;
}

Expected<FallbackResult> SensitivityAnalysis::auto_fallback(double target) {
  FallbackResult r;
  r.metric = all_int8_;
  r.report = all_int8_report_;
  for (size_t i : ranking()) {
    if (r.metric >= target) break;
    r.float_layers.push_back(layers_[i].name);
    r.metric = QD_TRY(measure(r.float_layers, &r.report));
    r.metrics.push_back(r.metric);
    if (opt_.progress) {
      std::fprintf(stderr, "auto-fallback: %zu float: + %s -> %.4g\n", r.float_layers.size(), layers_[i].name.c_str(),
                   r.metric);
    }
  }
  r.reached = r.metric >= target;
  return r;
}

}  // namespace qd
