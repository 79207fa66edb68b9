// The ONNX fuzz harness, shared by the libFuzzer target and the regression test that replays
// tests/fuzz/regressions/onnx/*: import from memory (no external data), prepare with small bound shapes, and run the
// reference backend when the graph is small. Every error is fine; a crash, a sanitizer report, a leak, a hang or a
// kInternal status (returned, for the caller to check) is a bug.
#pragma once

#include <map>
#include <string>

#include "ir/cost.h"
#include "onnx/importer.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "run_cost.h"

namespace qd::fuzz {

// Limits that keep one input fast under ASan: a run happens only below these.
constexpr double kMaxRunElements = 1e6;  // sum of all value sizes after prepare
constexpr double kMaxRunMacs = 2e7;

inline Status onnx_one_input(const std::string& bytes, bool* ran = nullptr) {
  if (ran) *ran = false;
  auto imported = import_onnx_bytes(bytes, "", "fuzz");
  if (!imported) return imported.status();
  Graph& g = *imported;
  // Symbolic dims become 2; inputs without a declared shape stay unbound (an error from prepare).
  PrepareOptions opt;
  for (int v : g.inputs) {
    const Value& val = g.values[v];
    if (!val.has_shape) continue;
    Shape s = val.shape;
    for (auto& d : s) d = d < 0 ? 2 : d;
    opt.input_shapes[val.name] = s;
  }
  QD_RETURN_IF_ERROR(prepare_graph(g, opt));
  // The CUDA engine's batch-split analysis reads every prepared graph: any answer is fine, a crash is not.
  (void)check_batch_split(g);
  double elements = 0, macs = 0;
  if (!run_cost(g, &elements, &macs)) return Status::ok();
  if (elements > kMaxRunElements || macs > kMaxRunMacs) return Status::ok();
  std::map<std::string, Tensor> feeds;
  for (int v : g.inputs) {
    const Value& val = g.values[v];
    auto t = Tensor::make(val.dtype, val.shape);
    if (!t) return t.status();
    for (int64_t i = 0; i < t->numel(); ++i) t->set_f64(i, is_float(val.dtype) ? 0.125 * (i % 16) - 1.0 : i % 3);
    feeds[val.name] = std::move(*t);
  }
  if (ran) *ran = true;
  return run_reference(g, feeds).status();
}

}  // namespace qd::fuzz
