// The plan fuzz harness, shared by the libFuzzer target and the unit test that replays tests/fuzz/regressions/plan/*
// and the seed corpus: decode the container (with its checksum recomputed, so that mutations reach the parsers
// behind it), decode the io/layers sections, load CPU plans into an engine (graph, options, scales; prepare) and run
// it when small; CUDA plans are decoded and their graph prepared (what their loader does before the GPU). Every error is fine; a crash, a sanitizer report, a leak, a hang or a kInternal status (returned,
// for the caller to check) is a bug.
#pragma once

#include <map>
#include <string>

#include "ir/cost.h"
#include "passes/passes.h"
#include "plan/graph_codec.h"
#include "plan/plan_file.h"
#include "plan/plugin_list.h"
#include "runtime/plan_sections.h"
#include "run_cost.h"

namespace qd::fuzz {

constexpr double kPlanMaxRunElements = 1e6;  // sum of all value sizes after prepare
constexpr double kPlanMaxRunMacs = 2e7;

// Overwrites the last 8 bytes with the checksum of the rest.
inline std::string reseal_plan(std::string bytes) {
  if (bytes.size() < 8) return bytes;
  const uint64_t sum = plan_checksum(bytes.data(), bytes.size() - 8);
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
  return bytes;
}

// True when the graph prepared at these shapes is small enough to run under ASan quickly.
inline bool small_enough(const PlanSection& graph, const std::map<std::string, Shape>& shapes) {
  auto g = decode_graph(graph.data);
  if (!g) return false;
  PrepareOptions opt;
  opt.input_shapes = shapes;
  if (!prepare_graph(*g, opt).is_ok()) return false;
  double elements = 0, work = 0;
  return run_cost(*g, &elements, &work) && elements <= kPlanMaxRunElements && work <= kPlanMaxRunMacs;
}

inline Status plan_one_input(const std::string& raw, bool* ran = nullptr) {
  if (ran) *ran = false;
  const std::string bytes = reseal_plan(raw);
  auto plan = decode_plan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!plan) return plan.status();
  if (const PlanSection* s = plan->find("io")) (void)decode_plan_io(s->data);
  if (const PlanSection* s = plan->find("layers")) (void)decode_plan_layers(s->data);
  (void)check_plugin_list(*plan);
  if (plan->header.target == "cuda") {
    // What a CUDA plan's loader parses before it needs the GPU: its sections, the inputs its options give the graph,
    // and the graph prepared at the shapes it was built for (the rest is lowering on the device).
    auto parts = decode_cuda_plan(*plan);
    if (!parts) return parts.status();
    (void)batch_splits(parts->kernels);  // what `qdeploy inspect` lists
    std::map<std::string, Shape> shapes;
    auto inputs = engine_inputs(parts->graph, parts->options, &shapes);
    if (!inputs) return inputs.status();
    PrepareOptions opt;
    opt.input_shapes = shapes;
    return prepare_graph(parts->graph, opt);
  }
  if (plan->header.target != "cpu") return Status::ok();
  auto engine = load_cpu_engine(*plan);
  if (!engine) return engine.status();
  // Dims chosen at run time become 2.
  std::map<std::string, Shape> shapes;
  for (const TensorDesc& d : (*engine)->inputs()) {
    Shape s = d.shape;
    for (auto& x : s) x = x < 0 ? 2 : x;
    shapes[d.name] = s;
  }
  if (!small_enough(*plan->find("graph"), shapes)) return Status::ok();
  std::map<std::string, Tensor> feeds;
  for (const TensorDesc& d : (*engine)->inputs()) {
    auto t = Tensor::make(d.dtype, shapes[d.name]);
    if (!t) return t.status();
    for (int64_t i = 0; i < t->numel(); ++i) t->set_f64(i, is_float(d.dtype) ? 0.125 * (i % 16) - 1.0 : i % 3);
    feeds[d.name] = std::move(*t);
  }
  if (ran) *ran = true;
  return (*engine)->run(feeds).status();
}

}  // namespace qd::fuzz
