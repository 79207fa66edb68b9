// qdeploy run MODEL|PLAN [--input NAME=FILE.npy|FILE.npz]... [--output-dir DIR] [build flags]: runs a model once on
// the reference backend (no build flags), an engine built from it with the build flags every MODEL|PLAN command
// takes (build_flags.h: --precision int8 --calib-cache FILE, --calib DATA, ...), or a plan on its engine.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "build_flags.h"
#include "commands.h"
#include "core/file_io.h"
#include "core/npy.h"
#include "core/npz.h"
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
  std::string output_dir;
  uint32_t seed = 0;
  std::vector<std::string> extra_outputs;
  BuildFlags build;  // beyond the defaults (and --shapes): an engine built on the fly
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
  BuildFlags fixed = a.build;  // --shapes chooses a plan's run-time dims; every other build flag is fixed in it
  fixed.shapes.clear();
  auto engine = build_from_flags(a.model, fixed);
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

// --input NAME=FILE.npy (one input) or FILE.npz (every array of it, by name).
Expected<std::map<std::string, Tensor>> read_inputs(const std::vector<std::string>& specs) {
  std::map<std::string, Tensor> given;
  auto add = [&](const std::string& name, Tensor t, const std::string& from) -> Status {
    if (!given.emplace(name, std::move(t)).second) return invalid("--input gives input '" + name + "' twice (" + from + ")");
    return Status::ok();
  };
  for (const auto& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos && spec.size() > 4 && spec.compare(spec.size() - 4, 4, ".npz") == 0) {
      for (auto& a : QD_TRY(read_npz(spec))) QD_RETURN_IF_ERROR(add(a.name, std::move(a.tensor), spec));
      continue;
    }
    if (eq == std::string::npos || eq == 0) {
      return invalid("bad --input '" + spec + "'; write NAME=FILE.npy, or FILE.npz for inputs by name");
    }
    QD_RETURN_IF_ERROR(add(spec.substr(0, eq), QD_TRY(read_npy(spec.substr(eq + 1))), spec));
  }
  return given;
}

int run_run(const RunArgs& a) {
  auto shapes = parse_shape_flags(a.build.shapes);
  if (!shapes) return report(shapes.status());
  auto read = read_inputs(a.inputs);
  if (!read) return report(read.status());
  const std::map<std::string, Tensor>& given = *read;
  if (is_plan_file(a.model)) return run_plan(a, given, *shapes);
  BuildFlags engine_flags = a.build;
  engine_flags.shapes.clear();
  const std::string given_flags = build_flags_given(engine_flags);
  auto precision = parse_precision(a.build.precision);
  const bool reference = a.build.device == "cpu" && precision && *precision == Precision::kFp32 && given_flags.empty();
  if (!reference && !a.extra_outputs.empty()) {
    return report(invalid("--extra-output runs on the reference backend only (--device cpu --precision fp32, no " +
                          (given_flags.empty() ? std::string("other build flags") : given_flags) + ")"));
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
  if (!reference) {  // the same inputs through an engine built with the build flags
    for (const auto& [name, shape] : bind) {
      if (!shape.empty()) engine_flags.shapes.push_back(name + ":" + shape_str(shape));
    }
    auto engine = build_from_flags(a.model, engine_flags);
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
  sub->add_option("--input", a->inputs,
                  "NAME=FILE.npy, or FILE.npz (inputs by name; repeatable); the shapes bind the inputs' symbolic dims");
  sub->add_option("--output-dir", a->output_dir, "Write one NAME.npy per output here");
  sub->add_option("--seed", a->seed, "Seed for the random inputs");
  sub->add_option("--extra-output", a->extra_outputs,
                  "Also output this intermediate tensor (repeatable; the reference backend: no build flags)");
  // The build flags: with none beyond --shapes (NAME:1x3x640x640 for inputs not given as files), the model runs on
  // the reference backend; with any, on an engine built with them (a plan: only --shapes, --device/--precision
  // matching it).
  add_build_flags(sub, a->build);
  return [a] { return run_run(*a); };
}

}  // namespace qd::cli
