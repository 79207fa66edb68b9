// qdeploy compare MODEL|PLAN --data DIR|FILES | --fmnist DIR [build flags] [--reference fp32|int8] [--bisect
//                 [--target-snr DB]] [--json F] [--svg F]
// Runs the model as built (a MODEL is built with the build flags; a PLAN as it is) on a few inputs and compares every
// layer's output with the CPU oracle (quant/compare.h): SNR, cosine, max error and the share of values beyond the
// INT8 range. CPU plans: every node output of the graph the plan runs, observed while it runs. CUDA INT8 plans: the
// tensors the plan quantizes (each a layer's output that an INT8 conv reads), read from the engine itself.
// --bisect: the small set of layers whose fallback to float brings the output SNR to --target-snr.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "build_flags.h"
#include "calib_data.h"
#include "commands.h"
#include "core/file_io.h"
#include "eval/svg_chart.h"
#include "passes/passes.h"
#include "plan/graph_codec.h"
#include "plan/plan_file.h"
#include "quant/compare.h"
#include "ops/quantize.h"
#include "runtime/plan_sections.h"

namespace qd::cli {

namespace {

using Json = nlohmann::ordered_json;

struct CompareArgs {
  std::string model;
  BuildFlags flags;
  std::vector<std::string> data;
  std::string fmnist;
  int batches = 4;
  std::string letterbox = kDefaultLetterbox;
  std::string reference = "fp32";
  bool quantized_only = false;
  bool bisect = false;
  double target_snr = NAN;
  std::string json, svg;
};

// What the engine runs: its graph, build options and INT8 scales, as its plan stores them.
struct Subject {
  Graph graph;
  BuildOptions options;
  Int8Options int8;
  bool int8_on = false;
};

Expected<Subject> read_subject(const std::string& plan_path) {
  const PlanFile plan = QD_TRY(read_plan(plan_path));
  Subject s;
  if (plan.header.target == "cuda") {
    CudaPlanParts parts = QD_TRY(decode_cuda_plan(plan));
    s.graph = std::move(parts.graph);
    s.options = std::move(parts.options);
    s.int8 = std::move(parts.int8);
  } else {
    const PlanSection* graph = plan.find("graph");
    const PlanSection* options = plan.find("build_options");
    if (!graph || !options) return invalid(plan_path + ": the plan lacks its graph; rebuild it");
    s.graph = QD_TRY(decode_graph(graph->data));
    s.options = QD_TRY(decode_build_options(options->data));
    if (const PlanSection* int8 = plan.find("int8")) s.int8 = QD_TRY(decode_int8_options(int8->data));
  }
  s.int8_on = s.options.precision == Precision::kInt8;
  return s;
}

std::string fmt(double v, const char* f) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A GPU INT8 plan's quantized tensors against the oracle: the engine's int8 values dequantized with their scale.
Expected<std::vector<TensorCompare>> compare_int8_tensors(Engine& engine, const Graph& prepared, const Subject& s,
                                                          const ImageBatches& data, bool reference_int8) {
  TensorComparison cmp;
  for (int b = 0; b < data.num_batches(); ++b) {
    const std::map<std::string, Tensor> feeds = QD_TRY(data.feeds(b));
    const std::map<std::string, Tensor> q = QD_TRY(engine.read_int8_tensors(feeds));
    std::map<std::string, Tensor> ref;
    QD_RETURN_IF_ERROR(run_oracle(prepared, s.int8, reference_int8, feeds, [&](const std::string& n, const Tensor& t) {
      if (q.count(n)) ref[n] = t;
    }));
    for (const auto& [name, qt] : q) {
      auto sc = s.int8.act_scales.find(name);
      auto r = ref.find(name);
      if (sc == s.int8.act_scales.end() || r == ref.end()) continue;
      Tensor test(DType::kFloat32, qt.shape());
      Tensor oracle = r->second;
      for (int64_t i = 0; i < qt.numel(); ++i) {
        test.data<float>()[i] = ops::dequantize_value(qt.data<int8_t>()[i], sc->second, 0);
        // Against the reference's INT8, both sides quantized: the difference in LSBs of the contract.
        if (reference_int8) {
          oracle.data<float>()[i] = ops::dequantize_value(
              ops::quantize_value(oracle.data<float>()[i], sc->second, 0, -128, 127), sc->second, 0);
        }
      }
      QD_RETURN_IF_ERROR(cmp.add(name, oracle, test, sc->second));
    }
  }
  for (const Node& n : prepared.nodes) {
    for (int o : n.outputs) {
      if (o >= 0) cmp.describe(prepared.values[o].name, n.name, op_name(n.op));
    }
  }
  return cmp.results();
}

int run_compare(const CompareArgs& a) {
  if (a.data.empty() == a.fmnist.empty()) return report(invalid("give the inputs to compare on: --data DIR|FILES or --fmnist DIR"));
  if (a.batches < 1) return report(invalid("--batches must be >= 1"));
  if (a.reference != "fp32" && a.reference != "int8") return report(invalid("--reference must be fp32 or int8"));
  if (!std::isnan(a.target_snr) && !a.bisect) return report(invalid("--target-snr is for --bisect"));
  auto engine = build_from_flags(a.model, a.flags);
  if (!engine) return report(engine.status());
  // The plan as built: a MODEL's engine saved to a temporary plan, so that models and plans are read one way.
  std::string plan_path = a.model;
  std::error_code ec;
  if (!is_plan_file(a.model)) {
    plan_path = (std::filesystem::temp_directory_path(ec) / ("qdeploy-compare-" + std::to_string(::getpid()) + ".plan")).string();
    if (Status s = (*engine)->save(plan_path); !s) return report(s);
  }
  auto subject = read_subject(plan_path);
  if (plan_path != a.model) std::filesystem::remove(plan_path, ec);
  if (!subject) return report(subject.status());
  const bool cuda = subject->options.device == "cuda";
  if (cuda && !subject->int8_on) {
    return report(unsupported("compare reads a CUDA plan's layers through its INT8 tensors: build it with --precision int8 "
                              "(fp16/fp32 CUDA plans expose no per-layer outputs yet)"));
  }
  ImageSource src;
  src.data = a.data;
  src.fmnist = a.fmnist;
  src.fmnist_split = "test";
  src.batches = a.batches;
  src.batch_size = 1;
  src.letterbox = a.letterbox;
  auto spec = preprocess_from_flag(a.flags.preprocess);  // a build flag: the command's own inputs use it too
  if (!spec) return report(spec.status());
  src.preprocess = *spec;
  ImageBatches data(src, engine->get());
  if (Status s = data.init(); !s) return report(s);
  auto first = data.feeds(0);
  if (!first) return report(first.status());
  Graph prepared = subject->graph;
  PrepareOptions p;
  for (const auto& [name, t] : *first) p.input_shapes[name] = t.shape();
  if (Status s = prepare_graph(prepared, p); !s) return report(s);
  if (!subject->int8_on) subject->int8 = Int8Options{};  // a float plan: the float graph itself (every layer float)
  subject->int8.float_nodes.clear();  // the plan's names are resolved already
  auto batches = [&](int k) -> Expected<std::map<std::string, Tensor>> {
    if (k == 0) return *first;
    return data.feeds(k);
  };
  Expected<std::vector<TensorCompare>> layers = internal("unreachable");
  if (cuda) {
    layers = compare_int8_tensors(**engine, prepared, *subject, data, a.reference == "int8");
  } else {
    CompareOptions co;
    co.reference_int8 = a.reference == "int8";
    co.quantized_only = a.quantized_only;
    layers = compare_cpu_layers(prepared, subject->int8, data.num_batches(), batches, co);
  }
  if (!layers) return report(layers.status());
  std::printf("%s against the CPU reference's %s, %d batch(es)\n", (*engine)->describe().c_str(),
              a.reference.c_str(), data.num_batches());
  std::printf("%-52s %-14s %9s %9s %10s %7s\n", "tensor (layer output)", "op", "SNR dB", "cosine", "max |err|",
              "sat %");
  for (const TensorCompare& c : *layers) {
    std::printf("%-52s %-14s %9s %9s %10s %7s\n", c.tensor.c_str(), c.op.c_str(), fmt(c.snr_db(), "%.2f").c_str(),
                fmt(c.cosine(), "%.5f").c_str(), fmt(c.max_err, "%.4g").c_str(),
                c.scale > 0 ? fmt(100 * c.saturated_share(), "%.3f").c_str() : "-");
  }
  Json j;
  j["model"] = a.model;
  j["engine"] = (*engine)->describe();
  j["reference"] = a.reference;
  j["inputs"] = data.num_batches() * data.batch();
  Json rows = Json::array();
  for (const TensorCompare& c : *layers) {
    rows.push_back({{"tensor", c.tensor},
                    {"layer", c.layer},
                    {"op", c.op},
                    {"snr_db", std::isfinite(c.snr_db()) ? Json(c.snr_db()) : Json(nullptr)},
                    {"cosine", c.cosine()},
                    {"max_abs_err", c.max_err},
                    {"rms_err", c.rms_err()},
                    {"int8_scale", c.scale},
                    {"saturated_share", c.saturated_share()},
                    {"values", c.count}});
  }
  j["layers"] = rows;
  std::vector<std::string> fallback;
  if (a.bisect) {
    if (!subject->int8_on) return report(invalid("--bisect needs an INT8 model or plan"));
    const double target = std::isnan(a.target_snr) ? 30.0 : a.target_snr;
    std::printf("bisect (on the CPU reference of the plan's graph and scales), target output SNR %.1f dB:\n", target);
    auto r = bisect_precision(prepared, subject->int8, target, data.num_batches(), batches, [](const BisectStep& s) {
      std::printf("  %-60s %3d float  %s dB\n", s.action.c_str(), s.float_layers, fmt(s.snr_db, "%.2f").c_str());
      std::fflush(stdout);
    });
    if (!r) return report(r.status());
    fallback = r->float_layers;
    std::printf("float layers (%zu): ", r->float_layers.size());
    for (size_t i = 0; i < r->float_layers.size(); ++i) std::printf("%s%s", i ? "," : "", r->float_layers[i].c_str());
    std::printf("\noutput SNR %s dB (all INT8 %s dB), %.1f%% of MACs in INT8\n", fmt(r->final_db, "%.2f").c_str(),
                fmt(r->all_int8_db, "%.2f").c_str(), r->total_macs ? 100.0 * r->int8_macs / r->total_macs : 0.0);
    Json b;
    b["target_db"] = target;
    b["all_int8_db"] = std::isfinite(r->all_int8_db) ? Json(r->all_int8_db) : Json(nullptr);
    b["final_db"] = std::isfinite(r->final_db) ? Json(r->final_db) : Json(nullptr);
    b["float_layers"] = r->float_layers;
    b["int8_mac_share"] = r->total_macs ? static_cast<double>(r->int8_macs) / r->total_macs : 0.0;
    Json steps = Json::array();
    for (const BisectStep& s : r->steps) {
      steps.push_back({{"action", s.action},
                       {"float_layers", s.float_layers},
                       {"snr_db", std::isfinite(s.snr_db) ? Json(s.snr_db) : Json(nullptr)}});
    }
    b["steps"] = steps;
    j["bisect"] = b;
  }
  if (!a.json.empty()) {
    if (Status s = write_file_atomic(a.json, j.dump(2) + "\n"); !s) return report(s);
  }
  if (!a.svg.empty()) {
    BarChart c;
    c.title = "qdeploy compare: " + std::filesystem::path(a.model).filename().string() + " against " + a.reference;
    BarPanel snr{"SNR per layer output", "dB", {}, 0.0, {}}, sat{"beyond the INT8 range", "% of values", {}, 0.0, {}};
    std::set<std::string> read_by_fallback;  // the inputs of the --bisect layers
    for (const Node& n : prepared.nodes) {
      if (!n.inputs.empty() && n.inputs[0] >= 0 && std::count(fallback.begin(), fallback.end(), n.name)) {
        read_by_fallback.insert(prepared.values[n.inputs[0]].name);
      }
    }
    // Rows: the tensors the engine quantizes (each a layer's output an INT8 conv reads: SNR and saturation both
    // apply), and the last tensor (the model's output).
    for (size_t i = 0; i < layers->size(); ++i) {
      const TensorCompare& c2 = (*layers)[i];
      if (c2.scale > 0 || i + 1 == layers->size()) {
        c.rows.push_back(c2.layer.empty() ? c2.tensor : c2.layer + " (" + c2.op + ")");
        c.highlight.push_back(read_by_fallback.count(c2.tensor) != 0);
        snr.values.push_back(c2.snr_db());
        sat.values.push_back(c2.scale > 0 ? 100 * c2.saturated_share() : NAN);
      }
    }
    c.highlight_legend = "read by a layer --bisect keeps in float";
    c.panels = {snr, sat};
    if (Status s = write_file_atomic(a.svg, svg_bar_chart(c)); !s) return report(s);
  }
  return 0;
}

}  // namespace

RunFn add_compare(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* sub = app.add_subcommand("compare", "Each layer's output as built against the CPU reference (FP32 or INT8)");
  sub->add_option("model", a->model, "ONNX model or plan")->required();
  sub->add_option("--data", a->data,
                  "Inputs: images (folders or jpg/png files, preprocessed as eval does) or .npy/.npz tensors")
      ->delimiter(',');
  sub->add_option("--fmnist", a->fmnist, "Or Fashion-MNIST images (IDX folder; the test split)");
  sub->add_option("--batches", a->batches, "Use this many inputs")->capture_default_str();
  add_letterbox_option(sub, a->letterbox);
  sub->add_option("--reference", a->reference, "The oracle: fp32, or int8 (the reference's exact INT8)")
      ->capture_default_str();
  sub->add_flag("--quantized-only", a->quantized_only, "CPU: only the tensors the engine quantizes");
  sub->add_flag("--bisect", a->bisect, "Find the layers whose fallback to float brings the output SNR to --target-snr");
  sub->add_option("--target-snr", a->target_snr, "With --bisect: the output SNR to reach, in dB (default 30)");
  sub->add_option("--json", a->json, "Write the per-layer table (and the bisection) as JSON");
  sub->add_option("--svg", a->svg, "Write a bar chart of the quantized tensors' SNR and saturation (SVG)");
  add_build_flags(sub, a->flags);
  return [a] { return run_compare(*a); };
}

}  // namespace qd::cli
