// The CPU engine: keeps the imported graph and prepares (binds, infers, folds) one copy per distinct set of input
// shapes, so the batch size may change between runs.
#include <cstdio>
#include <mutex>

#include "ir/cost.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "plan/graph_codec.h"
#include "plan/plugin_list.h"
#include "quant/calib_cache.h"
#include "quant/int8.h"
#include "quant/precision_config.h"
#include "quant/qdq.h"
#include "runtime/backend.h"
#include "runtime/engine.h"
#include "runtime/int8_sources.h"
#include "runtime/io_format.h"
#include "runtime/plan_sections.h"

namespace qd {

namespace {

class CpuEngine final : public Engine {
 public:
  CpuEngine(Graph g, BuildOptions opt) : graph_(std::move(g)), opt_(std::move(opt)) {}

  Status init() {
    inputs_ = QD_TRY(engine_inputs(graph_, opt_, &init_shapes_));
    auto g = prepared(init_shapes_);
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
    std::string d = std::string("cpu (reference, ") + precision_name(opt_.precision);
    if (opt_.precision == Precision::kInt8) {
      char buf[160];
      std::snprintf(buf, sizeof buf, " %s: %zu layers int8, %zu float, %.1f%% of MACs in int8", opt_.int8_mode.c_str(),
                    int8_report_.int8_nodes.size(),
                    int8_report_.float_nodes.size() + int8_report_.no_scale_nodes.size(),
                    int8_report_.total_macs ? 100.0 * int8_report_.int8_macs / int8_report_.total_macs : 0.0);
      d += buf;
      if (!int8_.act_zero_points.empty()) {
        d += ", " + std::to_string(int8_.act_zero_points.size()) + " activations asymmetric (uint8)";
      }
    }
    return d + ")";
  }
  const Int8Report* int8_report() const override { return opt_.precision == Precision::kInt8 ? &int8_report_ : nullptr; }
  const BuildOptions& options() const override { return opt_; }
  const std::map<std::string, Shape>& build_shapes() const override { return init_shapes_; }

  Status load_scales() {
    if (opt_.precision != Precision::kInt8) return Status::ok();
    int8_ = QD_TRY(load_int8_options(graph_, opt_));
    return Status::ok();
  }

  Expected<std::vector<Tensor>> run(const std::map<std::string, Tensor>& in) override {
    std::map<std::string, Shape> shapes;
    for (const auto& [name, t] : in) shapes[name] = t.shape();
    QD_RETURN_IF_ERROR(check_in_profile(opt_, shapes));
    const Graph* g = QD_TRY(prepared(shapes));
    return run_reference(*g, in);
  }
  // The graph, options and scales rebuild the same engine (load_cpu_engine); "io" and "layers" are for inspect.
  Status save(const std::string& path) const override {
    PlanFile plan = new_plan("cpu", opt_, inputs_, outputs_);
    Int8Options resolved = int8_;
    plan.add("layers", encode_plan_layers(QD_TRY(layer_table(&resolved))));
    plan.add("graph", QD_TRY(encode_graph(graph_)));
    if (std::string plugins = encode_plugin_list(graph_); !plugins.empty()) plan.add("plugins", std::move(plugins));
    plan.add("build_options", encode_build_options(opt_));
    if (opt_.precision == Precision::kInt8) plan.add("int8", encode_int8_options(resolved));
    return write_plan(path, plan);
  }
  // For plans: the scales and float nodes that load_scales() found when the engine was built.
  void set_int8(Int8Options int8) { int8_ = std::move(int8); }

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
    if (opt_.precision == Precision::kInt8) int8_report_ = QD_TRY(lower_int8(g, int8_));
    return &cache_.emplace(shapes, std::move(g)).first->second;
  }

  // The precision of every layer with MACs, in the graph prepared at the build shapes (for `qdeploy inspect PLAN`;
  // computed here rather than taken from int8_report_, which follows the last batch size run). For INT8 it also
  // resolves the float-node patterns into the exact names they matched (`resolved`), so that a plan holds no regex.
  Expected<std::vector<PlanLayer>> layer_table(Int8Options* resolved) const {
    Graph g = graph_;
    PrepareOptions p;
    p.input_shapes = init_shapes_;
    QD_RETURN_IF_ERROR(prepare_graph(g, p));
    const bool int8 = opt_.precision == Precision::kInt8;
    std::vector<PlanLayer> layers;
    std::map<std::string, size_t> index;
    for (const Node& n : g.nodes) {
      const int64_t macs = node_macs(g, n);
      if (macs == 0) continue;
      index[n.name] = layers.size();
      // In an INT8 build, a layer with MACs that is no Conv or Gemm has no INT8 form.
      layers.push_back({n.name, op_name(n.op), macs,
                        int8 ? precision_words({Precision::kFp32, PrecisionReason::kNotQuantizable})
                             : precision_name(opt_.precision)});
    }
    if (!int8) return layers;
    const Int8Report rep = qd::int8_report(g, QD_TRY(compute_precision(g, int8_)));
    resolved->float_nodes.clear();
    resolved->float_node_names.insert(rep.float_nodes.begin(), rep.float_nodes.end());
    for (const auto& l : rep.layers) {
      auto it = index.find(l.node);
      if (it != index.end()) layers[it->second].precision = precision_words(l.precision);
    }
    return layers;
  }

  Graph graph_;
  BuildOptions opt_;
  std::map<std::string, Shape> init_shapes_;  // the shapes init() prepared the graph with
  std::vector<TensorDesc> inputs_, outputs_;
  Int8Options int8_;
  Int8Report int8_report_;
  std::mutex mu_;
  std::map<std::map<std::string, Shape>, Graph> cache_;
};

}  // namespace

Expected<std::vector<TensorDesc>> engine_inputs(const Graph& g, const BuildOptions& opt,
                                                std::map<std::string, Shape>* build_shapes) {
  std::vector<TensorDesc> inputs;
  for (int v : g.inputs) {
    const Value& val = g.values[v];
    TensorDesc d{val.name, val.dtype, val.has_shape ? val.shape : Shape{}};
    Shape build = d.shape;
    auto it = opt.shapes.find(val.name);
    auto opt_it = opt.opt_shapes.find(val.name);
    if (it != opt.shapes.end()) {
      d.shape = build = it->second;
      if (!d.shape.empty() && !val.dim_names.empty() && !val.dim_names[0].empty()) d.shape[0] = -1;
    } else if (opt_it != opt.opt_shapes.end()) {
      // A shape profile: prepared at opt; dims that may change between min and max are dynamic.
      d.shape = build = opt_it->second;
      const Shape& lo = opt.min_shapes.at(val.name);
      const Shape& hi = opt.max_shapes.at(val.name);
      for (size_t i = 0; i < d.shape.size(); ++i) {
        if (lo[i] != hi[i]) d.shape[i] = -1;
      }
    } else if (!build.empty() && build[0] < 0) {
      build[0] = 1;  // a symbolic batch: prepared at 1
    }
    (*build_shapes)[val.name] = build;
    inputs.push_back(d);
  }
  for (const auto& [name, s] : opt.opt_shapes) {
    bool found = false;
    for (const auto& d : inputs) found |= d.name == name;
    if (!found) return invalid("--min/--opt/--max name '" + name + "', which is not an input of the model");
  }
  return inputs;
}

Status check_in_profile(const BuildOptions& opt, const std::map<std::string, Shape>& shapes) {
  for (const auto& [name, s] : shapes) {
    auto lo = opt.min_shapes.find(name);
    if (lo == opt.min_shapes.end()) continue;
    const Shape& hi = opt.max_shapes.at(name);
    bool inside = s.size() == lo->second.size();
    for (size_t i = 0; inside && i < s.size(); ++i) {
      inside = (lo->second[i] < 0 || s[i] >= lo->second[i]) && (hi[i] < 0 || s[i] <= hi[i]);
    }
    if (!inside) {
      return invalid("input '" + name + "' has shape " + shape_str(s) + ", outside the engine's shape profile (min " +
                     shape_str(lo->second) + ", max " + shape_str(hi) + "); rebuild with wider --min/--max");
    }
  }
  return Status::ok();
}

Status check_build_options(const BuildOptions& opt) {
  if (opt.device != "cpu" && opt.device != "cuda") {
    return invalid("--device must be cpu or cuda, got '" + opt.device + "'");
  }
  for (const auto& src : opt.tactic_sources) {
    if (src != "qdeploy" && src != "cudnn") {
      return invalid("--tactic-sources takes qdeploy and/or cudnn (comma separated), got '" + src + "'");
    }
  }
  for (const auto* specs : {&opt.input_formats, &opt.output_formats}) {
    for (const auto& spec : *specs) {
      const IoFormat f = QD_TRY(parse_io_format(spec));
      if (!f.is_default() && opt.device != "cuda") {
        return invalid("I/O format '" + spec + "': --input-format / --output-format are for --device cuda (the CPU "
                       "engine takes and returns fp32 NCHW tensors)");
      }
    }
  }
  for (const auto& [name, s] : opt.shapes) {
    if (opt.opt_shapes.count(name)) {
      return invalid("input '" + name + "' has both --shapes and --min/--opt/--max; give one");
    }
  }
  return check_shape_profile(opt.min_shapes, opt.opt_shapes, opt.max_shapes);
}

namespace {

Status check_cpu_options(const BuildOptions& opt) {
  if (opt.precision == Precision::kFp16) {
    return unsupported("--precision fp16 on the CPU is not implemented; use fp32 or int8 (fp16 runs on --device cuda)");
  }
  if (opt.int8_mode != "exact" && opt.int8_mode != "fake" && opt.int8_mode != "bitexact" &&
      opt.int8_mode != "dla") {
    return invalid("--int8-mode must be exact, bitexact, fake or dla, got '" + opt.int8_mode + "'");
  }
  return Status::ok();
}

Expected<std::unique_ptr<Engine>> build_cpu_engine(Graph g, const BuildOptions& opt, const std::string& source) {
  auto engine = std::make_unique<CpuEngine>(std::move(g), opt);
  Status st = engine->load_scales();
  if (st.is_ok()) st = engine->init();
  if (!st.is_ok()) return st.prefix(source);
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace

Expected<std::unique_ptr<Engine>> load_cpu_engine(const PlanFile& plan) {
  const PlanSection* graph = plan.find("graph");
  const PlanSection* options = plan.find("build_options");
  const PlanSection* int8 = plan.find("int8");
  if (!graph || !options) return invalid("the CPU plan lacks its 'graph' or 'build_options' section; rebuild it");
  BuildOptions opt = QD_TRY(decode_build_options(options->data));
  auto header_precision = parse_precision(plan.header.precision);
  if (opt.device != "cpu" || !header_precision || opt.precision != *header_precision ||
      opt.precision == Precision::kFp16 || (opt.precision == Precision::kInt8) != (int8 != nullptr)) {
    return invalid("the CPU plan's sections disagree with its header (device " + opt.device + ", precision " +
                   precision_name(opt.precision) + " vs " + plan.header.precision + "); rebuild it");
  }
  Graph g = QD_TRY(decode_graph(graph->data));
  auto engine = std::make_unique<CpuEngine>(std::move(g), std::move(opt));
  if (int8) engine->set_int8(QD_TRY(decode_int8_options(int8->data)));
  QD_RETURN_IF_ERROR(engine->init());
  return std::unique_ptr<Engine>(std::move(engine));
}

const Backend& cpu_backend() {
  static const Backend kCpu{"cpu", &build_cpu_engine, &load_cpu_engine, &check_cpu_options};
  return kCpu;
}

}  // namespace qd
