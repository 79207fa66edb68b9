// qdeploy run MODEL|PLAN [--input NAME=FILE.npy]... [--output-dir DIR]: runs a model once on the reference backend,
// or a plan on its engine.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "commands.h"
#include "core/file_io.h"
#include "core/npy.h"
#include "onnx/importer.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "runtime/engine.h"
#include "runtime/io_format.h"
#include "runtime/model.h"

namespace qd::cli {

namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::vector<std::string> shapes;
  std::string output_dir;
  uint32_t seed = 0;
  std::vector<std::string> extra_outputs;
  std::string device = "cpu", precision = "fp32";  // other than cpu/fp32: built into an engine on the fly
};

std::string sanitize(const std::string& name) {
  std::string s = name;
  for (char& ch : s) {
    const bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                    ch == '.' || ch == '-';
    if (!ok) ch = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

// Seeded input for a value the user did not give: uniform [0, 1) floats, small integers, or false.
Tensor random_input(const Value& v, std::mt19937& rng) {
  Tensor t(v.dtype, v.shape);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, is_float(v.dtype) ? dist(rng) : std::floor(dist(rng) * 4));
  return t;
}

// Prints a summary line per output and writes NAME.npy files when --output-dir is given.
Status report_outputs(const RunArgs& a, const std::vector<std::string>& names, const std::vector<Tensor>& outs) {
  if (!a.output_dir.empty()) QD_RETURN_IF_ERROR(make_dirs(a.output_dir));
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = outs[i];
    const std::string& name = names[i];
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t k = 0; k < t.numel(); ++k) {
      const double x = t.get_f64(k);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
    }
    std::printf("output %s: %s[%s] min %.6g max %.6g mean %.6g\n", name.c_str(), dtype_name(t.dtype()),
                shape_str(t.shape()).c_str(), lo, hi, t.numel() ? sum / t.numel() : 0.0);
    if (!a.output_dir.empty()) QD_RETURN_IF_ERROR(write_npy(a.output_dir + "/" + sanitize(name) + ".npy", t));
  }
  return Status::ok();
}

// A plan runs on the engine it holds; inputs not given as files are seeded random data of the declared shape
// (--shapes fills the dims chosen at run time).
int run_plan(const RunArgs& a, const std::map<std::string, Tensor>& given,
             const std::map<std::string, Shape>& shapes) {
  if (!a.extra_outputs.empty()) {
    return report(invalid("--extra-output needs the ONNX model: a plan's outputs are fixed when it is built"));
  }
  auto engine = load_engine(a.model);
  if (!engine) return report(engine.status());
  auto is_input = [&](const std::string& name) {
    for (const TensorDesc& d : (*engine)->inputs()) {
      if (d.name == name) return true;
    }
    return false;
  };
  std::vector<std::string> named;
  for (const auto& kv : shapes) named.push_back(kv.first);
  for (const auto& kv : given) named.push_back(kv.first);
  for (const auto& name : named) {
    if (!is_input(name)) return report(invalid("the plan has no input named '" + name + "'"));
  }
  std::mt19937 rng(a.seed);
  std::map<std::string, Tensor> feeds;
  for (const TensorDesc& d : (*engine)->inputs()) {
    auto it = given.find(d.name);
    if (it != given.end()) {
      feeds[d.name] = it->second;
      continue;
    }
    Value v;
    v.dtype = feed_dtype(d);
    v.shape = d.shape;
    auto s = shapes.find(d.name);
    if (s != shapes.end()) v.shape = s->second;
    if (!is_static(v.shape)) {
      return report(invalid("input '" + d.name + "' has dynamic dims (" + shape_str(d.shape) + "); give --shapes " +
                            d.name + ":<dims> or --input " + d.name + "=FILE.npy"));
    }
    std::cerr << "input '" << d.name << "': seeded random " << dtype_name(v.dtype) << "[" << shape_str(v.shape)
              << "] (seed " << a.seed << ")\n";
    feeds[d.name] = random_input(v, rng);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto outs = (*engine)->run(feeds);
  if (!outs) return report(outs.status());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::string> names;
  for (const TensorDesc& d : (*engine)->outputs()) names.push_back(d.name);
  if (Status s = report_outputs(a, names, *outs); !s) return report(s);
  std::printf("ran plan %s on %s in %.1f ms\n", a.model.c_str(), (*engine)->describe().c_str(), ms);
  return 0;
}

int run_run(const RunArgs& a) {
  auto shapes = parse_shape_flags(a.shapes);
  if (!shapes) return report(shapes.status());
  std::map<std::string, Tensor> given;
  for (const auto& spec : a.inputs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return report(invalid("bad --input '" + spec + "'; write NAME=FILE.npy"));
    auto t = read_npy(spec.substr(eq + 1));
    if (!t) return report(t.status());
    given[spec.substr(0, eq)] = *t;
  }
  if (is_plan_file(a.model)) return run_plan(a, given, *shapes);
  const bool reference = a.device == "cpu" && a.precision == "fp32";
  if (!reference && !a.extra_outputs.empty()) {
    return report(invalid("--extra-output runs on the reference backend only (--device cpu --precision fp32)"));
  }
  auto imported = import_onnx_file(a.model);
  if (!imported) return report(imported.status());
  Graph g = std::move(*imported);
  for (const auto& name : a.extra_outputs) {
    const int v = g.find_value(name);
    if (v < 0 || g.is_constant(v)) return report(invalid("--extra-output: the model has no computed tensor named '" + name + "'"));
    g.outputs.push_back(v);
  }
  // Shapes of the given inputs bind the symbolic dims; --shapes binds the rest.
  std::map<std::string, Shape> bind = *shapes;
  for (const auto& [name, t] : given) bind[name] = t.shape();
  PrepareOptions opt;
  opt.input_shapes = bind;
  Status st = prepare_graph(g, opt);
  if (!st.is_ok()) return report(st.prefix(a.model));
  std::mt19937 rng(a.seed);
  std::map<std::string, Tensor> feeds;
  for (int v : g.inputs) {
    const Value& val = g.values[v];
    auto it = given.find(val.name);
    if (it != given.end()) {
      if (it->second.dtype() != val.dtype) {
        return report(invalid("input '" + val.name + "' must be " + dtype_name(val.dtype) + " but " +
                              dtype_name(it->second.dtype()) + " was given"));
      }
      feeds[val.name] = it->second;
    } else {
      std::cerr << "input '" << val.name << "': seeded random " << dtype_name(val.dtype) << "[" << shape_str(val.shape)
                << "] (seed " << a.seed << ")\n";
      feeds[val.name] = random_input(val, rng);
    }
  }
  std::vector<std::string> names;
  for (int o : g.outputs) names.push_back(g.values[o].name);
  if (!reference) {  // the same inputs through an engine built for --device/--precision
    BuildOptions bo;
    bo.device = a.device;
    bo.precision = a.precision;
    bo.shapes = bind;
    auto engine = build_engine(a.model, bo);
    if (!engine) return report(engine.status());
    const auto t0 = std::chrono::steady_clock::now();
    auto outs = (*engine)->run(feeds);
    if (!outs) return report(outs.status());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (Status s = report_outputs(a, names, *outs); !s) return report(s);
    std::printf("ran %s on %s in %.1f ms\n", a.model.c_str(), (*engine)->describe().c_str(), ms);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto outs = run_reference(g, feeds);
  if (!outs) return report(outs.status());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (Status s = report_outputs(a, names, *outs); !s) return report(s);
  std::printf("ran %zu nodes on cpu (reference, fp32) in %.1f ms\n", g.nodes.size(), ms);
  return 0;
}

}  // namespace

RunFn add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "Run a model once; inputs from .npy files or seeded random data");
  sub->add_option("model", a->model, "ONNX model or plan")->required();
  sub->add_option("--input", a->inputs, "NAME=FILE.npy (repeatable); its shape binds the input's symbolic dims");
  sub->add_option("--shapes", a->shapes, "NAME:1x3x640x640 for inputs not given as files (repeatable)");
  sub->add_option("--output-dir", a->output_dir, "Write one NAME.npy per output here");
  sub->add_option("--seed", a->seed, "Seed for the random inputs");
  sub->add_option("--extra-output", a->extra_outputs, "Also output this intermediate tensor (repeatable)");
  sub->add_option("--device", a->device, "cpu (reference backend) or cuda: build an engine for the model first")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--precision", a->precision, "fp32, fp16 or int8 (int8 needs a QAT model here; use eval/detect "
                                               "with --calib-cache for PTQ)")
      ->check(CLI::IsMember({"fp32", "fp16", "int8"}));
  return [a] { return run_run(*a); };
}

}  // namespace qd::cli
