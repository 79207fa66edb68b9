// The CPU engine: keeps the imported graph and prepares (binds, infers, folds) one copy per distinct set of input
// shapes, so the batch size may change between runs.
#include <cstdio>
#include <mutex>

#include "backends/cpu/reference.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "quant/calib_cache.h"
#include "quant/int8.h"
#include "quant/qdq.h"
#include "runtime/engine.h"

namespace qd {

namespace {

class CpuEngine final : public Engine {
 public:
  CpuEngine(Graph g, BuildOptions opt) : graph_(std::move(g)), opt_(std::move(opt)) {}

  Status init() {
    for (int v : graph_.inputs) {
      const Value& val = graph_.values[v];
      TensorDesc d{val.name, val.dtype, val.has_shape ? val.shape : Shape{}};
      auto it = opt_.shapes.find(val.name);
      if (it != opt_.shapes.end()) {
        d.shape = it->second;
        if (!d.shape.empty() && !val.dim_names.empty() && !val.dim_names[0].empty()) d.shape[0] = -1;
      }
      inputs_.push_back(d);
    }
    // Prepare once with the declared/bound shapes (batch 1 where the batch is symbolic) to learn the outputs.
    std::map<std::string, Shape> shapes;
    for (const auto& d : inputs_) {
      Shape s = d.shape;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] < 0 && i == 0) s[i] = 1;
      }
      shapes[d.name] = s;
    }
    auto g = prepared(shapes);
    if (!g) return g.status();
    for (int o : (*g)->outputs) {
      const Value& val = (*g)->values[o];
      Shape s = val.shape;
      if (!s.empty() && !inputs_.empty() && inputs_[0].shape.size() > 0 && inputs_[0].shape[0] < 0) s[0] = -1;
      outputs_.push_back({val.name, val.dtype, s});
    }
    return Status::ok();
  }

  const std::vector<TensorDesc>& inputs() const override { return inputs_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override {
    std::string d = "cpu (reference, " + opt_.precision;
    if (opt_.precision == "int8") {
      char buf[160];
      std::snprintf(buf, sizeof buf, " %s: %zu layers int8, %zu float, %.1f%% of MACs in int8", opt_.int8_mode.c_str(),
                    int8_report_.int8_nodes.size(),
                    int8_report_.float_nodes.size() + int8_report_.no_scale_nodes.size(),
                    int8_report_.total_macs ? 100.0 * int8_report_.int8_macs / int8_report_.total_macs : 0.0);
      d += buf;
    }
    return d + ")";
  }
  const Int8Report& int8_report() const { return int8_report_; }

  Status load_scales() {
    if (opt_.precision != "int8") return Status::ok();
    int8_.mode = opt_.int8_mode == "fake" ? Int8Mode::kFake : Int8Mode::kExact;
    if (has_qdq(graph_)) {
      // Explicit quantization (a QAT model): the scales come from its Q/DQ pairs; a cache may add more.
      QdqScales q = QD_TRY(strip_qdq(graph_));
      int8_.act_scales = q.act_scales;
      int8_.weight_scales = q.weight_scales;
    } else if (opt_.calib_cache.empty()) {
      return invalid("--precision int8 needs activation scales: --calib-cache FILE (from qdeploy calibrate), or a "
                     "model with QuantizeLinear/DequantizeLinear (QAT)");
    }
    if (!opt_.calib_cache.empty()) {
      CalibCache cache = QD_TRY(read_calib_cache(opt_.calib_cache));
      Status names = check_cache_names(cache, graph_);
      if (!names.is_ok()) return names.prefix(opt_.calib_cache);
      for (const auto& [name, s] : cache.scales) int8_.act_scales.emplace(name, s);
    }
    int8_.float_nodes = opt_.fp32_layers;
    int8_.float_nodes.insert(int8_.float_nodes.end(), opt_.fp16_layers.begin(), opt_.fp16_layers.end());
    return Status::ok();
  }

  Expected<std::vector<Tensor>> run(const std::map<std::string, Tensor>& in) override {
    std::map<std::string, Shape> shapes;
    for (const auto& [name, t] : in) shapes[name] = t.shape();
    const Graph* g = QD_TRY(prepared(shapes));
    return run_reference(*g, in);
  }
  Status save(const std::string&) const override { return unsupported("CPU plans are not implemented yet"); }

 private:
  Expected<const Graph*> prepared(const std::map<std::string, Shape>& shapes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(shapes);
    if (it != cache_.end()) return &it->second;
    if (cache_.size() >= 16) cache_.clear();  // bounded: a few batch sizes are typical
    Graph g = graph_;
    PrepareOptions p;
    p.input_shapes = shapes;
    QD_RETURN_IF_ERROR(prepare_graph(g, p));
    if (opt_.precision == "int8") int8_report_ = QD_TRY(lower_int8(g, int8_));
    return &cache_.emplace(shapes, std::move(g)).first->second;
  }

  Graph graph_;
  BuildOptions opt_;
  std::vector<TensorDesc> inputs_, outputs_;
  Int8Options int8_;
  Int8Report int8_report_;
  std::mutex mu_;
  std::map<std::map<std::string, Shape>, Graph> cache_;
};

}  // namespace

Status check_build_options(const BuildOptions& opt) {
  if (opt.device != "cpu" && opt.device != "cuda") {
    return invalid("--device must be cpu or cuda, got '" + opt.device + "'");
  }
  if (opt.precision != "fp32" && opt.precision != "fp16" && opt.precision != "int8") {
    return invalid("--precision must be fp32, fp16 or int8, got '" + opt.precision + "'");
  }
  return Status::ok();
}

Expected<std::unique_ptr<Engine>> build_engine(const std::string& model_path, const BuildOptions& opt) {
  QD_RETURN_IF_ERROR(check_build_options(opt));
  if (opt.device == "cuda") return build_cuda_engine(model_path, opt);
  if (opt.precision == "fp16") {
    return unsupported("--precision fp16 on the CPU is not implemented; use fp32 or int8 (fp16 runs on --device cuda)");
  }
  if (opt.int8_mode != "exact" && opt.int8_mode != "fake") {
    return invalid("--int8-mode must be exact or fake, got '" + opt.int8_mode + "'");
  }
  Graph g = QD_TRY(import_onnx_file(model_path));
  auto engine = std::make_unique<CpuEngine>(std::move(g), opt);
  Status st = engine->load_scales();
  if (st.is_ok()) st = engine->init();
  if (!st.is_ok()) return st.prefix(model_path);
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace qd
