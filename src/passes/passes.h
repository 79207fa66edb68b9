// Graph passes: one per file, each a function over ir::Graph. pipeline.cpp holds the order.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "core/shape.h"
#include "ir/graph.h"

namespace qd {

// Binds the graph inputs' symbolic or unknown dims to concrete shapes. `shapes` maps input names to full shapes;
// a dim named in several inputs (e.g. "batch") must get the same value everywhere. Inputs not listed keep their
// declared shape; a symbolic dim left unbound is an error naming it and the flag to set it.
Status bind_input_shapes(Graph& g, const std::map<std::string, Shape>& shapes);
// Infers dtype and shape of every value from the graph inputs and constants, node by node.
Status infer_shapes(Graph& g);
// Infers shapes node by node and evaluates nodes whose inputs are all constants (and Shape/Size of statically shaped
// values) into constants, in one topological pass; returns the number of nodes folded. Nodes whose results would
// take more than max_bytes, or whose evaluation more than max_work (ir/cost.h's node_work), stay as nodes:
// a small untrusted model must not make preparing it take seconds.
Expected<int> fold_constants(Graph& g, size_t max_bytes = size_t{64} << 20, int64_t max_work = int64_t{1} << 26);

// Whether a prepared (shape-bound) graph computes each item of its batch from that item alone, so that the batch may
// run as separate parts: every input has the batch as its first dim, every op keeps items apart along it (no
// reduction, normalization, concatenation, slice or gather across the batch, no parameter per batch index), and
// every output has the batch first. Conservative: an op it does not know is an `unsupported` error naming it.
Status check_batch_split(const Graph& g);

struct FuseParallelLinearOptions {
  // false: only pairs whose results are read by plugin ops alone (through Reshapes), which read the slices in place
  // (DCNv4's value and offsets); true: every pair.
  bool all = false;
  // Also 1x1 convolutions (stride 1, no padding, one group), joined along the output channels.
  bool convs = false;
};
// Two linear layers reading the same tensor (MatMul with a constant [C, K] weight and an optional bias Add, Gemm with
// constant weights, 1x1 Conv) become one with concatenated weights, followed by two Slices of its output's last axis
// (channels for convs) that keep the old result names. Same products, one GEMM. Returns the number of pairs fused; the
// graph's shapes are inferred again.
Expected<int> fuse_parallel_linear(Graph& g, const FuseParallelLinearOptions& opt = {});

// ---- fusion passes: each rewrites nodes into a fused op of ops/fused.h; the reference runs the result ----
// Conv -> BatchNormalization with constant parameters becomes one Conv with the normalization in its weights and
// bias (convs named in `keep` stay apart: an INT8 conv, which the reference quantizes before normalizing). Returns
// the number folded.
Expected<int> fold_batch_norm(Graph& g, const std::set<std::string>& keep = {});
// Conv -> activation (Relu, Sigmoid, LeakyRelu, HardSwish, HardSigmoid, Clip with constant bounds, x * Sigmoid(x))
// becomes a FusedConv applying it; the node keeps the conv's name. Returns the number fused.
Expected<int> fuse_conv_activation(Graph& g);
// Conv or FusedConv -> Add(result, shortcut) becomes a FusedConv adding the shortcut after its activation, when the
// shortcut has the result's type and shape and is computed before the conv. Returns the number fused.
Expected<int> fuse_conv_residual(Graph& g);
// Whether a target runs a chain of `pools` same-size MaxPools over an input of shape `x` as one MaxPoolChain.
using PoolChainRule = std::function<bool(const Shape& x, int pools)>;
// MaxPools that each pool the one before with the same size-keeping window (SPPF) become one MaxPoolChain, as long
// as `fits` agrees (null: none). Returns the number of chains.
Expected<int> fuse_pool_chains(Graph& g, const PoolChainRule& fits);
// GELU written out as x * 0.5 * (1 + Erf(x / sqrt(2))) (exports before opset 20; the products in any of the orders
// exporters use) becomes one Gelu node (approximate "none"). Returns the number fused.
Expected<int> fuse_gelu(Graph& g);
// Whether a target runs SliceConcat node `fused` (not yet in g; its inputs are g's values) as one layer.
using SliceConcatRule = std::function<bool(const Graph& g, const Node& fused)>;
// A Concat along the last axis of Slices of one tensor's last axis, each directly or through elementwise steps with
// constants (a detector head's decode), becomes one SliceConcat that keeps the Concat's name, as long as `fits`
// agrees (null: none). Returns the number fused.
Expected<int> fuse_slice_concat(Graph& g, const SliceConcatRule& fits);
struct FusionCounts {
  int batch_norms = 0, activations = 0, residuals = 0, pool_chains = 0, gelus = 0, slice_concats = 0;
};
// What the target's kernels decide about the fusions: the pool chains and head decodes it runs as one layer.
struct FusionRules {
  PoolChainRule pool_chain;
  SliceConcatRule slice_concat;
};
// The builder's fusions in their order (BatchNorm, activation, residual, pool chains, GELU, slice/concat decodes);
// `keep_bn` as fold_batch_norm's `keep`.
Expected<FusionCounts> fuse_graph(Graph& g, const std::set<std::string>& keep_bn = {}, const FusionRules& rules = {});

struct PrepareOptions {
  std::map<std::string, Shape> input_shapes;
};
// The standard pipeline run on an imported graph before execution or building: bind shapes, infer shapes while
// folding constants (this folds shape subgraphs such as Shape->Gather->Concat->Reshape), drop dead nodes.
Status prepare_graph(Graph& g, const PrepareOptions& opt);

}  // namespace qd
