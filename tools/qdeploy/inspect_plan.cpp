#include "inspect_plan.h"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "ir/cost.h"
#include "plan/plan_file.h"
#include "precision_table.h"
#include "runtime/plan_sections.h"

namespace qd::cli {

namespace {

// The layers section as the table that `inspect MODEL --precision int8` prints, so both tables look alike.
PrecisionTable as_table(const std::vector<PlanLayer>& layers) {
  PrecisionTable t;
  for (const auto& l : layers) {
    const bool int8 = plan_layer_int8(l);
    t.rows.push_back({l.name, l.op, l.macs, l.precision, int8});
    t.total_macs = add_macs(t.total_macs, l.macs);  // a damaged plan's numbers may overflow
    if (int8) t.int8_macs = add_macs(t.int8_macs, l.macs);
  }
  return t;
}

// 12020 -> "12.2"
std::string cuda_version(uint32_t v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

}  // namespace

int inspect_plan(const std::string& path, const BuildFlags& flags, bool json) {
  if (Status st = check_flags_for_plan(path, flags); !st) return report(st);
  auto plan = read_plan(path);
  if (!plan) return report(plan.status());
  const PlanHeader& h = plan->header;
  PlanIo io;
  if (const PlanSection* s = plan->find("io")) {
    auto decoded = decode_plan_io(s->data);
    if (!decoded) return report(Status(decoded.status()).prefix(path));
    io = std::move(*decoded);
  }
  std::vector<PlanLayer> layers;
  if (const PlanSection* s = plan->find("layers")) {
    auto decoded = decode_plan_layers(s->data);
    if (!decoded) return report(Status(decoded.status()).prefix(path));
    layers = std::move(*decoded);
  }
  const PrecisionTable rep = as_table(layers);
  // A CUDA plan's batch splits: how it runs each batch size it timed.
  std::vector<BatchSplit> splits;
  if (const PlanSection* s = plan->find("cuda.kernels")) {
    auto kernels = decode_cuda_kernels(s->data);
    if (!kernels) return report(Status(kernels.status()).prefix(path));
    splits = batch_splits(*kernels);
  }

  // The kernel policy the plan runs with (docs/cpp-api.md#kernelpolicy): "" for the defaults.
  std::string policy;
  if (const PlanSection* s = plan->find("build_options")) {
    if (auto o = decode_build_options(s->data)) policy = o->kernel_policy.to_string();
  }
  if (json) {
    nlohmann::json j;
    j["plan"] = path;
    j["kernel_policy"] = policy;
    j["format_version"] = h.format_version;
    j["qdeploy_version"] = h.qdeploy_version;
    j["target"] = h.target;
    j["sm"] = h.sm;
    j["cuda_runtime_version"] = h.cuda_runtime_version;
    j["cudnn_version"] = h.cudnn_version;
    j["precision"] = h.precision;
    j["profile"] = nlohmann::json::array();
    for (const auto& p : h.profile) {
      j["profile"].push_back({{"name", p.name}, {"min", p.min}, {"opt", p.opt}, {"max", p.max}});
    }
    auto tensors = [](const std::vector<PlanTensor>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& t : v) {
        a.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape},
                     {"layout", t.nhwc ? "nhwc" : "nchw"}, {"scale", t.scale}});
      }
      return a;
    };
    j["inputs"] = tensors(io.inputs);
    j["outputs"] = tensors(io.outputs);
    j["sections"] = nlohmann::json::array();
    for (const auto& s : plan->sections) j["sections"].push_back({{"name", s.name}, {"bytes", s.data.size()}});
    j["batch_splits"] = nlohmann::json::array();
    for (const auto& b : splits) {
      j["batch_splits"].push_back({{"batch", b.batch}, {"inputs", b.inputs}, {"split", b.split}});
    }
    j["layers"] = precision_json(rep)["layers"];
    j["int8_macs"] = rep.int8_macs;
    j["total_macs"] = rep.total_macs;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("plan: %s  (qdeploy plan format v%u, written by qdeploy %s)\n", path.c_str(), h.format_version,
              h.qdeploy_version.c_str());
  if (h.target == "cuda") {
    std::printf("target: cuda, sm_%u (compute capability %u.%u), CUDA runtime %s, cuDNN %u\n", h.sm, h.sm / 10,
                h.sm % 10, h.cuda_runtime_version ? cuda_version(h.cuda_runtime_version).c_str() : "none",
                h.cudnn_version);
  } else {
    std::printf("target: %s\n", h.target.c_str());
  }
  std::printf("precision: %s\n", h.precision.c_str());
  if (!policy.empty()) std::printf("kernel policy: %s\n", policy.c_str());
  std::printf("shape profile:\n");
  for (const auto& p : h.profile) {
    std::printf("  %s  min %s  opt %s  max %s\n", p.name.c_str(), shape_str(p.min).c_str(), shape_str(p.opt).c_str(),
                shape_str(p.max).c_str());
  }
  std::printf("inputs:\n");
  for (const auto& t : io.inputs) std::printf("  %s\n", plan_tensor_line(t).c_str());
  std::printf("outputs:\n");
  for (const auto& t : io.outputs) std::printf("  %s\n", plan_tensor_line(t).c_str());
  std::printf("sections:\n");
  for (const auto& s : plan->sections) std::printf("  %-16s %12zu bytes\n", s.name.c_str(), s.data.size());
  if (!splits.empty()) {
    std::printf("batch splits (how the plan runs each batch it timed):\n");
    for (const auto& b : splits) {
      const char* words = split_words(b.split);
      std::printf("  batch %-5lld %s: %s\n", static_cast<long long>(b.batch), b.inputs.c_str(),
                  words ? words : ("'" + b.split + "', unknown to this qdeploy: rebuild the plan").c_str());
    }
  }
  if (!layers.empty()) print_precision_table(rep);
  return 0;
}

}  // namespace qd::cli
