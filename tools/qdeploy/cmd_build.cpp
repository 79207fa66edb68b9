// qdeploy build MODEL -o PLAN [build flags]: compiles a model into a plan file (docs/plan-format.md) that run, eval,
// detect, bench and inspect accept in place of the model.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "build_flags.h"
#include "commands.h"
#include "plan/plan_file.h"

namespace qd::cli {

namespace {

struct BuildArgs {
  std::string model;
  std::string out;
  BuildFlags build;
};

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n >= (1u << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", n / 1048576.0);
  else if (n >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", n / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
  return buf;
}

int run_build(const BuildArgs& a) {
  if (is_plan_file(a.model)) {
    return report(invalid("'" + a.model + "' is already a plan; `qdeploy build` takes the ONNX model"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto engine = build_from_flags(a.model, a.build);
  if (!engine) return report(engine.status());
  if (Status s = (*engine)->save(a.out); !s) return report(s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Read the plan back: the summary shows what the file holds, and a plan that does not load fails here.
  auto plan = read_plan(a.out);
  if (!plan) return report(Status(StatusCode::kInternal, "the plan just written does not read back: " +
                                                             plan.status().message()));
  const PlanHeader& h = plan->header;
  std::printf("built %s from %s in %.2f s\n", a.out.c_str(), a.model.c_str(), secs);
  std::printf("engine: %s\n", (*engine)->describe().c_str());
  if (const PlanSection* s = plan->find("io")) {
    if (auto io = decode_plan_io(s->data)) {
      std::printf("inputs:\n");
      for (const auto& t : io->inputs) std::printf("  %s\n", plan_tensor_line(t).c_str());
      std::printf("outputs:\n");
      for (const auto& t : io->outputs) std::printf("  %s\n", plan_tensor_line(t).c_str());
    }
  }
  if (const PlanSection* s = plan->find("layers")) {
    if (auto layers = decode_plan_layers(s->data)) {
      size_t int8 = 0;
      for (const auto& l : *layers) int8 += plan_layer_int8(l);
      std::printf("layers with MACs: %zu (%zu int8, %zu float); `qdeploy inspect %s` lists them\n", layers->size(),
                  int8, layers->size() - int8, a.out.c_str());
    }
  }
  // Activation memory as planned from the tensors' lifetimes, against all activation tensors side by side (engines
  // that plan device memory; the CPU engine answers kUnsupported and prints nothing).
  const Engine& e = **engine;
  std::vector<std::map<std::string, Shape>> at = {e.build_shapes()};  // and the profile's largest
  std::map<std::string, Shape> largest = at[0];
  for (const auto& [name, s] : e.options().max_shapes) largest[name] = s;
  if (largest != at[0]) at.push_back(largest);
  for (const auto& shapes : at) {
    auto mem = e.memory_report(shapes);
    if (!mem && mem.status().code() == StatusCode::kUnsupported) break;
    if (!mem) return report(mem.status());
    std::string where;
    for (const auto& [name, s] : shapes) where += (where.empty() ? "" : ",") + name + ":" + shape_str(s);
    std::printf("memory at %s: activations %s planned (%s as separate tensors), weights %s\n", where.c_str(),
                human_bytes(mem->arena_bytes).c_str(), human_bytes(mem->activation_bytes).c_str(),
                human_bytes(mem->weight_bytes).c_str());
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(a.out, ec);
  const std::string target = h.target == "cuda" ? "cuda sm_" + std::to_string(h.sm) : h.target;
  std::printf("plan: %s, target %s, precision %s, format v%u\n", human_bytes(ec ? 0 : size).c_str(), target.c_str(),
              h.precision.c_str(), h.format_version);
  return 0;
}

}  // namespace

RunFn add_build(CLI::App& app) {
  auto a = std::make_shared<BuildArgs>();
  auto* sub = app.add_subcommand("build", "Compile a model into a plan file (for run, eval, detect, bench, inspect)");
  sub->add_option("model", a->model, "ONNX model")->required();
  sub->add_option("-o,--output", a->out, "Plan file to write")->required();
  add_build_flags(sub, a->build);
  return [a] { return run_build(*a); };
}

}  // namespace qd::cli
