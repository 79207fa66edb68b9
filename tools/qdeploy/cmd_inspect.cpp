// qdeploy inspect MODEL: inputs/outputs, op histogram, parameters, MACs per layer and in total.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "inspect_dla.h"
#include "inspect_plan.h"
#include "layout_svg.h"
#include "precision_table.h"
#include "backends/cuda/cuda_target.h"
#include "core/file_io.h"
#include "ir/cost.h"
#include "onnx/importer.h"
#include "ops/fused.h"
#include "passes/passes.h"
#include "plan/layout.h"
#include "runtime/cpu_target.h"
#include "runtime/model.h"

namespace qd::cli {

namespace {

struct InspectArgs {
  std::string model;
  BuildFlags build;  // --shapes, and --precision int8 with its scales for the precision table
  bool layers = false;
  bool json = false;
  std::string target;  // dla[:VERSION]: placement on Orin's DLA (inspect_dla.h); cpu/cuda: the summary below (cuda
                       // adds the fusions the CUDA builder's passes make)
  std::string svg;     // with --target cuda: the layout plan; with --target dla: the segment strip
};

std::string human(double v) {
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.2fK", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string io_line(const Value& v) {
  std::string dims;
  for (size_t i = 0; i < v.shape.size(); ++i) {
    if (i) dims += 'x';
    const std::string& n = i < v.dim_names.size() ? v.dim_names[i] : std::string();
    dims += v.shape[i] >= 0 ? std::to_string(v.shape[i]) : (n.empty() ? "?" : n);
  }
  return v.name + "  " + dtype_name(v.dtype) + "[" + (v.has_shape ? dims : "?") + "]";
}

int run_inspect(const InspectArgs& a) {
  std::string dla_version;
  if (parse_dla_target(a.target, &dla_version)) {
    if (is_plan_file(a.model)) return report(invalid("--target dla reads an ONNX model, not a plan"));
    return inspect_dla(a.model, dla_version, a.build, a.json, a.layers, a.svg);
  }
  if (!a.target.empty() && a.target != "cpu" && a.target != "cuda") {
    return report(invalid("--target " + a.target + ": use dla, dla:8.6, dla:10 (or cpu, cuda)"));
  }
  if (!a.svg.empty() && a.target != "cuda") {
    return report(invalid("--svg draws a placement: add --target dla (DLA segments) or --target cuda (layouts)"));
  }
  if (!a.svg.empty() && is_plan_file(a.model)) return report(invalid("--svg reads an ONNX model, not a plan"));
  if (is_plan_file(a.model)) return inspect_plan(a.model, a.build, a.json);
  auto shapes = parse_shape_flags(a.build.shapes);
  if (!shapes) return report(shapes.status());
  auto int8 = int8_report_for(a.model, a.build);
  if (!int8) return report(int8.status());
  auto imported = import_onnx_file(a.model);
  if (!imported) return report(imported.status());
  Graph g = std::move(*imported);
  std::vector<Value> declared_inputs;
  for (int v : g.inputs) declared_inputs.push_back(g.values[v]);
  const int64_t params = parameter_count(g);
  // Without the dims a dynamic input leaves open, shapes and MACs stay unknown and the summary says so; any other
  // failure means the model's nodes are invalid, which is an error (exit 2), not a summary.
  Status prepared;
  if (Status s = prepare_unless_open(g, *shapes, a.model, &prepared); !s.is_ok()) return report(s);

  std::map<std::string, int> hist;
  for (const Node& n : g.nodes) ++hist[op_name(n.op)];
  int64_t total_macs = 0;
  std::vector<std::pair<const Node*, int64_t>> layer_macs;
  if (prepared.is_ok()) {
    for (const Node& n : g.nodes) {
      const int64_t m = node_macs(g, n);
      total_macs = add_macs(total_macs, m);
      if (m) layer_macs.emplace_back(&n, m);
    }
  }
  // What the CUDA builder's fusion passes make of the graph (INT8 convs keep their BatchNormalization, as the build
  // does).
  std::optional<PrecisionTable> int8_table;
  if (*int8) int8_table = precision_table(**int8);
  std::optional<FusionCounts> fusions;
  std::optional<LayoutPlan> layouts;
  std::vector<std::string> reformat_lines;
  std::vector<std::string> fused_layers, chain_layers;
  if (a.target == "cuda" && prepared.is_ok()) {
    Graph f = g;
    std::set<std::string> plan_int8;
    if (int8_table) {
      for (const auto& row : int8_table->rows) {
        if (row.int8) plan_int8.insert(row.node);
      }
    }
    const std::set<std::string> keep_bn = cuda::cuda_int8_nodes(g, plan_int8);
    auto precision = parse_precision(a.build.precision);
    if (!precision) return report(precision.status());
    auto c = fuse_graph(f, keep_bn, cuda::cuda_fusion_rules(*precision));
    if (!c) return report(Status(c.status()).prefix(a.model));
    fusions = *c;
    // Where the builder puts each node of the fused graph (fast layers or the ONNX form), and the reformats it implies.
    layouts = cuda::cuda_layouts(f, *precision, keep_bn);  // keep_bn: the nodes the CUDA build runs in INT8
    if (!a.svg.empty()) {
      if (Status st = write_file_atomic(a.svg, layout_svg(f, *layouts, a.model + " on cuda")); !st.is_ok()) {
        return report(st);
      }
    }
    for (const auto& r : layouts->reformats) {
      std::string line = f.values[r.value].name + " -> " + layout_name(r.to) + " for";
      for (int k : r.readers) line += " " + f.nodes[k].name;
      if (r.readers.empty()) line += " the output binding";
      reformat_lines.push_back(line);
    }
    for (const Node& n : f.nodes) {
      if (n.op == OpType::MaxPoolChain) {
        std::string line = n.name + " (MaxPoolChain, " + std::to_string(n.outputs.size()) + " pools)";
        for (const std::string& x : ops::fused_names(n)) line += " + " + x;
        chain_layers.push_back(line);
      }
      if (n.op == OpType::SliceConcat) {
        const auto attrs = ops::slice_concat_attrs(n);
        std::string line = n.name + " (SliceConcat, " + std::to_string(attrs ? attrs->segments.size() : 0) + " segments)";
        for (const std::string& x : ops::fused_names(n)) line += " + " + x;
        chain_layers.push_back(line);
      }
      if (n.op != OpType::FusedConv) continue;
      const auto attrs = ops::fused_conv_attrs(n);
      std::string line = n.name + " (" + ops::activation_name(attrs->act) + (attrs->residual ? ", residual" : "") + ")";
      for (const std::string& x : attrs->fused) line += " + " + x;
      fused_layers.push_back(line);
    }
  }
  if (!a.svg.empty() && !layouts) {
    return report(invalid("--svg needs the model's shapes: " + prepared.to_string()));
  }
  // The target's answers in the build's formats: nodes it cannot run at all (a build fails on them), and INT8 nodes it
  // runs in float.
  const CpuTarget cpu_target;
  const cuda::CudaTarget cuda_target;
  const Target& target = a.target == "cuda" ? static_cast<const Target&>(cuda_target) : cpu_target;
  std::set<std::string> int8_nodes;
  if (int8_table) {
    for (const auto& row : int8_table->rows) {
      if (row.int8) int8_nodes.insert(row.node);
    }
  }
  std::vector<std::pair<const Node*, Support>> unsupported, int8_in_float;
  for (const Node& n : g.nodes) {
    NodeFormats f = uniform_formats(g, n, TensorPrecision::kFp32);
    Support s = target.supports(g, n, f);
    if (!s.yes) {
      unsupported.emplace_back(&n, std::move(s));
    } else if (int8_nodes.count(n.name)) {
      std::fill(f.inputs.begin(), f.inputs.end(), TensorPrecision::kInt8);
      if (Support q = target.supports(g, n, f); !q.yes) int8_in_float.emplace_back(&n, std::move(q));
    }
  }
  const auto refusals_json = [](const std::vector<std::pair<const Node*, Support>>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [n, s] : list) {
      out.push_back({{"node", n->name}, {"op", op_name(n->op)}, {"reason", s.reason}, {"source", s.source}});
    }
    return out;
  };
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["opset"] = g.opset;
    for (const auto& v : declared_inputs) j["inputs"].push_back({{"name", v.name}, {"dtype", dtype_name(v.dtype)}, {"shape", v.shape}, {"dim_names", v.dim_names}});
    for (int o : g.outputs) j["outputs"].push_back({{"name", g.values[o].name}, {"dtype", dtype_name(g.values[o].dtype)}, {"shape", g.values[o].shape}});
    j["ops"] = hist;
    j["parameters"] = params;
    j["target"] = target.name();
    j["unsupported"] = refusals_json(unsupported);
    if (int8_table) j["int8_in_float"] = refusals_json(int8_in_float);
    if (prepared.is_ok()) {
      j["macs"] = total_macs;
      for (auto& [n, m] : layer_macs) j["layers"].push_back({{"name", n->name}, {"op", op_name(n->op)}, {"macs", m}});
    } else {
      j["macs"] = nullptr;
      j["shape_error"] = prepared.to_string();
    }
    if (int8_table) j["int8"] = precision_json(*int8_table);
    if (fusions) {
      j["fusions"] = {{"batch_norms_folded", fusions->batch_norms},
                      {"conv_activations", fusions->activations},
                      {"conv_residuals", fusions->residuals},
                      {"pool_chains", fusions->pool_chains},
                      {"gelus", fusions->gelus},
                      {"slice_concats", fusions->slice_concats},
                      {"fused_convs", fused_layers}};
    }
    if (layouts) {
      j["layouts"] = {{"fast_nodes", layouts->count(Layout::kFast)},
                      {"onnx_nodes", layouts->count(Layout::kOnnx)},
                      {"reformats", reformat_lines}};
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "model: " << a.model << "  (opset " << g.opset << ", " << g.nodes.size() << " nodes)\n";
  std::cout << "inputs:\n";
  for (const auto& v : declared_inputs) std::cout << "  " << io_line(v) << "\n";
  std::cout << "outputs:\n";
  for (int o : g.outputs) std::cout << "  " << io_line(g.values[o]) << "\n";
  std::vector<std::pair<std::string, int>> ops(hist.begin(), hist.end());
  std::stable_sort(ops.begin(), ops.end(), [](auto& x, auto& y) { return x.second > y.second; });
  std::cout << "ops:";
  for (auto& [name, count] : ops) std::cout << " " << name << " x" << count;
  std::cout << "\nparameters: " << params << " (" << human(static_cast<double>(params)) << ")\n";
  const auto print_refusals = [](const std::vector<std::pair<const Node*, Support>>& list) {
    for (const auto& [n, s] : list) {
      std::cout << "  " << n->name << " (" << op_name(n->op) << "): " << s.reason << "  [" << s.source << "]\n";
    }
  };
  std::cout << "unsupported on " << target.name() << ": "
            << (unsupported.empty() ? "none" : std::to_string(unsupported.size()) + " node(s)") << "\n";
  print_refusals(unsupported);
  if (!int8_in_float.empty()) {
    std::cout << "INT8 nodes " << target.name() << " runs in float: " << int8_in_float.size() << "\n";
    print_refusals(int8_in_float);
  }
  if (!prepared.is_ok()) {
    std::cout << "MACs: unknown: " << prepared.to_string() << "\n";
    return 0;
  }
  if (a.layers) {
    std::cout << "MACs per layer:\n";
    for (auto& [n, m] : layer_macs) {
      std::printf("  %-48s %-14s %-22s %10s\n", n->name.c_str(), op_name(n->op),
                  shape_str(g.values[n->outputs[0]].shape).c_str(), human(static_cast<double>(m)).c_str());
    }
  }
  std::printf("MACs: %s (%.2f GMACs, %.2f GFLOPs) in %zu layers with matrix products\n",
              human(static_cast<double>(total_macs)).c_str(), total_macs / 1e9, 2.0 * total_macs / 1e9,
              layer_macs.size());
  if (fusions) {
    std::printf("fusions (CUDA builder): %d BatchNormalization folded into convs, %d conv activations, %d residual Adds "
                "(%zu FusedConv), %d max-pool chains, %d GELUs, %d slice/concat decodes\n", fusions->batch_norms,
                fusions->activations, fusions->residuals, fused_layers.size(), fusions->pool_chains, fusions->gelus,
                fusions->slice_concats);
    if (a.layers) {
      for (const std::string& l : fused_layers) std::cout << "  " << l << "\n";
      for (const std::string& l : chain_layers) std::cout << "  " << l << "\n";
    }
  }
  if (layouts) {
    std::printf("layouts (CUDA builder): %d nodes on fast layers, %d in the ONNX form; %zu reformat%s\n",
                layouts->count(Layout::kFast), layouts->count(Layout::kOnnx), reformat_lines.size(),
                reformat_lines.size() == 1 ? "" : "s");
    if (a.layers) {
      for (const std::string& l : reformat_lines) std::cout << "  " << l << "\n";
    }
    if (!a.svg.empty()) std::cout << "wrote " << a.svg << "\n";
  }
  if (int8_table) print_precision_table(*int8_table);
  return 0;
}

}  // namespace

RunFn add_inspect(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  auto* sub = app.add_subcommand("inspect", "Summarize a model (I/O, ops, parameters, MACs per layer, unsupported ops) or a plan");
  sub->add_option("model", a->model, "ONNX model or plan")->required();
  add_build_flags(sub, a->build);
  sub->add_flag("--layers", a->layers, "List MACs for every layer (with --target dla: every node's placement)");
  sub->add_option("--target", a->target,
                  "dla[:8.6|10]: which nodes TensorRT puts on Orin's DLA and which fall back to the GPU, and why; "
                  "segments, DLA subgraphs, I/O formats (needs --precision fp16 or int8; docs/dla.md). cpu (default) or "
                  "cuda: the nodes the target cannot run and the INT8 nodes it runs in float, with reasons; cuda also "
                  "the fusions its builder makes (with --layers, each fused conv and the nodes folded into it)");
  sub->add_option("--svg", a->svg,
                  "With --target cuda: write the layout plan as SVG (nodes on fast layers, reformats); with --target "
                  "dla: the DLA/GPU segment strip");
  sub->add_flag("--json", a->json, "Machine-readable output");
  return [a] { return run_inspect(*a); };
}

}  // namespace qd::cli
