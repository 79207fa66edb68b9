// Helpers shared by the unit tests.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "tasks/image_io.h"

namespace qd::test {

// Root of the source tree (for shipped models and test data).
std::string source_dir();
// A fresh, empty temporary directory for one test.
std::string temp_dir(const std::string& tag);
// The timing cache the GPU tests' builds share: the file QD_TEST_TIMING_CACHE names, or "" (each build times its
// kernels). scripts/gpu-check.sh's sanitizer step fills it in a plain run of the same tests, so that the run under
// compute-sanitizer reuses those picks instead of timing every candidate at the sanitizer's pace.
std::string shared_timing_cache();
// Tensor of the given shape filled from a seeded uniform distribution in [lo, hi).
Tensor random_f32(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f);
// A deterministic RGB image with detail at every scale (so that two resampling kernels give different bytes).
Image pattern_image(int w, int h, uint32_t seed);
// max |a - b| over all elements (shapes must match; returns +inf otherwise).
double max_abs_diff(const Tensor& a, const Tensor& b);
// Signal-to-noise ratio of float tensor x against ref in dB: 10 log10(sum ref^2 / sum (ref - x)^2); 200 when equal.
double snr_db(const Tensor& ref, const Tensor& x);
// A min-max calibration cache (TensorRT text format) for the ONNX model's input `input`, from the one batch `feed`
// (the model is prepared for its shape), written to `path`.
Status write_minmax_cache(const std::string& model, const std::string& input, const Tensor& feed,
                          const std::string& path);
// The same for graph `g` (a copy prepared for the feeds' shapes) and its inputs `feeds`.
Status write_minmax_cache(const Graph& g, const std::map<std::string, Tensor>& feeds, const std::string& path);
// An exported model of batch 1 made dynamic: its inputs' first dim becomes "batch", and each Reshape whose constant
// target shape starts with 1 copies that dim from its input (0) instead. The shipped models at any batch.
Graph with_dynamic_batch(Graph g);

// Small graphs for pass and op tests: float32 inputs, constants, and one-output nodes (opset 13) whose output value
// is named "<node>_out".
struct GraphBuilder {
  Graph g;
  int input(const std::string& name, const Shape& s);
  int constant(const std::string& name, Tensor t);
  int node(OpType op, const std::string& name, std::vector<int> in, AttrMap attrs = {});
  // A copy of the graph through prepare_graph (a test failure when that fails).
  Graph prepared();
};
// The number of nodes of op `op`; the node named `name` (nullptr when there is none).
int count_op(const Graph& g, OpType op);
const Node* find_node(const Graph& g, const std::string& name);
// Both graphs on the reference: same output names and shapes, values within `tol` times each output's range (at
// least 1; tol 0: the same bits).
void expect_same_outputs(const Graph& a, const Graph& b, const std::map<std::string, Tensor>& in, double tol);

}  // namespace qd::test
