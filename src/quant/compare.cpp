#include "quant/compare.h"

#include <algorithm>
#include <set>

#include "ops/interpret.h"
#include "quant/sensitivity.h"

namespace qd {

double TensorCompare::snr_db() const { return qd::snr_db(ref_sq, err_sq); }

double TensorCompare::cosine() const {
  if (ref_sq <= 0 && test_sq <= 0) return 1.0;
  if (ref_sq <= 0 || test_sq <= 0) return 0.0;
  return dot / std::sqrt(ref_sq * test_sq);
}

Status TensorComparison::add(const std::string& tensor, const Tensor& ref, const Tensor& test, float scale) {
  if (ref.dtype() != DType::kFloat32 || test.dtype() != DType::kFloat32 || ref.shape() != test.shape()) {
    return internal("compare: tensor '" + tensor + "' differs in type or shape between the engine and the oracle");
  }
  auto it = index_.find(tensor);
  if (it == index_.end()) {
    it = index_.emplace(tensor, results_.size()).first;
    results_.push_back({});
    results_.back().tensor = tensor;
  }
  TensorCompare& c = results_[it->second];
  c.scale = scale;
  const float* r = ref.data<float>();
  const float* t = test.data<float>();
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = r[i], b = t[i], d = a - b;
    c.ref_sq += a * a;
    c.test_sq += b * b;
    c.dot += a * b;
    c.err_sq += d * d;
    c.max_err = std::max(c.max_err, std::fabs(d));
    if (scale > 0) {
      const double q = b / scale;
      c.saturated += q > 127.5 || q < -128.5;
    }
  }
  c.count += ref.numel();
  return Status::ok();
}

void TensorComparison::describe(const std::string& tensor, const std::string& layer, const std::string& op) {
  auto it = index_.find(tensor);
  if (it == index_.end()) return;
  results_[it->second].layer = layer;
  results_[it->second].op = op;
}

namespace {

// The tensors lower_int8 quantizes in `lowered` (read by a QuantizeLinear it added) and their scales.
std::map<std::string, float> quantized_tensors(const Graph& lowered, const Int8Options& int8) {
  std::map<std::string, float> out;
  for (const Node& n : lowered.nodes) {
    if (n.op != OpType::QuantizeLinear || n.inputs.empty() || n.inputs[0] < 0) continue;
    const std::string& name = lowered.values[n.inputs[0]].name;
    auto s = int8.act_scales.find(name);
    if (s != int8.act_scales.end()) out[name] = s->second;
  }
  return out;
}

Expected<Graph> lowered_copy(const Graph& prepared, const Int8Options& int8, Int8Report* report = nullptr) {
  Graph g = prepared;
  Int8Report rep = QD_TRY(lower_int8(g, int8));
  if (report) *report = std::move(rep);
  return g;
}

}  // namespace

Status run_oracle(const Graph& prepared, const Int8Options& int8, bool reference_int8,
                  const std::map<std::string, Tensor>& feeds,
                  const std::function<void(const std::string&, const Tensor&)>& visit) {
  Graph lowered;
  const Graph* g = &prepared;
  if (reference_int8) {
    Int8Options exact = int8;
    exact.mode = Int8Mode::kExact;
    lowered = QD_TRY(lowered_copy(prepared, exact));
    g = &lowered;
  }
  for (const auto& [name, t] : feeds) visit(name, t);
  ReferenceRunOptions ro;
  ro.observer = [&](const Node& n, const std::vector<const Tensor*>& outs) {
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] && n.outputs[i] >= 0 && outs[i]->dtype() == DType::kFloat32) visit(g->values[n.outputs[i]].name, *outs[i]);
    }
  };
  return run_reference(*g, feeds, ro).status();
}

Expected<std::vector<TensorCompare>> compare_cpu_layers(const Graph& prepared, const Int8Options& int8,
                                                        int num_batches, const CompareBatchFn& batches,
                                                        const CompareOptions& opt) {
  const Graph test = QD_TRY(lowered_copy(prepared, int8));
  const std::map<std::string, float> quantized = quantized_tensors(test, int8);
  // Only tensors of the float graph: the ones the INT8 rewrite adds (int8 copies, accumulators) have no oracle.
  std::set<std::string> known;
  for (int v : prepared.inputs) known.insert(prepared.values[v].name);
  for (const Node& n : prepared.nodes) {
    for (int o : n.outputs) {
      if (o >= 0 && prepared.values[o].dtype == DType::kFloat32) known.insert(prepared.values[o].name);
    }
  }
  TensorComparison cmp;
  for (int b = 0; b < num_batches; ++b) {
    const std::map<std::string, Tensor> feeds = QD_TRY(batches(b));
    std::map<std::string, Tensor> ref;
    QD_RETURN_IF_ERROR(run_oracle(prepared, int8, opt.reference_int8, feeds, [&](const std::string& name, const Tensor& t) {
      if (known.count(name) && (!opt.quantized_only || quantized.count(name))) ref[name] = t;
    }));
    Status st = Status::ok();
    auto visit = [&](const std::string& name, const Tensor& t) {
      auto r = ref.find(name);
      if (r == ref.end() || !st.is_ok()) return;
      auto q = quantized.find(name);
      st = cmp.add(name, r->second, t, q == quantized.end() ? 0.f : q->second);
      ref.erase(r);  // the memory goes as soon as the engine has produced the tensor
    };
    for (const auto& [name, t] : feeds) visit(name, t);
    ReferenceRunOptions ro;
    ro.observer = [&](const Node& n, const std::vector<const Tensor*>& outs) {
      for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i] && n.outputs[i] >= 0 && outs[i]->dtype() == DType::kFloat32) {
          visit(test.values[n.outputs[i]].name, *outs[i]);
        }
      }
    };
    QD_RETURN_IF_ERROR(run_reference(test, feeds, ro).status());
    QD_RETURN_IF_ERROR(st);
  }
  for (const Node& n : prepared.nodes) {
    for (int o : n.outputs) {
      if (o >= 0) cmp.describe(prepared.values[o].name, n.name, op_name(n.op));
    }
  }
  // Graph order (the float graph's), whatever order the engine produced them in.
  std::map<std::string, size_t> order;
  for (int v : prepared.inputs) order.emplace(prepared.values[v].name, order.size());
  for (const Node& n : prepared.nodes) {
    for (int o : n.outputs) {
      if (o >= 0) order.emplace(prepared.values[o].name, order.size());
    }
  }
  std::vector<TensorCompare> out = cmp.results();
  std::stable_sort(out.begin(), out.end(), [&](const TensorCompare& a, const TensorCompare& b) {
    return order[a.tensor] < order[b.tensor];
  });
  return out;
}

namespace {

// Output SNR with `float_layers` in float, against FP32 outputs computed once (`fp32`, filled on first use).
Expected<double> snr_with(const Graph& prepared, const Int8Options& int8, const std::vector<std::string>& float_layers,
                          int num_batches, const CompareBatchFn& batches, std::vector<std::vector<Tensor>>* fp32,
                          Int8Report* report) {
  Int8Options o = int8;
  o.float_node_names.insert(float_layers.begin(), float_layers.end());
  const Graph test = QD_TRY(lowered_copy(prepared, o, report));
  SnrMetric snr;
  for (int b = 0; b < num_batches; ++b) {
    const std::map<std::string, Tensor> feeds = QD_TRY(batches(b));
    if (fp32->size() <= static_cast<size_t>(b)) fp32->push_back(QD_TRY(run_reference(prepared, feeds)));
    QD_RETURN_IF_ERROR(snr.set_reference(b, (*fp32)[b]));
    QD_RETURN_IF_ERROR(snr.add(b, QD_TRY(run_reference(test, feeds))));
  }
  return snr.value();
}

}  // namespace

Expected<double> output_snr(const Graph& prepared, const Int8Options& int8, const std::vector<std::string>& float_layers,
                            int num_batches, const CompareBatchFn& batches, Int8Report* report) {
  std::vector<std::vector<Tensor>> fp32;
  return snr_with(prepared, int8, float_layers, num_batches, batches, &fp32, report);
}

Expected<BisectResult> bisect_precision(const Graph& prepared, const Int8Options& int8, double target_db,
                                        int num_batches, const CompareBatchFn& batches,
                                        const std::function<void(const BisectStep&)>& on_step) {
  BisectResult r;
  r.target_db = target_db;
  Int8Report all;
  std::vector<std::vector<Tensor>> fp32;
  r.all_int8_db = QD_TRY(snr_with(prepared, int8, {}, num_batches, batches, &fp32, &all));
  const std::vector<std::string> layers = all.int8_nodes;  // graph order
  auto measure = [&](const std::string& action, const std::vector<std::string>& set) -> Expected<double> {
    const double v = QD_TRY(snr_with(prepared, int8, set, num_batches, batches, &fp32, nullptr));
    r.steps.push_back({action, static_cast<int>(set.size()), v});
    if (on_step) on_step(r.steps.back());
    return v;
  };
  r.steps.push_back({"all int8", 0, r.all_int8_db});
  if (on_step) on_step(r.steps.back());
  std::vector<std::string> chosen;
  if (!(r.all_int8_db >= target_db)) {
    // Shortest prefix reaching the target: lo fails, hi passes (all layers in float reproduces FP32).
    size_t lo = 0, hi = layers.size();
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      const std::vector<std::string> set(layers.begin(), layers.begin() + static_cast<std::ptrdiff_t>(mid));
      const double v = QD_TRY(measure("prefix " + std::to_string(mid), set));
      (v >= target_db ? hi : lo) = mid;
    }
    chosen.assign(layers.begin(), layers.begin() + static_cast<std::ptrdiff_t>(hi));
    // Each layer of the prefix, last first, goes back to INT8 when the target holds without it.
    for (size_t i = chosen.size(); i-- > 0;) {
      if (chosen.size() == 1) break;  // the prefix of one passed where none failed
      std::vector<std::string> without = chosen;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
      const std::string layer = chosen[i];
      const double v = QD_TRY(measure("int8 again: " + layer, without));
      if (v >= target_db) chosen = std::move(without);
    }
  }
  r.float_layers = chosen;
  Int8Report fin;
  r.final_db = QD_TRY(snr_with(prepared, int8, chosen, num_batches, batches, &fp32, &fin));
  r.int8_macs = fin.int8_macs;
  r.total_macs = fin.total_macs;
  return r;
}

}  // namespace qd
