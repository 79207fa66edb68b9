// The CUDA builder's lowering of a prepared, fused graph (passes/: BatchNorm folding, conv activation and residual as
// FusedConv) to layers (layers.h): layout choice (NHWC fp16 around the tensor-core convs, NCHW in the ONNX dtype
// elsewhere, reformats at the borders), INT8 quantization points, Concat in place, kernel choice (plan/tactics.h) and
// the activation memory plan. One class, its members defined by concern:
//   lower.cpp           run(), tensors and reformats, generic layers, stream schedule and memory plan
//   lower_conv.cpp      convs and linear layers (stem space-to-depth, epilogues, weight packing), sibling-conv merging
//   lower_movement.cpp  MaxPool / Resize / Concat on NHWC tensors, in INT8 where a Concat feeds INT8 convs
//   lower_head.cpp      elementwise chains and the detection head's slice/concat decode
//   lower_plugin.cpp    plugin ops (qdeploy/plugin.h)
//   conv_tactics.cpp    the conv kernels' candidates, their timing and the in-network refinement
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_target.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/instance.h"
#include "backends/cuda/kernels/eltwise_chain.h"
#include "backends/cuda/layers.h"
#include "ops/fused.h"
#include "ops/op_geometry.h"
#include "ops/window.h"
#include "plan/layout.h"
#include "plan/tactics.h"
#include "runtime/io_format.h"

namespace qd::cuda {

constexpr int round_up(int v, int m) { return (v + m - 1) / m * m; }
inline bool is_conv(OpType op) { return op == OpType::Conv || op == OpType::FusedConv; }
// Ops whose layers read NHWC fp16 (or int8) tensors on the fast path.
inline bool nhwc_reader(OpType op) {
  return is_conv(op) || op == OpType::MaxPool || op == OpType::MaxPoolChain || op == OpType::Resize ||
         op == OpType::Concat;
}
// A layer's name in profiles: the node's, joined by the nodes a fusion pass folded into it.
std::string layer_name(const Node& n);

// The convs (and Gemms, MatMuls) the reference runs in INT8, by the precision plan of the graph before fusion
// (quant/precision_plan.h), and the scale each one's input is quantized with (per value; 0: none). Fusion keeps the
// convs' names and their inputs' value ids, so the choice holds for the fused graph. The same for every shape: the
// first lowering fills in.int8_convs, later ones take it.
struct Int8Choice {
  std::set<std::string> convs;
  std::vector<float> scale;
};
Expected<Int8Choice> choose_int8(const Graph& g, const LowerInput& in);

class Lowerer {
 public:
  Lowerer(Graph g, const LowerInput& in, Int8Choice int8)
      : g_(std::move(g)), in_(in), inst_(std::make_shared<Instance>()) {
    int8_convs_ = std::move(int8.convs);
    qscale_ = std::move(int8.scale);
    fast_ = in.opt->precision == Precision::kFp16 || in.opt->precision == Precision::kInt8;
  }

  Expected<std::shared_ptr<Instance>> run();

 private:
  // ---- tensors, layers and reformats (lower.cpp) ----
  TensorRef generic_ref(int v) const;
  // Whether binding d holds value v as the ONNX graph has it (its dtype, NCHW).
  bool in_onnx_form(const TensorDesc& d, int v) const {
    return d.dtype == g_.values[v].dtype && d.layout == TensorLayout::kNCHW;
  }
  TensorRef binding_ref(int v, const TensorDesc& f) const;
  Expected<int> add_convert(int src, int dst, const std::string& suffix);
  int add_tensor(TensorRef r);
  int nhwc_tensor(const Shape& shape, DType dtype = DType::kFloat16);
  void add_layer(std::unique_ptr<Layer> l);
  Expected<int> ensure_generic(int v);
  Expected<int> ensure_fast(int v);
  bool is_float4d(int v) const {
    return v >= 0 && g_.values[v].dtype == DType::kFloat32 && g_.values[v].shape.size() == 4 && !g_.is_constant(v);
  }
  // Only node consuming v (and v not a graph output), or -1.
  int sole_consumer(int v) const {
    if (is_output_[v] || uses_[v] != 1 || consumers_[v].size() != 1) return -1;
    return consumers_[v][0];
  }
  bool int8_conv_input(int c, int v) const;
  Status resolve(int v);
  Status lower_node(int i);
  bool try_view(const Node& n);
  Status lower_generic(int i);

  // ---- after every node: layer order, streams, memory (lower.cpp) ----
  void reindex_layers();
  void drop_unread_out2();
  void schedule_streams();
  Status plan();
  void apply_epilogue_policy();

  // ---- convs (lower_conv.cpp) ----
  Status plan_s2d();
  static Shape s2d_shape(const Shape& x) { return {x[0], 4 * x[1], x[2] / 2, x[3] / 2}; }
  Expected<int> ensure_s2d(int v, bool int8);
  Expected<int> image_stem_input(int v, const ops::ConvGeom& geo, bool int8);
  Status bind_residual(ConvLayer& l, int v);
  Status try_fused_conv(int i, bool* lowered);
  const std::vector<float>* qat_weight_scales(int w) const;
  Status lower_linear(int i);
  int bias_add(int y, int64_t K) const;
  Expected<int> ensure_rows_f16(int v, int64_t N, int64_t C);
  Status merge_sibling_convs();
  static bool mergeable(const ConvLayer& c) {
    const bool out_ok = c.int8 ? c.p.out_format == OutFormat::kNhwcI8 && !c.p.exact_silu && c.p.out_split > c.p.K
                               : c.p.out_format == OutFormat::kNhwcF16;
    return out_ok && c.groups == 1 && c.res < 0 && c.out2 < 0 && c.p.in_format == InFormat::kNhwc;
  }
  static bool same_conv_but_k(const ConvParams& a, const ConvParams& b) {
    return a.N == b.N && a.H == b.H && a.W == b.W && a.C == b.C && a.R == b.R && a.S == b.S &&
           a.stride_h == b.stride_h && a.stride_w == b.stride_w && a.pad_h == b.pad_h && a.pad_w == b.pad_w &&
           a.dil_h == b.dil_h && a.dil_w == b.dil_w && a.OH == b.OH && a.OW == b.OW && a.Kp == b.Kp &&
           a.act == b.act && a.act_a == b.act_a && a.act_b == b.act_b && a.exact_silu == b.exact_silu;
  }
  int producer_index(int t) const {
    const auto it = producer_.find(t);
    return it == producer_.end() ? -1 : it->second;
  }
  bool readers_done_by(int t, int last) const;

  // ---- MaxPool, Resize, Concat on NHWC tensors (lower_movement.cpp) ----
  Status try_int8_concat(int i, bool* lowered);
  Status try_nhwc_movement(int i, bool* lowered);
  int pooled_value(int v) const;
  Status lower_pool_chain(int i);
  void concat_in_place();

  // ---- elementwise chains and the detection head's decode (lower_head.cpp) ----
  // How an elementwise chain's constant tensors are read (EwOperand, without the device pointer yet).
  using EwConstants = std::vector<std::pair<const Tensor*, EwOperand>>;
  static bool ew_step(const ops::ElementwiseStep& es, const Shape& xs, const Tensor* c, EwStep* st,
                      EwConstants* operands);
  Expected<bool> chain_step(const Node& n, int x, EwStep* st, EwConstants* operands);
  Status upload_operands(const EwConstants& operands, EwProgram* prog);
  Status try_eltwise_chain(int i, bool* lowered);
  Status plan_slice_concats();
  Status lower_slice_concat(int i);

  // ---- channels-last rows between linear layers: fp16 rows, LayerNorm with its residual Add (lower_rows.cpp) ----
  bool reads_f16_rows(int c, int v) const;
  bool row_view(int c) const;
  bool f16_rows_only(int v) const;
  bool try_row_view(int i);
  bool nhwc_transpose(int c, bool to_rows) const;
  bool fast_reader(int v) const;
  bool row_norm_reads_f16(int c, int v) const;
  int view_tensor(int t, const Shape& shape);
  Expected<bool> try_nhwc_transpose(int i);
  // A ConvNeXt block's end after a linear layer (nchw_residual): the nodes a linear layer's epilogue absorbs.
  struct NchwResidual {
    int transpose = -1, mul = -1, add = -1;
    int residual = -1;              // the Add's other input
    const Tensor* scale = nullptr;  // the Mul's per-channel layer scale, or null
  };
  std::optional<NchwResidual> nchw_residual(int y, int64_t K) const;
  Expected<int> rows_to_generic(int v);
  bool row_norm_fits(int i) const;
  bool residual_add(int a, int ln) const;
  void plan_row_norms();
  Status lower_row_norm(int i);

  // ---- plugin ops (lower_plugin.cpp) ----
  // A plugin input read in place as a column slice of a wider tensor.
  struct InPlaceSlice {
    int source = -1;     // the sliced value
    int64_t column = 0;  // first column
  };
  std::optional<InPlaceSlice> column_slice(int v, std::vector<int>* nodes) const;
  void plan_plugin_slices();
  Status lower_plugin(int i);

  // ---- conv kernel choice (conv_tactics.cpp) ----
  // 0: no residual, 1: fp16, 2: int8.
  static int residual_kind(const ConvLayer& c) { return c.res < 0 ? 0 : c.p.res_scale != 0.f ? 2 : 1; }
  static std::string signature(const ConvParams& p, int res, bool int8);
  static std::string signature(const ConvLayer& c);
  static std::string legacy_signature(const ConvLayer& c) { return signature(c.p, residual_kind(c), c.int8); }
  // Candidates: every tile configuration, split-K over 2..8 ranges for layers too small to fill the GPU, and
  // cuDNN's algorithms for fp16 layers (BuildOptions::tactic_sources picks the sources).
  struct Candidate {
    int config, splits;
    int algo = -1;         // cuDNN's algorithm, or -1 for qdeploy's kernel
    bool cluster = false;  // split-K inside a thread-block cluster (ConvParams::split_in_cluster)
  };
  static std::string candidate_name(const Candidate& c);
  // A candidate that may fail to launch on this GPU (a cuDNN algorithm, a cluster too large for its SMs) is left out;
  // qdeploy's other kernels must run.
  static bool optional(const Candidate& c) { return c.algo >= 0 || c.cluster; }
  bool uses_source(const char* source) const;
  ConvParams launch_params(const ConvLayer& c) const;
  std::vector<Candidate> candidates(const ConvLayer& c) const;
  std::vector<Candidate> own_candidates(const ConvLayer& c) const;
  Status use(ConvLayer* c, const Candidate& cand, bool warm = true) const;
  bool apply(ConvLayer* c, const std::string& name) const;
  class ConvTactics;
  class ConvTimer;
  Status choose_kernels();
  static float refine_keep(int batch) { return batch == 1 ? 0.998f : 0.995f; }
  Status refine_in_graph(const std::map<std::string, std::vector<std::string>>& close, const Pointers& ptrs,
                         DeviceBuffer* workspace, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1,
                         TacticChoices* choices) const;

  Graph g_;
  const LowerInput& in_;
  std::shared_ptr<Instance> inst_;
  bool fast_ = false;
  LayoutPlan layout_;  // where each node runs (plan_layouts over CudaTarget), decided before any layer is made
  std::vector<int> gen_, fast_t_, uses_;
  std::vector<int> io_in_;  // per value: the slot tensor of an input given in a format other than the ONNX form
  // SliceConcat nodes, each lowered as one SliceConcatLayer (plan_slice_concats).
  struct SliceConcatPlan {
    int src = -1;                          // the value every input slices
    std::vector<SliceSegment> seg;  // columns (the programs are filled when lowered)
    int reshape = -1, target = -1;  // the Reshape and the axis-1 Concat the result lands in, or -1
    int binding = -1;               // the output slot written directly (an fp16 binding), or -1
  };
  std::map<int, SliceConcatPlan> slice_concat_;
  std::map<int, std::map<int, InPlaceSlice>> plugin_slices_;  // plugin node -> its inputs read in place
  std::map<int, int> plugin_slice_reader_;         // a Slice (or Reshape) read in place -> the plugin node
  std::set<int> f16_plugins_;                      // plugin nodes run in fp16 on fp16 rows (fp16 plans)
  std::map<int, int> row_norms_;  // LayerNorm nodes run as RowNormLayer -> the residual Add they absorb, or -1
  std::set<int> slice_sources_;                    // values read only by one SliceConcat, whose transposed tile
                                                   // fits its kernel (slice_concat_transposed_fits)
  std::set<int> half_sources_;                     // those whose slice_concat writes an fp16 binding
  std::map<int, int> bound_outputs_;               // graph output -> the tensor in its slot, written by a layer
  std::map<int, std::pair<int, int>> transposed_;  // such a value held transposed by a head conv: tensor, H*W
  std::vector<std::vector<int>> consumers_;
  std::vector<bool> is_output_, done_;
  std::vector<size_t> buffer_bytes_;
  std::vector<int> buffer_users_;  // tensors on each buffer (views share their source's)
  std::map<int, int> producer_;  // tensor -> layer writing it
  std::set<std::string> int8_convs_;  // INT8 plans: the convs and linear layers choose_int8 puts in INT8
  std::vector<float> qscale_;         // per value: the scale it is quantized with (0: not quantized)
  std::vector<int> q8_;               // per value: its int8 NHWC tensor, once quantized (s2d layout for s2d_ values)
  std::vector<bool> s2d_;             // per value: a graph input the stem convs read as its space-to-depth
  std::vector<int> s2d_t_;            // its fp16 space-to-depth tensor, once made
  // Per value: its rows [numel / C, C] as fp16 (C its last dim), what fp16 linear layers read: converted from the
  // fp32 value (ensure_rows_f16), or written directly by a producer whose readers all read them (lower_rows.cpp).
  std::map<int, int> rows_f16_;
  std::map<int, bool> aliased_;
  std::set<int> int8_resizes_;  // Resize nodes try_int8_concat moved to int8 (they no longer read the fp16 tensor)
  std::vector<std::vector<int>> int8_concat_slices_;  // try_int8_concat's: each Concat's input tensors, in order
  std::vector<int> conv_layers_;
};

}  // namespace qd::cuda
