// Lowering a prepared, fused graph (passes/: BatchNorm folding, conv activation and residual as FusedConv) to CUDA
// layers: layout choice (NHWC fp16 around the fused convolutions, NCHW in the ONNX dtype elsewhere, reformats at the
// borders), Concat in place, kernel choice (plan/tactics.h) and the activation memory plan.
#include <algorithm>
#include <climits>
#include <optional>
#include <set>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/instance.h"
#include "backends/cuda/kernels/eltwise_chain.h"
#include "backends/cuda/kernels/pdl_policy.h"
#include "backends/cuda/plugin_layer.h"
#include "core/half.h"
#include "ir/cost.h"
#include "ops/fused.h"
#include "ops/op.h"
#include "ops/op_geometry.h"
#include "ops/plugin_registry.h"
#include "ops/window.h"
#include "passes/passes.h"
#include "plan/memory_plan.h"
#include "plan/stream_schedule.h"
#include "plan/tactics.h"
#include "runtime/io_format.h"

namespace qd::cuda {

namespace {

constexpr int round_up(int v, int m) { return (v + m - 1) / m * m; }
bool is_conv(OpType op) { return op == OpType::Conv || op == OpType::FusedConv; }
// A layer's name in profiles: the node's, joined by the nodes a fusion pass folded into it.
std::string layer_name(const Node& n) {
  std::string s = n.name;
  if (n.op != OpType::FusedConv) return s;
  if (auto f = ops::fused_conv_attrs(n)) {
    for (const std::string& x : f->fused) s += "+" + x;
  }
  return s;
}

std::string fmt_nhwc(const TensorRef& t) { return "nhwc" + std::to_string(t.ld) + ":" + io_dtype_name(t.dtype); }
std::string fmt_of(const TensorRef& t) {
  return t.nhwc ? fmt_nhwc(t) : "nchw:" + std::string(dtype_name(t.dtype));
}

// ---- layers ----

class ConvLayer final : public Layer {
 public:
  ConvParams p;
  std::shared_ptr<PackedConv> w;
  int config = 0;
  std::shared_ptr<const CudnnConv> cudnn;  // when cuDNN computes the convolution (then `config` is unused)
  bool int8 = false;
  float* workspace = nullptr;  // set while timing; otherwise the instance's conv workspace region of the arena
  int in = -1, res = -1, out = -1;
  int out2 = -1;  // the second output (ConvArgs::y2; its format in p.out2_*), or -1
  int groups = 1, group_channels = 0;  // grouped INT8 convs: conv_grouped_i8, no tile configuration
  bool small_acc_ok = true;  // KernelPolicy::small_acc (ConvParams::small_acc where the weights allow)

  // The pointer/stride fields depend on where tensors ended up (Concat slices), so they are filled at launch.
  ConvArgs args(const Instance& inst, const Pointers& ptrs, ConvParams* q) const {
    *q = p;
    const TensorRef& x = inst.tensors[in];
    const TensorRef& y = inst.tensors[out];
    q->in_ld = x.ld;
    q->small_acc = small_acc_ok && int8 && w->acc_bound < kSmallAccLimit;
    ConvArgs a;
    a.x = static_cast<const char*>(inst.ptr(in, ptrs)) + x.coff * dtype_size(x.dtype);
    a.w = w->w.get();
    a.bias = static_cast<const float*>(w->bias.get());
    a.alpha = static_cast<const float*>(w->alpha.get());
    if (res >= 0) {
      const TensorRef& r = inst.tensors[res];
      const char* base = static_cast<const char*>(inst.ptr(res, ptrs)) + r.coff * dtype_size(r.dtype);
      if (r.dtype == DType::kInt8) {
        a.residual_i8 = reinterpret_cast<const int8_t*>(base);
      } else {
        a.residual = reinterpret_cast<const __half*>(base);
      }
      q->res_ld = r.ld;
    }
    a.y = inst.ptr(out, ptrs);
    if ((p.splits > 1 && !p.split_in_cluster) || cudnn) {
      const size_t region = side ? inst.side_splitk_offset : inst.splitk_offset;  // the stream's own
      a.workspace = workspace ? workspace : reinterpret_cast<float*>(ptrs.arena + region);
    }
    if (y.nhwc) {
      q->out_ld = y.ld;
      q->out_coff = y.coff;
    }
    if (out2 >= 0) {
      a.y2 = inst.ptr(out2, ptrs);
      q->out2_ld = inst.tensors[out2].ld;
      q->out2_coff = inst.tensors[out2].coff;
    }
    return a;
  }
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    ConvParams q;
    ConvArgs a = args(inst, ptrs, &q);
    if (cudnn) return cudnn->run(q, a, a.workspace, s);
    if (groups > 1) return launch_conv_grouped_i8(q, a, groups, group_channels, w->C, s);
    return launch_conv_igemm(q, a, config, s);
  }
  // Scratch memory of the chosen kernel (split-K partial sums, or cuDNN's result and workspace).
  size_t workspace_bytes() const { return cudnn ? cudnn->workspace_bytes() : conv_igemm_workspace(p); }
};

class ReformatLayer final : public Layer {
 public:
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& x = inst.tensors[ins[0]];
    const TensorRef& y = inst.tensors[outs[0]];
    const Shape& sh = x.shape;
    const int N = static_cast<int>(sh[0]), C = static_cast<int>(sh[1]), H = static_cast<int>(sh[2]),
              W = static_cast<int>(sh[3]);
    if (y.nhwc) return nchw_to_nhwc(inst.ptr(ins[0], ptrs), x.dtype, inst.view(outs[0], ptrs), N, C, H, W, s);
    return nhwc_to_nchw(inst.view(ins[0], ptrs), inst.ptr(outs[0], ptrs), y.dtype, N, C, H, W, s);
  }
};

// Space-to-depth of a stem conv's input (see Lowerer::plan_s2d): NCHW (or an NHWC input binding) -> NHWC fp16, or
// int8 quantized with `scale`.
class SpaceToDepthLayer final : public Layer {
 public:
  float scale = 1.f;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& y = inst.tensors[outs[0]];
    const Shape& sh = inst.tensors[ins[0]].shape;
    return nchw_to_s2d(inst.any_view(ins[0], ptrs), inst.view(outs[0], ptrs), y.dtype, scale,
                       static_cast<int>(sh[0]), static_cast<int>(sh[1]), static_cast<int>(sh[2]),
                       static_cast<int>(sh[3]), s);
  }
};

// A tensor in another dtype and/or layout: the I/O bindings' formats (--input-format / --output-format) to and from
// what the layers read and write.
class ConvertLayer final : public Layer {
 public:
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const Shape& sh = inst.tensors[ins[0]].shape;
    const bool four = sh.size() == 4;
    const int N = four ? static_cast<int>(sh[0]) : 1;
    const int C = four ? static_cast<int>(sh[1]) : static_cast<int>(numel(sh));
    const int HW = four ? static_cast<int>(sh[2] * sh[3]) : 1;
    return convert_tensor(inst.any_view(ins[0], ptrs), inst.any_view(outs[0], ptrs), N, C, HW, s);
  }
};

// [K, C, R, S] -> [K, 4C, R/2, S/2] with w'[k][(dy * 2 + dx) * C + c][i][j] = w[k][c][2i + dy][2j + dx]: the weights of
// the stride-1 conv over the space-to-depth input that computes the stride-2 conv (R and S even).
Tensor space_to_depth_weights(const Tensor& w) {
  const Shape& s = w.shape();
  const int64_t K = s[0], C = s[1], R = s[2], S = s[3];
  Tensor out(DType::kFloat32, {K, 4 * C, R / 2, S / 2});
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t q = 0; q < S; ++q) {
          const int64_t c2 = ((r % 2) * 2 + q % 2) * C + c;
          dst[((k * 4 * C + c2) * (R / 2) + r / 2) * (S / 2) + q / 2] = src[((k * C + c) * R + r) * S + q];
        }
      }
    }
  }
  return out;
}

// A conv input's quantization (once per tensor): the int8 NHWC copy for the INT8 convs, and the dequantized value
// every other consumer reads.
class QuantizeLayer final : public Layer {
 public:
  float scale = 1.f;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& x = inst.tensors[ins[0]];
    const Shape& sh = inst.tensors[outs[0]].shape;  // 4-d (a Gemm's [N, C] input as [N, C, 1, 1])
    const bool dq = outs.size() > 1;  // the dequantized value, when a consumer other than the INT8 convs reads it
    return quantize_nhwc_i8(inst.ptr(ins[0], ptrs), x.nhwc, inst.view(ins[0], ptrs), inst.view(outs[0], ptrs),
                            dq ? inst.ptr(outs[1], ptrs) : nullptr, dq ? inst.view(outs[1], ptrs) : NhwcView{},
                            static_cast<int>(sh[0]),
                            static_cast<int>(sh[1]), static_cast<int>(sh[2]), static_cast<int>(sh[3]), scale, s);
  }
};

class MaxPoolLayer final : public Layer {
 public:
  PoolParams p;
  bool int8 = false;  // on int8 tensors (Lowerer::try_int8_concat)
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    return int8 ? maxpool_nhwc_i8(inst.view(ins[0], ptrs), inst.view(outs[0], ptrs), p, s)
                : maxpool_nhwc(inst.view(ins[0], ptrs), inst.view(outs[0], ptrs), p, s);
  }
};

// SPPF's chain of same-size max pools, one output per pool (Lowerer::try_pool_chain).
class MaxPoolChainLayer final : public Layer {
 public:
  int N = 0, C = 0, H = 0, W = 0, kh = 1, kw = 1;
  bool int8 = false;  // on int8 tensors (Lowerer::try_int8_concat)
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    NhwcView y[kMaxPoolChain];
    for (size_t k = 0; k < outs.size() && k < kMaxPoolChain; ++k) y[k] = inst.view(outs[k], ptrs);
    return maxpool_chain_nhwc(inst.view(ins[0], ptrs), y, static_cast<int>(outs.size()), N, C, H, W, kh, kw, int8,
                              s);
  }
};

class UpsampleLayer final : public Layer {
 public:
  int N = 0, C = 0, H = 0, W = 0, fh = 1, fw = 1;
  bool int8 = false;  // on int8 tensors (Lowerer::try_int8_concat)
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    return (int8 ? upsample_nearest_nhwc_i8 : upsample_nearest_nhwc)(inst.view(ins[0], ptrs),
                                                                     inst.view(outs[0], ptrs), N, C, H, W, fh, fw, s);
  }
};

class ConcatLayer final : public Layer {
 public:
  std::vector<bool> in_place;  // inputs their producers already wrote into the output
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& y = inst.tensors[outs[0]];
    int coff = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      const TensorRef& x = inst.tensors[ins[i]];
      const int C = static_cast<int>(x.shape[1]);
      if (!in_place[i]) {
        NhwcView dst = inst.view(outs[0], ptrs);
        dst.coff += coff;
        QD_RETURN_IF_ERROR(copy_channels_nhwc(inst.view(ins[i], ptrs), dst, static_cast<int>(y.shape[0]), C,
                                              static_cast<int>(y.shape[2]), static_cast<int>(y.shape[3]), s));
      }
      coff += C;
    }
    return Status::ok();
  }
};

class GenericLayer final : public Layer {
 public:
  std::unique_ptr<GenericKernel> kernel;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    std::vector<const void*> in(ins.size(), nullptr);
    std::vector<void*> out(outs.size(), nullptr);
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i] >= 0) in[i] = inst.ptr(ins[i], ptrs);
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] >= 0) out[i] = inst.ptr(outs[i], ptrs);
    }
    if (workspace >= 0) kernel->set_workspace(ptrs.arena + (*ptrs.offsets)[workspace]);
    return kernel->launch(in, out, s);
  }
};

class EltwiseChainLayer final : public Layer {
 public:
  EwProgram prog;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& y = inst.tensors[outs[0]];
    return launch_eltwise_chain(static_cast<const float*>(inst.ptr(ins[0], ptrs)),
                                static_cast<float*>(inst.ptr(outs[0], ptrs)), numel(y.shape), prog, s);
  }
};

class SliceConcatLayer final : public Layer {
 public:
  SliceConcatParams p;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    return launch_slice_concat(inst.ptr(ins[0], ptrs), inst.tensors[ins[0]].dtype, inst.ptr(outs[0], ptrs),
                               inst.tensors[outs[0]].dtype, p, s);
  }
};

class CopyLayer final : public Layer {
 public:
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const size_t n = inst.tensors[outs[0]].bytes;
    if (n == 0) return Status::ok();
    QD_CUDA_TRY(cudaMemcpyAsync(inst.ptr(outs[0], ptrs), inst.ptr(ins[0], ptrs), n, cudaMemcpyDeviceToDevice, s));
    return Status::ok();
  }
};

// ---- weight packing ----

// The geometry of a packed weight: channels padded to 16 bytes' worth, rows to 64 bytes' worth (elem_bytes 2 or 1).
std::shared_ptr<PackedConv> packed_geometry(const Shape& ws, int elem_bytes) {
  auto pc = std::make_shared<PackedConv>();
  pc->K = static_cast<int>(ws[0]);
  pc->R = static_cast<int>(ws[2]);
  pc->S = static_cast<int>(ws[3]);
  pc->C = round_up(static_cast<int>(ws[1]), 16 / elem_bytes);
  pc->Kp = round_up(pc->R * pc->S * pc->C, 64 / elem_bytes);
  return pc;
}

// [K][Cin][R][S] -> [K][R][S][C] with rows of Kp (zero padding), converting each element with `cv`.
template <typename T, typename Src, typename Cvt>
std::vector<T> repack_krsc(const PackedConv& pc, int cin, const Src* src, Cvt cv) {
  std::vector<T> packed(static_cast<size_t>(pc.K) * pc.Kp, T{});
  for (int k = 0; k < pc.K; ++k)
    for (int c = 0; c < cin; ++c)
      for (int r = 0; r < pc.R; ++r)
        for (int s = 0; s < pc.S; ++s) {
          packed[static_cast<size_t>(k) * pc.Kp + (r * pc.S + s) * pc.C + c] =
              cv(k, src[((static_cast<size_t>(k) * cin + c) * pc.R + r) * pc.S + s]);
        }
  return packed;
}

Expected<std::shared_ptr<PackedConv>> pack_conv(const Tensor& w, const Tensor* bias) {
  auto pc = packed_geometry(w.shape(), 2);
  const std::vector<uint16_t> packed = repack_krsc<uint16_t>(*pc, static_cast<int>(w.shape()[1]), w.data<float>(),
                                                             [&](int, float v) { return float_to_half(v); });
  std::vector<float> b(pc->K, 0.f);
  for (int k = 0; k < pc->K; ++k) b[k] = bias ? bias->data<float>()[k] : 0.f;
  QD_RETURN_IF_ERROR(pc->w.upload(packed));
  QD_RETURN_IF_ERROR(pc->bias.upload(b));
  return pc;
}

// Two convs' packed weights (both fp16, or both INT8 with their alphas) as one conv with a's output channels first,
// then b's (same C, R, S).
Expected<std::shared_ptr<PackedConv>> merge_packed(const PackedConv& a, const PackedConv& b) {
  if (a.C != b.C || a.R != b.R || a.S != b.S || a.Kp != b.Kp || !a.alpha.get() != !b.alpha.get()) {
    return internal("merge_packed: the convs' weights differ in shape or precision");
  }
  auto m = std::make_shared<PackedConv>();
  m->K = a.K + b.K;
  m->C = a.C;
  m->R = a.R;
  m->S = a.S;
  m->Kp = a.Kp;
  m->acc_bound = std::max(a.acc_bound, b.acc_bound);
  const size_t wa = a.w.size(), wb = b.w.size(), ba = a.bias.size(), bb = b.bias.size();
  QD_RETURN_IF_ERROR(m->w.alloc(wa + wb));
  QD_RETURN_IF_ERROR(m->bias.alloc(ba + bb));
  QD_CUDA_TRY(cudaMemcpy(m->w.get(), a.w.get(), wa, cudaMemcpyDeviceToDevice));
  QD_CUDA_TRY(cudaMemcpy(static_cast<char*>(m->w.get()) + wa, b.w.get(), wb, cudaMemcpyDeviceToDevice));
  QD_CUDA_TRY(cudaMemcpy(m->bias.get(), a.bias.get(), ba, cudaMemcpyDeviceToDevice));
  QD_CUDA_TRY(cudaMemcpy(static_cast<char*>(m->bias.get()) + ba, b.bias.get(), bb, cudaMemcpyDeviceToDevice));
  if (a.alpha.get()) {  // INT8: s_x * s_w[k], the same s_x (one input)
    const size_t aa = a.alpha.size(), ab = b.alpha.size();
    QD_RETURN_IF_ERROR(m->alpha.alloc(aa + ab));
    QD_CUDA_TRY(cudaMemcpy(m->alpha.get(), a.alpha.get(), aa, cudaMemcpyDeviceToDevice));
    QD_CUDA_TRY(cudaMemcpy(static_cast<char*>(m->alpha.get()) + aa, b.alpha.get(), ab, cudaMemcpyDeviceToDevice));
  }
  return m;
}

// INT8 weights exactly as the reference quantizes them (per output channel; a QAT model's scales when it has them),
// packed [K][R][S][C padded to 16] with rows padded to 64, and alpha = s_x * s_w[k] in fp32.
Expected<std::shared_ptr<PackedConv>> pack_conv_int8(const Tensor& w, const Tensor* bias, float sx,
                                                    const std::vector<float>* qat_scales) {
  const WeightQuant wq = qat_scales ? quantize_weights_with(w, 0, *qat_scales) : quantize_weights(w, 0);
  auto pc = packed_geometry(w.shape(), 1);
  const std::vector<int8_t> packed = repack_krsc<int8_t>(*pc, static_cast<int>(w.shape()[1]),
                                                         wq.q.data<int8_t>(), [](int, int8_t v) { return v; });
  std::vector<float> b(pc->K, 0.f), alpha(pc->K);
  for (int k = 0; k < pc->K; ++k) {
    alpha[k] = sx * wq.scales[k];
    b[k] = bias ? bias->data<float>()[k] : 0.f;
  }
  pc->acc_bound = int8_acc_bound(wq.q.data<int8_t>(), pc->K, wq.q.numel() / pc->K);
  QD_RETURN_IF_ERROR(pc->w.upload(packed));
  QD_RETURN_IF_ERROR(pc->bias.upload(b));
  QD_RETURN_IF_ERROR(pc->alpha.upload(alpha));
  return pc;
}

// ---- the lowering ----

// An INT8 Gemm's operands as lower_int8_gemm takes them: a 2-d input [N, C], a constant 2-d B ([C, K], or [K, C]
// with transB), no bias or a constant one per output column. Other Gemms stay in float on the GPU.
struct Int8Gemm {
  const Tensor* b = nullptr;
  const Tensor* bias = nullptr;
  bool trans_b = false;
  int64_t C = 0, K = 0;
};
std::optional<Int8Gemm> int8_gemm_operands(const Graph& g, const Node& n) {
  if (n.op != OpType::Gemm || n.inputs.size() < 2 || n.inputs[0] < 0) return std::nullopt;
  Int8Gemm m;
  m.b = g.constant(n.inputs[1]);
  const Shape& xs = g.values[n.inputs[0]].shape;
  if (!m.b || m.b->dtype() != DType::kFloat32 || m.b->shape().size() != 2 || xs.size() != 2) return std::nullopt;
  const auto trans_b = n.attrs.get_int("transB", 0);
  if (!trans_b) return std::nullopt;
  m.trans_b = *trans_b != 0;
  m.C = m.b->shape()[m.trans_b ? 1 : 0];
  m.K = m.b->shape()[m.trans_b ? 0 : 1];
  if (m.C != xs[1]) return std::nullopt;
  if (n.inputs.size() < 3 || n.inputs[2] < 0) return m;
  m.bias = g.constant(n.inputs[2]);
  if (!m.bias || m.bias->dtype() != DType::kFloat32 || m.bias->numel() != m.K || m.bias->shape().back() != m.K) {
    return std::nullopt;
  }
  return m;
}

// The convs (and Gemms) the reference runs in INT8, by the precision plan of the graph before fusion
// (quant/precision_plan.h), and the scale each one's input is quantized with (per value; 0: none). Fusion keeps the
// convs' names and their inputs' value ids, so the choice holds for the fused graph. The same for every shape: the
// first lowering fills in.int8_convs, later ones take it.
struct Int8Choice {
  std::set<std::string> convs;
  std::vector<float> scale;
};
Expected<Int8Choice> choose_int8(const Graph& g, const LowerInput& in) {
  Int8Choice c;
  const PrecisionPlan plan = QD_TRY(compute_precision(g, *in.int8, Precision::kFp16));
  if (in.int8_convs && *in.int8_convs) {
    c.convs = **in.int8_convs;
  } else {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      if (plan.is_int8(i) && (n.op == OpType::Conv || int8_gemm_operands(g, n))) c.convs.insert(n.name);
    }
    if (in.int8_convs) *in.int8_convs = c.convs;
  }
  c.scale.assign(g.values.size(), 0.f);
  for (const Node& n : g.nodes) {
    if ((n.op != OpType::Conv && n.op != OpType::Gemm) || !c.convs.count(n.name)) continue;
    auto q = plan.tensors.find(n.inputs[0]);
    if (q == plan.tensors.end()) return internal("INT8 node '" + n.name + "' has no input scale in the precision plan");
    c.scale[n.inputs[0]] = q->second.scale;
  }
  return c;
}


class Lowerer {
 public:
  Lowerer(Graph g, const LowerInput& in, Int8Choice int8)
      : g_(std::move(g)), in_(in), inst_(std::make_shared<Instance>()) {
    int8_convs_ = std::move(int8.convs);
    qscale_ = std::move(int8.scale);
    fast_ = in.opt->precision == Precision::kFp16 || in.opt->precision == Precision::kInt8;
  }

  Expected<std::shared_ptr<Instance>> run() {
    const size_t nv = g_.values.size();
    gen_.assign(nv, -1);
    fast_t_.assign(nv, -1);
    uses_ = g_.use_counts();
    consumers_.assign(nv, {});
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      for (int v : g_.nodes[i].inputs) {
        if (v >= 0) consumers_[v].push_back(static_cast<int>(i));
      }
    }
    is_output_.assign(nv, false);
    for (int o : g_.outputs) is_output_[o] = true;
    if (in_.opt->precision == Precision::kInt8) {
      qscale_.resize(nv, 0.f);  // values the fusion passes added (folded weights) are never quantized
      q8_.assign(nv, -1);
    }
    QD_RETURN_IF_ERROR(plan_s2d());
    // I/O slots: inputs first, then outputs.
    io_in_.assign(nv, -1);
    for (size_t k = 0; k < g_.inputs.size(); ++k) {
      const int v = g_.inputs[k];
      const TensorDesc* f = in_.in_formats ? &in_.in_formats->at(k) : nullptr;
      const bool formatted = f && !in_onnx_form(*f, v);
      TensorRef r = formatted ? binding_ref(v, *f) : generic_ref(v);
      r.slot = static_cast<int>(inst_->slot_names.size());
      inst_->slot_names.push_back(g_.values[v].name);
      const int t = add_tensor(r);
      (formatted ? io_in_[v] : gen_[v]) = t;
      inst_->slot_tensor.push_back(t);
    }
    inst_->num_inputs = g_.inputs.size();
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      const int v = g_.outputs[k];
      inst_->slot_names.push_back(g_.values[v].name);
      inst_->slot_tensor.push_back(-1);
      inst_->outputs.push_back({g_.values[v].name, g_.values[v].dtype, g_.values[v].shape});
    }
    QD_RETURN_IF_ERROR(apply_io_formats(in_.opt->output_formats, "output", in_.int8->act_scales, &inst_->outputs));
    done_.assign(g_.nodes.size(), false);
    QD_RETURN_IF_ERROR(plan_slice_concats());
    plan_plugin_slices();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (done_[i]) continue;
      const Node& n = g_.nodes[i];
      Status st = lower_node(static_cast<int>(i));
      if (!st.is_ok()) return st.at_node(n.name, op_name(n.op));
    }
    // Bind outputs: the tensor holding each output value becomes (or is copied to) its slot; one in another format
    // than the ONNX form is converted into it (from the NHWC fp16 copy when it has one and the binding is NHWC).
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      const int v = g_.outputs[k];
      const int slot = static_cast<int>(inst_->num_inputs + k);
      const TensorDesc& d = inst_->outputs[k];
      if (auto it = bound_outputs_.find(v); it != bound_outputs_.end()) {
        inst_->slot_tensor[slot] = it->second;
        continue;
      }
      if (!in_onnx_form(d, v)) {
        TensorRef o = binding_ref(v, d);
        o.slot = slot;
        const int src = o.nhwc && fast_t_[v] >= 0 ? fast_t_[v] : QD_TRY(ensure_generic(v));
        inst_->slot_tensor[slot] = QD_TRY(add_convert(src, add_tensor(o), ":to_binding"));
        continue;
      }
      int t = QD_TRY(ensure_generic(v));
      TensorRef& r = inst_->tensors[t];
      if (r.slot < 0 && !r.constant && r.buffer >= 0 && buffer_users_[r.buffer] == 1) {
        r.slot = slot;  // the producer writes the caller's buffer directly
        buffer_bytes_[r.buffer] = 0;
        r.buffer = -1;
      } else {
        TensorRef o = generic_ref(v);
        o.slot = slot;
        const int ot = add_tensor(o);
        auto copy = std::make_unique<CopyLayer>();
        copy->info = {g_.values[v].name + ":copy", "copy", "memcpy", "-", fmt_of(r), fmt_of(o), 0};
        copy->ins = {t};
        copy->outs = {ot};
        add_layer(std::move(copy));
        t = ot;
      }
      inst_->slot_tensor[slot] = t;
    }
    concat_in_place();
    drop_unread_out2();  // before merging, which takes convs without a second output
    QD_RETURN_IF_ERROR(merge_sibling_convs());
    schedule_streams();
    for (size_t v = 0; v < q8_.size(); ++v) {
      if (q8_[v] < 0) continue;
      Instance::Int8Probe p{g_.values[v].name, q8_[v], -1, s2d_[v]};
      for (size_t l = 0; l < inst_->layers.size() && p.first_reader < 0; ++l) {
        const auto& ins = inst_->layers[l]->ins;
        if (std::find(ins.begin(), ins.end(), p.tensor) != ins.end()) p.first_reader = static_cast<int>(l);
      }
      if (p.first_reader >= 0) inst_->int8_probes.push_back(p);
    }
    apply_epilogue_policy();
    QD_RETURN_IF_ERROR(plan());
    QD_RETURN_IF_ERROR(choose_kernels());
    std::set<const PackedConv*> packed;
    for (const auto& l : inst_->layers) {
      const auto* c = dynamic_cast<const ConvLayer*>(l.get());
      if (c && packed.insert(c->w.get()).second) {
        inst_->weight_bytes += c->w->w.size() + c->w->bias.size() + c->w->alpha.size() + c->w->dense.size();
      }
    }
    return inst_;
  }

 private:
  // ---- tensors and layers ----
  TensorRef generic_ref(int v) const {
    TensorRef r;
    r.dtype = g_.values[v].dtype;
    r.shape = g_.values[v].shape;
    r.bytes = static_cast<size_t>(numel(r.shape)) * dtype_size(r.dtype);
    return r;
  }
  // Whether binding d holds value v as the ONNX graph has it (its dtype, NCHW).
  bool in_onnx_form(const TensorDesc& d, int v) const {
    return d.dtype == g_.values[v].dtype && d.layout == TensorLayout::kNCHW;
  }
  // A binding's tensor in its format (a float value given as fp16 or int8, NCHW or dense NHWC).
  TensorRef binding_ref(int v, const TensorDesc& f) const {
    TensorRef r = generic_ref(v);
    r.dtype = f.dtype;
    r.scale = f.scale;
    if (f.layout == TensorLayout::kNHWC) {
      r.nhwc = true;
      r.ld = static_cast<int>(r.shape[1]);
    }
    r.bytes = static_cast<size_t>(numel(r.shape)) * dtype_size(r.dtype);
    return r;
  }
  // A layer converting tensor `src` into tensor `dst` (dtype and layout); returns dst.
  Expected<int> add_convert(int src, int dst, const std::string& suffix) {
    const TensorRef &x = inst_->tensors[src], &y = inst_->tensors[dst];
    if (numel(x.shape) > INT_MAX) return unsupported("I/O format conversion of a tensor of 2^31 elements or more");
    auto l = std::make_unique<ConvertLayer>();
    const std::string value = inst_->slot_names[x.slot >= 0 ? x.slot : y.slot];
    l->info = {value + suffix, "reformat", "convert_tensor",
               std::string(io_dtype_name(x.dtype)) + "->" + io_dtype_name(y.dtype), fmt_of(x), fmt_of(y), 0};
    l->ins = {src};
    l->outs = {dst};
    add_layer(std::move(l));
    return dst;
  }
  int add_tensor(TensorRef r) {
    if (!r.constant && r.slot < 0) {
      r.buffer = static_cast<int>(buffer_bytes_.size());
      buffer_bytes_.push_back(r.bytes);
      buffer_users_.push_back(1);
    }
    inst_->tensors.push_back(std::move(r));
    return static_cast<int>(inst_->tensors.size() - 1);
  }
  // An NHWC tensor, fp16 or int8, its channels padded to 16 bytes' worth.
  int nhwc_tensor(const Shape& shape, DType dtype = DType::kFloat16) {
    TensorRef r;
    r.dtype = dtype;
    r.shape = shape;
    r.nhwc = true;
    r.ld = round_up(static_cast<int>(shape[1]), 16 / static_cast<int>(dtype_size(dtype)));
    r.bytes = static_cast<size_t>(shape[0] * shape[2] * shape[3]) * r.ld * dtype_size(dtype);
    return add_tensor(r);
  }
  void add_layer(std::unique_ptr<Layer> l) {
    for (int t : l->outs) {
      if (t >= 0) producer_[t] = static_cast<int>(inst_->layers.size());
    }
    inst_->layers.push_back(std::move(l));
  }

  // The value in NCHW, its ONNX dtype (reformatting from NHWC when only that exists).
  Expected<int> ensure_generic(int v) {
    if (gen_[v] >= 0) return gen_[v];
    if (const Tensor* c = g_.constant(v)) {
      auto buf = std::make_unique<DeviceBuffer>();
      QD_RETURN_IF_ERROR(buf->upload(c->raw(), c->nbytes()));
      TensorRef r;
      r.dtype = c->dtype();
      r.shape = c->shape();
      r.bytes = c->nbytes();
      r.constant = buf->get();
      inst_->constants.push_back(std::move(buf));
      return gen_[v] = add_tensor(r);
    }
    if (io_in_[v] >= 0) return gen_[v] = QD_TRY(add_convert(io_in_[v], add_tensor(generic_ref(v)), ":to_nchw"));
    if (fast_t_[v] < 0) return internal("value '" + g_.values[v].name + "' was never computed");
    const int t = add_tensor(generic_ref(v));
    auto l = std::make_unique<ReformatLayer>();
    l->info = {g_.values[v].name + ":to_nchw", "reformat", "nhwc_to_nchw", "fp16->fp32",
               fmt_of(inst_->tensors[fast_t_[v]]), fmt_of(inst_->tensors[t]), 0};
    l->ins = {fast_t_[v]};
    l->outs = {t};
    add_layer(std::move(l));
    return gen_[v] = t;
  }
  // The value as NHWC fp16 (reformatting from NCHW when needed).
  Expected<int> ensure_fast(int v) {
    if (fast_t_[v] >= 0) return fast_t_[v];
    if (io_in_[v] >= 0) {  // an fp16 NHWC binding with 16-byte pixels is read in place
      const TensorRef& b = inst_->tensors[io_in_[v]];
      if (b.nhwc && b.dtype == DType::kFloat16 && b.ld % 8 == 0) return fast_t_[v] = io_in_[v];
      return fast_t_[v] = QD_TRY(add_convert(io_in_[v], nhwc_tensor(g_.values[v].shape), ":to_nhwc"));
    }
    const int src = QD_TRY(ensure_generic(v));
    const int t = nhwc_tensor(g_.values[v].shape);
    auto l = std::make_unique<ReformatLayer>();
    l->info = {g_.values[v].name + ":to_nhwc", "reformat", "nchw_to_nhwc", "fp32->fp16",
               fmt_of(inst_->tensors[src]), fmt_of(inst_->tensors[t]), 0};
    l->ins = {src};
    l->outs = {t};
    add_layer(std::move(l));
    return fast_t_[v] = t;
  }
  // Stem convs (a graph input with at most 4 channels, even H and W, read only by stride-2 convs with even kernels and
  // pads) run as stride-1 convs with half the kernel over the input's space-to-depth [N, 4C, H/2, W/2]: 4C channels
  // pad to 16 instead of C to 8 (fp16) or 16 (int8), so the conv does 2x (fp16) or 4x (int8) less padded work and the
  // reformat or quantize pass writes a quarter of the pixels. Same products, summed in another order.
  Status plan_s2d() {
    s2d_.assign(g_.values.size(), false);
    s2d_t_.assign(g_.values.size(), -1);
    if (!fast_) return Status::ok();
    for (int v : g_.inputs) {
      if (!is_float4d(v) || is_output_[v] || consumers_[v].empty()) continue;
      const Shape& x = g_.values[v].shape;
      if (x[1] > 4 || x[2] % 2 || x[3] % 2) continue;
      bool ok = true;
      int int8 = -1;
      for (int c : consumers_[v]) {
        const Node& n = g_.nodes[c];
        ok = ok && is_conv(n.op) && n.inputs.size() >= 2 && n.inputs[0] == v &&
             std::count(n.inputs.begin(), n.inputs.end(), v) == 1 && g_.is_constant(n.inputs[1]) &&
             (n.inputs.size() < 3 || n.inputs[2] < 0 || g_.is_constant(n.inputs[2])) &&
             (int8 < 0 || int8 == static_cast<int>(int8_convs_.count(n.name)));
        if (!ok) break;
        int8 = static_cast<int>(int8_convs_.count(n.name));
        const Tensor& w = *g_.constant(n.inputs[1]);
        if (w.dtype() != DType::kFloat32 || w.shape().size() != 4) {
          ok = false;
          break;
        }
        Shape out;
        auto geo = ops::conv_geom(n, x, w.shape(), &out);
        ok = geo && geo->group == 1 && geo->sh == 2 && geo->sw == 2 && geo->dh == 1 && geo->dw == 1 &&
             geo->kh % 2 == 0 && geo->kw % 2 == 0 && geo->ph % 2 == 0 && geo->pw % 2 == 0 &&
             geo->oh == (geo->h + 2 * geo->ph - geo->kh) / 2 + 1 && geo->ow == (geo->w + 2 * geo->pw - geo->kw) / 2 + 1;
      }
      s2d_[v] = ok;
    }
    return Status::ok();
  }
  static Shape s2d_shape(const Shape& x) { return {x[0], 4 * x[1], x[2] / 2, x[3] / 2}; }
  // The space-to-depth copy of graph input v: fp16 (int8 false) or int8 with v's scale.
  Expected<int> ensure_s2d(int v, bool int8) {
    int& t = int8 ? q8_[v] : s2d_t_[v];
    if (t >= 0) return t;
    const int src = io_in_[v] >= 0 ? io_in_[v] : QD_TRY(ensure_generic(v));  // the s2d kernel reads any binding
    t = nhwc_tensor(s2d_shape(g_.values[v].shape), int8 ? DType::kInt8 : DType::kFloat16);
    auto l = std::make_unique<SpaceToDepthLayer>();
    if (int8) l->scale = qscale_[v];
    l->info = {g_.values[v].name + (int8 ? ":quantize_s2d" : ":to_nhwc_s2d"), int8 ? "quantize" : "reformat",
               "nchw_to_s2d", int8 ? "int8" : "fp32->fp16", fmt_of(inst_->tensors[src]), fmt_of(inst_->tensors[t]), 0};
    l->ins = {src};
    l->outs = {t};
    add_layer(std::move(l));
    return t;
  }
  // The image tensor a stem conv over graph input v (lowered on its space-to-depth) reads itself with the stem_image_*
  // kernels, instead of a space-to-depth (or quantize) pass's copy; -1 where those kernels do not
  // fit: a 6x6 stride-2 pad-2 conv (3x3 over the space-to-depth) with at most 32 outputs and 32k output columns over
  // a 3-channel fp16 or fp32 image (NCHW, or NHWC without padding channels), or for an INT8 stem an int8 NHWC input
  // binding of 3 channels (quantized with the stem's input scale, resolve's rule). KernelPolicy::image_stem off
  // keeps the pass (A/B runs).
  Expected<int> image_stem_input(int v, const ops::ConvGeom& geo, bool int8) {
    const bool off = !in_.opt->kernel_policy.image_stem;
    if (off || !uses_source("qdeploy") || geo.group != 1 || geo.c != 3 || geo.kh != 6 || geo.kw != 6 || geo.sh != 2 ||
        geo.sw != 2 || geo.ph != 2 || geo.pw != 2 || geo.dh != 1 || geo.dw != 1 || geo.m > 32 ||
        geo.oh * 2 != geo.h || geo.ow * 2 != geo.w || geo.ow % 32 != 0) {
      return -1;
    }
    const int t = io_in_[v] >= 0 ? io_in_[v] : QD_TRY(ensure_generic(v));
    const TensorRef& r = inst_->tensors[t];
    const bool dtype_ok = r.dtype == DType::kFloat16 || r.dtype == DType::kFloat32 ||
                          (int8 && r.dtype == DType::kInt8 && r.nhwc);
    return dtype_ok && (!r.nhwc || (r.ld == geo.c && r.coff == 0)) ? t : -1;
  }
  bool is_float4d(int v) const {
    return v >= 0 && g_.values[v].dtype == DType::kFloat32 && g_.values[v].shape.size() == 4 && !g_.is_constant(v);
  }
  // Only node consuming v (and v not a graph output), or -1.
  int sole_consumer(int v) const {
    if (is_output_[v] || uses_[v] != 1 || consumers_[v].size() != 1) return -1;
    return consumers_[v][0];
  }

  // ---- INT8 ----
  // Node c is an INT8 conv (or Gemm) reading v as its data input (and nowhere else): it takes v's int8 copy.
  bool int8_conv_input(int c, int v) const {
    const Node& n = g_.nodes[c];
    return (is_conv(n.op) || n.op == OpType::Gemm) && int8_convs_.count(n.name) && n.inputs[0] == v &&
           std::count(n.inputs.begin(), n.inputs.end(), v) == 1;
  }

  // Quantizes v once, when its first consumer is lowered: the int8 NHWC copy for INT8 convs, and its dequantized
  // value for every other consumer (the reference's rule), which then replaces v.
  Status resolve(int v) {
    if (v < 0 || qscale_.empty() || qscale_[v] == 0.f || q8_[v] >= 0) return Status::ok();
    if (s2d_[v]) return Status::ok();  // lower_conv makes its int8 space-to-depth copy where a stem needs one
    if (io_in_[v] >= 0 && inst_->tensors[io_in_[v]].dtype == DType::kInt8) {
      // An int8 input binding already holds the quantized value (the binding's scale is the INT8 scale): the INT8
      // convs read it in place when its pixels are 16-byte rows, other readers its dequantized conversion.
      const TensorRef& b = inst_->tensors[io_in_[v]];
      q8_[v] = b.nhwc && b.ld % 16 == 0
                   ? io_in_[v]
                   : QD_TRY(add_convert(io_in_[v], nhwc_tensor(g_.values[v].shape, DType::kInt8), ":to_nhwc"));
      return Status::ok();
    }
    const Shape& vs = g_.values[v].shape;
    if ((vs.size() != 4 && vs.size() != 2) || g_.values[v].dtype != DType::kFloat32) {
      return unsupported("INT8 input '" + g_.values[v].name + "' is not a 4-d (Conv) or 2-d (Gemm) float tensor");
    }
    const Shape sh = vs.size() == 4 ? vs : Shape{vs[0], vs[1], 1, 1};  // a Gemm's [N, C] as N pixels
    auto l = std::make_unique<QuantizeLayer>();
    l->scale = qscale_[v];
    q8_[v] = nhwc_tensor(sh, DType::kInt8);
    // Only INT8 convs read v (e.g. the network input feeding the stem): no dequantized copy.
    bool others = is_output_[v];
    for (int c : consumers_[v]) others = others || !int8_conv_input(c, v);
    int src, dq = -1;
    if (!others) {
      src = fast_t_[v] >= 0 ? fast_t_[v] : QD_TRY(ensure_generic(v));
    } else if (fast_t_[v] >= 0) {
      src = fast_t_[v];
      dq = nhwc_tensor(sh);
      fast_t_[v] = dq;
      gen_[v] = -1;  // any NCHW copy made so far was of the unquantized value
    } else {
      src = QD_TRY(ensure_generic(v));
      dq = add_tensor(generic_ref(v));
      gen_[v] = dq;
    }
    l->ins = {src};
    l->outs = {q8_[v]};
    if (dq >= 0) l->outs.push_back(dq);
    l->info = {g_.values[v].name + ":quantize", "quantize", "quantize_nhwc_i8", "int8",
               fmt_of(inst_->tensors[src]), fmt_of(inst_->tensors[q8_[v]]), 0};
    add_layer(std::move(l));
    return Status::ok();
  }

  // ---- per node ----
  Status lower_node(int i) {
    const Node& n = g_.nodes[i];
    if (slice_concat_.count(i)) return lower_slice_concat(i);
    if (is_plugin_op(n.op)) return lower_plugin(i);
    for (int v : n.inputs) QD_RETURN_IF_ERROR(resolve(v));
    if (fast_) {
      if (n.op == OpType::Conv || n.op == OpType::FusedConv) {
        bool lowered = false;
        QD_RETURN_IF_ERROR(try_fused_conv(i, &lowered));
        if (lowered) return Status::ok();
      } else if (n.op == OpType::Gemm && int8_convs_.count(n.name)) {
        return lower_int8_gemm(i);
      } else if (n.op == OpType::MaxPool || n.op == OpType::Resize || n.op == OpType::Concat) {
        bool lowered = false;
        if (n.op == OpType::Concat && !qscale_.empty()) {
          QD_RETURN_IF_ERROR(try_int8_concat(i, &lowered));
          if (lowered) return Status::ok();
        }
        QD_RETURN_IF_ERROR(try_nhwc_movement(i, &lowered));
        if (lowered) return Status::ok();
      }
    }
    bool chained = false;
    QD_RETURN_IF_ERROR(try_eltwise_chain(i, &chained));
    if (chained) return Status::ok();
    return lower_generic(i);
  }

  // How an elementwise chain's constant tensors are read (EwOperand, without the device pointer yet).
  using EwConstants = std::vector<std::pair<const Tensor*, EwOperand>>;

  // How constant `cs` broadcast to `xs` is indexed: one term per run of dims it does not broadcast over; false when
  // it does not broadcast to xs or needs more than two terms.
  static bool broadcast_terms(const Shape& xs, const Shape& cs, EwOperand* o) {
    if (cs.size() > xs.size()) return false;
    const size_t lead = xs.size() - cs.size();
    int terms = 0;
    int64_t inner_x = 1, inner_c = 1;  // products of the dims after d, in x and in c
    bool in_run = false;
    for (size_t d = xs.size(); d-- > 0;) {
      const int64_t cd = d >= lead ? cs[d - lead] : 1;
      if (cd != 1 && cd != xs[d]) return false;
      const bool kept = cd == xs[d] && xs[d] > 1;
      if (kept && !in_run) {
        if (terms == 2) return false;
        o->div[terms] = inner_x;
        o->mul[terms] = inner_c;
        o->mod[terms] = 1;
        ++terms;
      }
      if (kept) o->mod[terms - 1] *= xs[d];
      if (xs[d] > 1) in_run = kept;
      inner_x *= xs[d];
      inner_c *= cd;
    }
    return true;
  }

  // One step of an elementwise chain on x: a unary op, or a binary op with a float constant that is a scalar or
  // broadcasts to x (broadcast_terms). False when `n` cannot be a step.
  Expected<bool> chain_step(const Node& n, int x, EwStep* st, EwConstants* operands) {
    if (n.outputs.size() != 1 || n.outputs[0] < 0 || g_.values[n.outputs[0]].dtype != DType::kFloat32 ||
        g_.values[n.outputs[0]].shape != g_.values[x].shape) {
      return false;
    }
    static const std::pair<OpType, EwOp> kUnary[] = {
        {OpType::Relu, EwOp::kRelu}, {OpType::Sigmoid, EwOp::kSigmoid}, {OpType::Tanh, EwOp::kTanh},
        {OpType::Exp, EwOp::kExp}, {OpType::Neg, EwOp::kNeg}, {OpType::Abs, EwOp::kAbs}, {OpType::Sqrt, EwOp::kSqrt},
        {OpType::Reciprocal, EwOp::kReciprocal}, {OpType::HardSwish, EwOp::kHardSwish}};
    for (const auto& [op, ew] : kUnary) {
      if (n.op == op && n.inputs.size() == 1 && n.inputs[0] == x) {
        st->op = ew;
        return true;
      }
    }
    if (n.op == OpType::LeakyRelu && n.inputs[0] == x) {
      st->op = EwOp::kLeakyRelu;
      st->a = QD_TRY(n.attrs.get_float("alpha", 0.01f));
      return true;
    }
    if (n.op == OpType::HardSigmoid && n.inputs[0] == x) {
      st->op = EwOp::kHardSigmoid;
      st->a = QD_TRY(n.attrs.get_float("alpha", 0.2f));
      st->b = QD_TRY(n.attrs.get_float("beta", 0.5f));
      return true;
    }
    static const std::tuple<OpType, EwOp, EwOp> kBinary[] = {
        {OpType::Add, EwOp::kAdd, EwOp::kAdd}, {OpType::Sub, EwOp::kSub, EwOp::kRSub},
        {OpType::Mul, EwOp::kMul, EwOp::kMul}, {OpType::Div, EwOp::kDiv, EwOp::kRDiv},
        {OpType::Pow, EwOp::kPow, EwOp::kRPow}, {OpType::Max, EwOp::kMax, EwOp::kMax},
        {OpType::Min, EwOp::kMin, EwOp::kMin}};
    for (const auto& [op, fwd, rev] : kBinary) {
      if (n.op != op || n.inputs.size() != 2 || (n.inputs[0] == x) == (n.inputs[1] == x)) continue;
      const bool first = n.inputs[0] == x;
      const Tensor* c = g_.constant(n.inputs[first ? 1 : 0]);
      if (!c || c->dtype() != DType::kFloat32 || c->numel() == 0) return false;
      EwOperand o;
      if (!broadcast_terms(g_.values[x].shape, c->shape(), &o)) return false;
      st->op = first ? fwd : rev;
      if (c->numel() == 1) {
        st->a = c->data<float>()[0];
      } else {
        if (operands->size() == kMaxEwOperands) return false;
        st->operand = static_cast<int16_t>(operands->size());
        operands->push_back({c, o});
      }
      return true;
    }
    if (n.op == OpType::Clip && n.inputs[0] == x) {
      float lo = 0, hi = 0;
      if (!QD_TRY(clip_bounds(n, &lo, &hi))) return false;
      st->op = EwOp::kClip;
      st->a = lo;
      st->b = hi;
      return true;
    }
    return false;
  }

  // A Clip's bounds when they are known at build time (ops::clip_constant_bounds), ordered for the chain's clamp.
  Expected<bool> clip_bounds(const Node& n, float* lo, float* hi) const {
    if (!QD_TRY(ops::clip_constant_bounds(g_, n, lo, hi))) return false;
    if (*lo > *hi) *lo = *hi;  // ONNX: every value becomes max; the fused forms clamp with lo <= hi
    return true;
  }

  // The chain's constants on the device (kept by the instance), with their index terms' magic numbers.
  Status upload_operands(const EwConstants& operands, EwProgram* prog) {
    for (size_t k = 0; k < operands.size(); ++k) {
      auto buf = std::make_unique<DeviceBuffer>();
      QD_RETURN_IF_ERROR(buf->upload(operands[k].first->raw(), operands[k].first->nbytes()));
      prog->operand[k] = operands[k].second;
      prog->operand[k].p = static_cast<const float*>(buf->get());
      set_fast_divisors(&prog->operand[k]);
      inst_->constants.push_back(std::move(buf));
    }
    return Status::ok();
  }

  // Two or more elementwise steps where each intermediate has one consumer: one fused fp32 pass.
  Status try_eltwise_chain(int i, bool* lowered) {
    const Node& first = g_.nodes[i];
    if (first.inputs.empty() || first.inputs[0] < 0) return Status::ok();
    std::vector<int> chain;
    std::vector<EwStep> steps;
    EwConstants operands;
    int x = -1;
    for (int v : first.inputs) {  // the chain's input: the one non-constant float input
      if (v >= 0 && !g_.is_constant(v)) {
        if (x >= 0) return Status::ok();
        x = v;
      }
    }
    if (x < 0 || g_.values[x].dtype != DType::kFloat32) return Status::ok();
    const int input = x;
    for (int n = i; n >= 0 && steps.size() < kMaxEwSteps;) {
      EwStep st;
      if (!QD_TRY(chain_step(g_.nodes[n], x, &st, &operands))) break;
      steps.push_back(st);
      chain.push_back(n);
      x = g_.nodes[n].outputs[0];
      n = sole_consumer(x);
    }
    if (steps.size() < 2) return Status::ok();
    auto l = std::make_unique<EltwiseChainLayer>();
    l->prog.steps = static_cast<int>(steps.size());
    std::string names;
    for (size_t k = 0; k < steps.size(); ++k) {
      l->prog.step[k] = steps[k];
      names += (k ? "+" : "") + g_.nodes[chain[k]].name;
      done_[chain[k]] = true;
    }
    QD_RETURN_IF_ERROR(upload_operands(operands, &l->prog));
    l->ins = {QD_TRY(ensure_generic(input))};
    TensorRef r = generic_ref(x);
    l->outs = {add_tensor(r)};
    gen_[x] = l->outs[0];
    l->info = {names, "eltwise_chain", "eltwise_chain", "fp32", "nchw:float32", "nchw:float32", 0};
    add_layer(std::move(l));
    *lowered = true;
    return Status::ok();
  }

  // ---- detection-head decoding ----
  // A Concat along the last axis whose inputs are slices of one value along its last axis (step 1, other dims
  // whole), each through an elementwise chain or directly: YOLO's Concat(xy, wh, conf) over the sigmoid of a level.
  // It runs as one SliceConcatLayer; its Slices and chains run no layers. When its result only reaches, through a
  // Reshape, a Concat along axis 1 whose inputs are all such results (the head's levels), it is written straight
  // into that Concat's output, which then runs no layer either.
  Status plan_slice_concats() {
    std::vector<int> producer(g_.values.size(), -1);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      for (int v : g_.nodes[i].outputs) {
        if (v >= 0) producer[v] = static_cast<int>(i);
      }
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.op != OpType::Concat || n.outputs.size() != 1 || n.outputs[0] < 0 || n.inputs.empty() ||
          n.inputs.size() > kMaxSliceSegments) {
        continue;
      }
      const Shape& os = g_.values[n.outputs[0]].shape;
      int64_t axis = QD_TRY(n.attrs.get_int("axis", 0));
      if (axis < 0) axis += static_cast<int64_t>(os.size());
      if (g_.values[n.outputs[0]].dtype != DType::kFloat32 || os.empty() || axis != static_cast<int64_t>(os.size()) - 1) {
        continue;
      }
      SliceConcatPlan pl;
      bool ok = true;
      int out_start = 0;
      for (int v : n.inputs) {
        if (v < 0 || sole_consumer(v) != static_cast<int>(i)) {
          ok = false;
          break;
        }
        // Back from v through single-consumer elementwise steps to the Slice.
        std::vector<int> chain;
        EwConstants operands;  // the chain's, counted against kMaxEwOperands
        int x = v;
        while (producer[x] >= 0 && g_.nodes[producer[x]].op != OpType::Slice && chain.size() < kMaxEwSteps) {
          const Node& e = g_.nodes[producer[x]];
          int in = -1;
          for (int u : e.inputs) {
            if (u >= 0 && !g_.is_constant(u)) in = in < 0 ? u : -2;
          }
          EwStep st;
          if (in < 0 || sole_consumer(in) != producer[x] || !QD_TRY(chain_step(e, in, &st, &operands))) break;
          chain.insert(chain.begin(), producer[x]);
          x = in;
        }
        const int sl = producer[x];
        if (sl < 0 || g_.nodes[sl].op != OpType::Slice || (!chain.empty() && sole_consumer(x) != chain.front())) {
          ok = false;
          break;
        }
        const Node& sn = g_.nodes[sl];
        const int src = sn.inputs[0];
        const Shape& xs = g_.values[src].shape;
        if (src < 0 || (pl.src >= 0 && pl.src != src) || xs.size() != os.size() ||
            g_.values[src].dtype != DType::kFloat32) {
          ok = false;
          break;
        }
        auto geo = ops::slice_geom(infer_ctx_for(g_, sn));
        if (!geo) {
          ok = false;
          break;
        }
        const size_t last = xs.size() - 1;
        for (size_t d = 0; d < last; ++d) ok = ok && geo->out[d] == xs[d] && geo->step[d] == 1 && xs[d] == os[d];
        ok = ok && geo->step[last] == 1 && geo->out[last] > 0;
        if (!ok) break;
        pl.src = src;
        SliceSegment seg;
        seg.src_start = static_cast<int>(geo->start[last]);
        seg.len = static_cast<int>(geo->out[last]);
        seg.out_start = out_start;
        out_start += seg.len;
        pl.seg.push_back(seg);
        pl.slices.push_back(sl);
        pl.chains.push_back(chain);
      }
      if (!ok || out_start != os.back()) continue;
      // The level Concat: Reshape [N, rows, C] -> Concat along axis 1.
      const int r = sole_consumer(n.outputs[0]);
      if (r >= 0 && g_.nodes[r].op == OpType::Reshape && g_.nodes[r].inputs[0] == n.outputs[0]) {
        const int f = sole_consumer(g_.nodes[r].outputs[0]);
        const Shape& rs = g_.values[g_.nodes[r].outputs[0]].shape;
        if (f >= 0 && g_.nodes[f].op == OpType::Concat && rs.size() == 3 && rs[0] == os[0] && rs[2] == os.back()) {
          int64_t fa = QD_TRY(g_.nodes[f].attrs.get_int("axis", 0));
          if (fa == 1 || fa == -2) {
            pl.reshape = r;
            pl.target = f;
          }
        }
      }
      slice_concat_[static_cast<int>(i)] = std::move(pl);
    }
    // A level Concat is skipped only when every one of its inputs lands in it.
    std::map<int, int> landing;  // target Concat -> inputs that land in it
    for (const auto& [i, pl] : slice_concat_) {
      if (pl.target >= 0) ++landing[pl.target];
    }
    for (auto& [i, pl] : slice_concat_) {
      if (pl.target >= 0 && landing[pl.target] != static_cast<int>(g_.nodes[pl.target].inputs.size())) {
        pl.target = pl.reshape = -1;
      }
      for (size_t k = 0; k < pl.slices.size(); ++k) {
        done_[pl.slices[k]] = true;
        for (int c : pl.chains[k]) done_[c] = true;
      }
      if (pl.target >= 0) done_[pl.reshape] = done_[pl.target] = true;
      // A head conv may then write the source transposed (lower_conv), when the kernel's tile fits.
      if (!is_output_[pl.src] && consumers_[pl.src].size() == pl.slices.size() &&
          slice_concat_transposed_fits(static_cast<int>(g_.values[pl.src].shape.back()),
                                       static_cast<int>(g_.values[g_.nodes[i].outputs[0]].shape.back()))) {
        slice_sources_.insert(pl.src);
      }
      // The result is a graph output bound as fp16 NCHW (--output-format fp16) and read by nothing else: the layer
      // writes the binding itself (no fp32 copy and conversion pass), and its head conv writes fp16 for it.
      const int ov = pl.target >= 0 ? g_.nodes[pl.target].outputs[0] : g_.nodes[i].outputs[0];
      const auto k = std::find(g_.outputs.begin(), g_.outputs.end(), ov) - g_.outputs.begin();
      if (is_output_[ov] && consumers_[ov].empty() && inst_->outputs[k].dtype == DType::kFloat16 &&
          inst_->outputs[k].layout == TensorLayout::kNCHW) {
        pl.binding = static_cast<int>(inst_->num_inputs + k);
        half_sources_.insert(pl.src);
      }
    }
    return Status::ok();
  }

  Status lower_slice_concat(int i) {
    const Node& n = g_.nodes[i];
    SliceConcatPlan& pl = slice_concat_.at(i);
    auto l = std::make_unique<SliceConcatLayer>();
    SliceConcatParams& p = l->p;
    const Shape& os = g_.values[n.outputs[0]].shape;
    p.src_cols = static_cast<int>(g_.values[pl.src].shape.back());
    p.out_cols = static_cast<int>(os.back());
    p.rows = numel(os) / os.back();
    p.rows_per_batch = p.rows;
    p.segments = static_cast<int>(pl.seg.size());
    std::string names;
    for (size_t k = 0; k < pl.seg.size(); ++k) {
      SliceSegment& sg = p.seg[k] = pl.seg[k];
      names += (k ? "+" : "") + g_.nodes[pl.slices[k]].name;
      int x = g_.nodes[pl.slices[k]].outputs[0];
      EwConstants operands;
      for (int c : pl.chains[k]) {
        EwStep& st = sg.prog.step[sg.prog.steps++];
        if (!QD_TRY(chain_step(g_.nodes[c], x, &st, &operands))) return internal("slice_concat: chain changed");
        names += "+" + g_.nodes[c].name;
        x = g_.nodes[c].outputs[0];
      }
      QD_RETURN_IF_ERROR(upload_operands(operands, &sg.prog));
    }
    names += "+" + n.name;
    if (auto it = transposed_.find(pl.src); it != transposed_.end()) {
      l->ins = {it->second.first};
      p.src_hw = it->second.second;
    } else {
      l->ins = {QD_TRY(ensure_generic(pl.src))};
    }
    // The tensor value `ov` is written to: the fp16 output binding, or its fp32 (ONNX form) tensor.
    auto out_tensor = [&](int ov) {
      if (pl.binding < 0) return gen_[ov] >= 0 ? gen_[ov] : (gen_[ov] = add_tensor(generic_ref(ov)));
      if (!bound_outputs_.count(ov)) {
        TensorRef o = binding_ref(ov, inst_->outputs[pl.binding - inst_->num_inputs]);
        o.slot = pl.binding;
        bound_outputs_[ov] = add_tensor(o);
      }
      return bound_outputs_[ov];
    };
    if (pl.target >= 0) {  // into the level Concat's output, after the rows of the inputs before it
      const Node& f = g_.nodes[pl.target];
      const int fo = f.outputs[0];
      const Shape& fs = g_.values[fo].shape;
      p.rows_per_batch = p.rows / fs[0];
      p.out_batch_stride = fs[1] * fs[2];
      for (int v : f.inputs) {
        if (v == g_.nodes[pl.reshape].outputs[0]) break;
        p.out_offset += g_.values[v].shape[1] * fs[2];
      }
      names += "+" + g_.nodes[pl.reshape].name + "+" + f.name;
      l->outs = {out_tensor(fo)};
    } else {
      l->outs = {out_tensor(n.outputs[0])};
    }
    l->info = {names, "slice_concat", "slice_concat", "fp32", fmt_of(inst_->tensors[l->ins[0]]),
               fmt_of(inst_->tensors[l->outs[0]]), 0};
    add_layer(std::move(l));
    return Status::ok();
  }

  // ---- plugin ops (qdeploy/plugin.h): a layer of their own, in the graph's dtype ----
  // A plugin input that is a column slice of a wider tensor (Slice of the last axis, step 1, maybe through a Reshape
  // keeping the last dim; e.g. value and offsets cut from one fused linear) is read in place when the kernel accepts
  // the row stride: the Slice and Reshape run no layer.
  struct InPlaceSlice {
    int source = -1;      // the sliced value
    int64_t column = 0;   // first column
  };
  std::optional<InPlaceSlice> column_slice(int v, std::vector<int>* nodes) const {
    int cur = v;
    const int p0 = g_.values[cur].producer;
    if (p0 >= 0 && g_.nodes[p0].op == OpType::Reshape && uses_[cur] == 1 && !is_output_[cur]) {
      const int src = g_.nodes[p0].inputs[0];
      const Shape &a = g_.values[src].shape, &b = g_.values[cur].shape;
      if (a.empty() || b.empty() || a.back() != b.back()) return std::nullopt;
      nodes->push_back(p0);
      cur = src;
    }
    const int ps = g_.values[cur].producer;
    if (ps < 0 || g_.nodes[ps].op != OpType::Slice || uses_[cur] != 1 || is_output_[cur]) return std::nullopt;
    const Node& sl = g_.nodes[ps];
    if (sl.inputs.size() < 3) return std::nullopt;
    const int src = sl.inputs[0];
    const Shape &in = g_.values[src].shape, &out = g_.values[cur].shape;
    if (g_.is_constant(src) || in.size() != out.size() || in.empty()) return std::nullopt;
    for (size_t d = 0; d + 1 < in.size(); ++d) {
      if (in[d] != out[d]) return std::nullopt;
    }
    auto scalar = [&](size_t k, int64_t def) -> std::optional<int64_t> {
      if (k >= sl.inputs.size() || sl.inputs[k] < 0) return def;
      const Tensor* t = g_.constant(sl.inputs[k]);
      if (!t || t->numel() != 1) return std::nullopt;
      return t->get_i64(0);
    };
    const int64_t rank = static_cast<int64_t>(in.size()), len = in.back();
    auto start = scalar(1, 0), axis = scalar(3, rank - 1), step = scalar(4, 1);
    if (!start || !axis || !step || *step != 1 || (*axis != rank - 1 && *axis != -1)) return std::nullopt;
    int64_t c0 = *start < 0 ? *start + len : *start;
    c0 = std::clamp<int64_t>(c0, 0, len);
    if (c0 + out.back() > len) return std::nullopt;
    nodes->push_back(ps);
    return InPlaceSlice{src, c0};
  }
  void plan_plugin_slices() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      const PluginOp* p = plugin_op(n.op);
      if (!p || p->def.cuda_kernels.empty() || done_[i]) continue;
      auto attrs = resolve_plugin_attrs(p->def, n.attrs);
      if (!attrs) continue;
      std::vector<qdeploy::TensorView> in, out;
      std::map<int, InPlaceSlice> found;
      std::vector<int> skip;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const int v = n.inputs[k];
        if (v < 0) continue;
        std::vector<int> nodes;
        auto s = column_slice(v, &nodes);
        const size_t elem = dtype_size(g_.values[v].dtype);
        if (s && g_.values[s->source].dtype == g_.values[v].dtype && (s->column * elem) % 16 == 0) {
          found[static_cast<int>(k)] = *s;
          skip.insert(skip.end(), nodes.begin(), nodes.end());
          in.push_back(plugin_view(g_.values[v].dtype, g_.values[v].shape, g_.values[s->source].shape.back()));
        } else {
          in.push_back(plugin_view(g_.values[v].dtype, g_.values[v].shape));
        }
      }
      for (int v : n.outputs) out.push_back(plugin_view(g_.values[v].dtype, g_.values[v].shape));
      if (found.empty() || !plugin_supported(*p, *attrs, in, out).is_ok()) continue;
      plugin_slices_[static_cast<int>(i)] = std::move(found);
      for (int s : skip) done_[s] = true;
    }
  }
  Status lower_plugin(int i) {
    const Node& n = g_.nodes[i];
    const PluginOp* p = plugin_op(n.op);
    auto l = std::make_unique<PluginLayer>();
    l->op = p;
    l->attrs = QD_TRY(resolve_plugin_attrs(p->def, n.attrs));
    const auto slices = plugin_slices_.find(i);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int v = n.inputs[k];
      if (v < 0) continue;
      const InPlaceSlice* s = nullptr;
      if (slices != plugin_slices_.end()) {
        if (auto it = slices->second.find(static_cast<int>(k)); it != slices->second.end()) s = &it->second;
      }
      const int t = QD_TRY(ensure_generic(s ? s->source : v));
      l->ins.push_back(t);
      l->in_offset.push_back(s ? static_cast<size_t>(s->column) * dtype_size(g_.values[v].dtype) : 0);
      l->in.push_back(plugin_view(inst_->tensors[t].dtype, g_.values[v].shape, s ? g_.values[s->source].shape.back() : 0));
    }
    for (int v : n.outputs) {
      const int t = add_tensor(generic_ref(v));
      gen_[v] = t;
      l->outs.push_back(t);
      l->out.push_back(plugin_view(inst_->tensors[t].dtype, g_.values[v].shape));
    }
    QD_RETURN_IF_ERROR(plugin_supported(*p, l->attrs, l->in, l->out));
    QD_RETURN_IF_ERROR(choose_plugin_kernel(l.get(), in_.choices, in_.frozen));
    if (l->kernel->workspace) {
      if (size_t ws = l->kernel->workspace(l->attrs, l->tactic, l->in, l->out)) {
        l->workspace = static_cast<int>(buffer_bytes_.size());
        buffer_bytes_.push_back(ws);
        buffer_users_.push_back(1);
      }
    }
    const std::string dt = dtype_name(l->out.empty() ? DType::kFloat32 : from_plugin_dtype(l->out[0].dtype));
    l->info = {n.name, p->qualified, "plugin:" + l->kernel->name + "/" +
               (l->kernel->tactic_name ? l->kernel->tactic_name(l->tactic) : std::to_string(l->tactic)),
               dt, "nhwc:" + dt + (slices != plugin_slices_.end() ? "(in place)" : ""), "nhwc:" + dt,
               static_cast<double>(node_macs(g_, n))};
    add_layer(std::move(l));
    return Status::ok();
  }

  // Reshape-like ops change only the shape: the output is a view of the input's buffer, no layer runs.
  bool try_view(const Node& n) {
    static const OpType kViews[] = {OpType::Reshape, OpType::Flatten, OpType::Squeeze, OpType::Unsqueeze,
                                    OpType::Identity};
    if (std::find(std::begin(kViews), std::end(kViews), n.op) == std::end(kViews)) return false;
    if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
    const int v = n.inputs[0], out = n.outputs[0];
    if (gen_[v] < 0 || is_output_[out]) return false;
    const TensorRef& src = inst_->tensors[gen_[v]];
    if (src.buffer < 0 || src.nhwc || src.dtype != g_.values[out].dtype) return false;
    TensorRef r = src;
    r.shape = g_.values[out].shape;
    inst_->tensors.push_back(r);
    gen_[out] = static_cast<int>(inst_->tensors.size() - 1);
    ++buffer_users_[src.buffer];
    return true;
  }

  Status lower_generic(int i) {
    const Node& n = g_.nodes[i];
    if (try_view(n)) return Status::ok();
    auto l = std::make_unique<GenericLayer>();
    std::vector<TensorSpec> in_specs, out_specs;
    for (int v : n.inputs) {
      if (v < 0) {
        l->ins.push_back(-1);
        in_specs.push_back({});
        continue;
      }
      const int t = QD_TRY(ensure_generic(v));
      l->ins.push_back(t);
      in_specs.push_back({inst_->tensors[t].dtype, inst_->tensors[t].shape});
    }
    for (int v : n.outputs) {
      if (v < 0) {
        l->outs.push_back(-1);
        out_specs.push_back({});
        continue;
      }
      const int t = add_tensor(generic_ref(v));
      gen_[v] = t;
      l->outs.push_back(t);
      out_specs.push_back({inst_->tensors[t].dtype, inst_->tensors[t].shape});
    }
    l->kernel = QD_TRY(make_generic_kernel(g_, n, in_specs, out_specs));
    if (size_t ws = l->kernel->workspace_bytes()) {
      l->workspace = static_cast<int>(buffer_bytes_.size());
      buffer_bytes_.push_back(ws);
      buffer_users_.push_back(1);
    }
    const std::string fmt = out_specs.empty() ? "" : "nchw:" + std::string(dtype_name(out_specs[0].dtype));
    const bool fused = n.op == OpType::FusedConv;  // in profiles, a conv layer with its epilogue
    l->info = {layer_name(n), fused ? "Conv" : op_name(n.op), fused ? "generic_fused" : "generic",
               dtype_name(out_specs.empty() ? DType::kFloat32 : out_specs[0].dtype),
               in_specs.empty() ? "" : "nchw:" + std::string(dtype_name(in_specs[0].dtype)), fmt,
               static_cast<double>(node_macs(g_, n))};
    add_layer(std::move(l));
    return Status::ok();
  }

  // A Conv or FusedConv (BatchNormalization folded, activation and residual fused by the passes) as one
  // tensor-core layer.
  Status try_fused_conv(int i, bool* lowered) {
    const Node& n = g_.nodes[i];
    if (n.inputs.size() < 2 || !is_float4d(n.inputs[0]) || !g_.is_constant(n.inputs[1])) return Status::ok();
    const Tensor& w = *g_.constant(n.inputs[1]);
    if (w.dtype() != DType::kFloat32 || w.shape().size() != 4) return Status::ok();
    const Tensor* bias = n.inputs.size() > 2 && n.inputs[2] >= 0 ? g_.constant(n.inputs[2]) : nullptr;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !bias) return Status::ok();
    Shape out_shape;
    const ops::ConvGeom geo = QD_TRY(ops::conv_geom(n, g_.values[n.inputs[0]].shape, w.shape(), &out_shape));
    // Grouped convs: INT8 ones run conv_grouped_i8 (CUDA cores) with the fused epilogue, float ones the generic kernel.
    if (geo.group != 1 && !int8_convs_.count(n.name)) return Status::ok();

    const bool int8 = int8_convs_.count(n.name) != 0;
    const ConvEpilogue epi = QD_TRY(conv_epilogue(n));
    std::string names = layer_name(n);
    int cur = n.outputs[0];
    Act act = epi.act;
    const float aa = epi.a, ab = epi.b;
    const int res_value = epi.residual ? n.inputs[3] : -1;
    // A detection head: Conv -> Reshape [N, A, G, OH, OW] -> Transpose (0, 1, 3, 4, 2) [-> Sigmoid] read only by
    // the Slices of one slice_concat. The conv writes its NCHW result (after the Sigmoid), and the slice_concat
    // reads it transposed; the Reshape, Transpose and Sigmoid run no layers.
    int head_value = -1, head_hw = 0;
    if (act == Act::kNone && res_value < 0 && !s2d_[n.inputs[0]]) {
      const int r = sole_consumer(cur);
      const int t = r >= 0 && g_.nodes[r].op == OpType::Reshape && g_.nodes[r].inputs[0] == cur
                        ? sole_consumer(g_.nodes[r].outputs[0])
                        : -1;
      if (t >= 0 && g_.nodes[t].op == OpType::Transpose && g_.nodes[t].attrs.has("perm")) {
        const Shape& rs = g_.values[g_.nodes[r].outputs[0]].shape;
        const std::vector<int64_t> perm = QD_TRY(g_.nodes[t].attrs.get_ints("perm"));
        int x = g_.nodes[t].outputs[0];
        const int sg = sole_consumer(x);
        if (sg >= 0 && g_.nodes[sg].op == OpType::Sigmoid) x = g_.nodes[sg].outputs[0];
        if (rs.size() == 5 && rs[0] == geo.n && rs[1] * rs[2] == geo.m && rs[3] == geo.oh && rs[4] == geo.ow &&
            rs[0] * rs[1] <= 65535 && perm == std::vector<int64_t>{0, 1, 3, 4, 2} &&
            slice_sources_.count(x)) {
          head_value = x;
          head_hw = static_cast<int>(geo.oh * geo.ow);
          done_[r] = done_[t] = true;
          names += "+" + g_.nodes[r].name + "+" + g_.nodes[t].name;
          cur = g_.nodes[r].outputs[0];
          if (x != g_.nodes[t].outputs[0]) {
            act = Act::kSigmoid;
            done_[sg] = true;
            names += "+" + g_.nodes[sg].name;
          }
        }
      }
    }

    auto l = std::make_unique<ConvLayer>();
    l->int8 = int8;
    l->p.exact_silu = int8 && in_.opt->int8_mode == "bitexact";
    const bool s2d = s2d_[n.inputs[0]];
    const int image = s2d ? QD_TRY(image_stem_input(n.inputs[0], geo, int8)) : -1;
    if (image >= 0) {
      l->in = image;
    } else {
      l->in = s2d ? QD_TRY(ensure_s2d(n.inputs[0], int8)) : int8 ? q8_[n.inputs[0]] : QD_TRY(ensure_fast(n.inputs[0]));
    }
    if (res_value >= 0) {
      QD_RETURN_IF_ERROR(resolve(res_value));
      if (int8 && !q8_.empty() && q8_[res_value] >= 0 && !s2d_[res_value]) {
        // An INT8 tensor: its int8 copy, read as q * s in fp32 like the reference (its fp16 copy would round it).
        // INT8 convs only: the fp16 kernels' epilogue reads fp16 residuals (conv_igemm_kernels.cuh).
        l->res = q8_[res_value];
        l->p.res_scale = qscale_[res_value];
      } else {
        l->res = QD_TRY(ensure_fast(res_value));
      }
    }
    const std::string key = n.name + (int8 ? ":int8" : "") + (s2d ? ":s2d" : "");
    auto it = in_.weights->find(key);
    if (it == in_.weights->end()) {
      std::shared_ptr<PackedConv> packed;
      const Tensor w2 = s2d ? space_to_depth_weights(w) : w;
      if (int8) {
        packed = QD_TRY(pack_conv_int8(w2, bias, qscale_[n.inputs[0]], qat_weight_scales(n.inputs[1])));
      } else {
        packed = QD_TRY(pack_conv(w2, bias));
      }
      it = in_.weights->emplace(key, packed).first;
    }
    l->w = it->second;
    ConvParams& p = l->p;
    const int f = s2d ? 2 : 1;  // the space-to-depth conv: half the input, kernel and pads, stride 1
    p.N = static_cast<int>(geo.n);
    p.H = static_cast<int>(geo.h) / f;
    p.W = static_cast<int>(geo.w) / f;
    p.C = l->w->C;
    p.K = static_cast<int>(geo.m);
    p.R = static_cast<int>(geo.kh) / f;
    p.S = static_cast<int>(geo.kw) / f;
    p.stride_h = static_cast<int>(geo.sh) / f;
    p.stride_w = static_cast<int>(geo.sw) / f;
    p.pad_h = static_cast<int>(geo.ph) / f;
    p.pad_w = static_cast<int>(geo.pw) / f;
    p.dil_h = static_cast<int>(geo.dh);
    p.dil_w = static_cast<int>(geo.dw);
    p.OH = static_cast<int>(geo.oh);
    p.OW = static_cast<int>(geo.ow);
    p.Kp = l->w->Kp;
    if (image >= 0) {
      const TensorRef& x = inst_->tensors[image];
      p.in_format = x.dtype == DType::kFloat16   ? InFormat::kImageF16
                    : x.dtype == DType::kFloat32 ? InFormat::kImageF32
                                                 : InFormat::kImageI8;
      p.in_nchw = !x.nhwc;
      p.in_channels = static_cast<int>(geo.c);
      if (int8) p.in_scale = qscale_[n.inputs[0]];
    }
    p.act = act;
    p.act_a = aa;
    p.act_b = ab;
    // NHWC fp16 output when a consumer stays on the fast path; NCHW fp32 straight from the epilogue otherwise.
    bool fast_consumer = false;
    for (int c : consumers_[cur]) {
      const OpType op = g_.nodes[c].op;
      fast_consumer |= is_conv(op) || op == OpType::MaxPool || op == OpType::Resize || op == OpType::Concat;
    }
    // INT8 straight from the epilogue when an INT8 conv takes this tensor as its input: the value is quantized with
    // its own scale from the fp32 result, as the reference does. When other ops read it too (a residual Add, a
    // Concat, a MaxPool), the epilogue also writes the dequantized value they read (NHWC fp16), which a quantize pass
    // would otherwise make.
    bool int8_out = !qscale_.empty() && qscale_[cur] != 0.f && !is_output_[cur] && p.K % 16 == 0 &&
                    !consumers_[cur].empty();
    bool others = false;  // readers other than INT8 convs taking it as their input
    for (int c : consumers_[cur]) {
      if (int8_conv_input(c, cur)) continue;
      others = true;
      // They must be on the NHWC fp16 path, where a quantize pass would also have left the dequantized value.
      const OpType op = g_.nodes[c].op;
      int8_out &= is_conv(op) || op == OpType::MaxPool || op == OpType::Resize || op == OpType::Concat ||
                  op == OpType::Add;
    }
    if (head_value >= 0) {  // the Reshape's layout; only the slice_concat reads it
      TensorRef r = generic_ref(cur);
      const bool half = half_sources_.count(head_value) > 0;  // it writes an fp16 binding: no need for fp32 here
      if (half) {
        r.dtype = DType::kFloat16;
        r.bytes /= 2;
      }
      l->out = add_tensor(r);
      transposed_[head_value] = {l->out, head_hw};
      p.out_format = half ? OutFormat::kNchwF16 : OutFormat::kNchwF32;
    } else if (int8_out) {
      l->out = q8_[cur] = nhwc_tensor(g_.values[cur].shape, DType::kInt8);
      p.out_format = OutFormat::kNhwcI8;
      p.out_scale = qscale_[cur];
      if (others) {
        l->out2 = fast_t_[cur] = nhwc_tensor(g_.values[cur].shape);
        p.out2_format = Out2Format::kF16;
        p.out2_of_q = true;
      }
    } else if (fast_consumer && p.K % 8 == 0) {
      l->out = nhwc_tensor(g_.values[cur].shape);
      fast_t_[cur] = l->out;
      p.out_format = OutFormat::kNhwcF16;
    } else {
      TensorRef r = generic_ref(cur);
      l->out = add_tensor(r);
      gen_[cur] = l->out;
      p.out_format = OutFormat::kNchwF32;
    }
    l->ins = {l->in};
    if (l->res >= 0) l->ins.push_back(l->res);
    l->outs = {l->out};
    if (l->out2 >= 0) l->outs.push_back(l->out2);
    l->info = {names, "conv", "", int8 ? "int8" : "fp16", fmt_of(inst_->tensors[l->in]),
               fmt_of(inst_->tensors[l->out]), static_cast<double>(node_macs(g_, n))};
    if (geo.group != 1) {
      l->groups = static_cast<int>(geo.group);
      l->group_channels = static_cast<int>(geo.c / geo.group);
      l->info.kernel = "conv_grouped_i8";
    } else {
      conv_layers_.push_back(static_cast<int>(inst_->layers.size()));  // timed among the tile configurations
    }
    add_layer(std::move(l));
    *lowered = true;
    return Status::ok();
  }

  // The QAT model's per-channel scales of weight constant `w`, or null (then computed from the weights).
  const std::vector<float>* qat_weight_scales(int w) const {
    auto it = in_.int8->weight_scales.find(g_.values[w].name);
    return it == in_.int8->weight_scales.end() ? nullptr : &it->second;
  }

  // An INT8 Gemm (the reference's conditions: no transA, alpha = beta = 1; int8_gemm_operands') as the 1x1 INT8 conv
  // it is on N pixels of 1x1: the same kernels and epilogue, y = acc * (s_x * s_w[k]) + bias[k], written as the
  // [N, K] fp32 result.
  Status lower_int8_gemm(int i) {
    const Node& n = g_.nodes[i];
    const int x = n.inputs[0];
    const auto gemm = int8_gemm_operands(g_, n);
    if (!gemm || q8_[x] < 0) return internal("INT8 Gemm '" + n.name + "' cannot be lowered");
    const auto [b, bias, trans_b, C, K] = *gemm;
    const std::string key = n.name + ":int8";
    auto it = in_.weights->find(key);
    if (it == in_.weights->end()) {
      Tensor w(DType::kFloat32, {K, C, 1, 1});  // B as conv weights [K][C]
      for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < C; ++c) {
          w.data<float>()[k * C + c] = b->data<float>()[trans_b ? k * C + c : c * K + k];
        }
      Tensor bv(DType::kFloat32, {K});
      if (bias) std::copy(bias->data<float>(), bias->data<float>() + K, bv.data<float>());
      auto packed = QD_TRY(pack_conv_int8(w, &bv, qscale_[x], qat_weight_scales(n.inputs[1])));
      it = in_.weights->emplace(key, packed).first;
    }
    auto l = std::make_unique<ConvLayer>();
    l->int8 = true;
    l->w = it->second;
    ConvParams& p = l->p;
    p.N = static_cast<int>(g_.values[x].shape[0]);
    p.H = p.W = p.OH = p.OW = p.R = p.S = 1;
    p.C = l->w->C;
    p.K = static_cast<int>(K);
    p.Kp = l->w->Kp;
    p.out_format = OutFormat::kNchwF32;
    l->in = q8_[x];
    const int y = n.outputs[0];
    l->out = gen_[y] = add_tensor(generic_ref(y));
    l->ins = {l->in};
    l->outs = {l->out};
    l->info = {n.name, "gemm", "", "int8", fmt_of(inst_->tensors[l->in]), fmt_of(inst_->tensors[l->out]),
               static_cast<double>(node_macs(g_, n))};
    conv_layers_.push_back(static_cast<int>(inst_->layers.size()));
    add_layer(std::move(l));
    return Status::ok();
  }

  // A channel Concat read only by INT8 convs is built in int8 when each of its inputs is
  //  - an INT8 conv's fp16 output (YOLOv5's C3 blocks): the conv quantizes it with the Concat output's scale straight
  //    into the int8 tensor's channel slice;
  //  - a conv's second, fp16 output (the dequantized value of an INT8 tensor that INT8 convs read too, e.g. the
  //    backbone features YOLOv5's neck concatenates): that output becomes int8 with the Concat's scale, requantized
  //    from q * s in fp32 as the reference does;
  //  - a MaxPool of an earlier input (SPPF: x, mp(x), mp(mp(x)), ...): it pools int8 slices into int8 slices;
  //  - a nearest Resize of an INT8 conv's fp16 output (YOLOv5's upsampling): the conv also writes that output
  //    quantized with the Concat's scale (as its only output when nothing else reads it), which the Resize
  //    copies into the slice.
  // No Concat layer, no quantize pass; the same values as quantizing the concatenated floats (max-pooling and nearest
  // resizing commute with the quantization). Each input may have other readers only where they do not need its fp16
  // tensor: INT8 convs (they read its int8 copy), MaxPools of this rule, Resizes already moved to int8 by it.
  Status try_int8_concat(int i, bool* lowered) {
    const Node& n = g_.nodes[i];
    if (n.outputs.size() != 1 || n.outputs[0] < 0) return Status::ok();
    const int out_v = n.outputs[0];
    if (qscale_[out_v] == 0.f || is_output_[out_v] || !is_float4d(out_v)) return Status::ok();
    if (QD_TRY(n.attrs.get_int("axis", 0)) % 4 != 1) return Status::ok();
    for (int c : consumers_[out_v]) {
      if (!int8_conv_input(c, out_v)) return Status::ok();
    }
    const auto input_index = [&n](int v) {
      return static_cast<int>(std::find(n.inputs.begin(), n.inputs.end(), v) - n.inputs.begin());
    };
    enum class Kind { kConv, kConvOut2, kPool, kPoolChain, kResize };
    struct Input {
      Kind kind;
      int layer;         // the layer writing the input (for kResize, the Resize's)
      int pool_src = -1;  // kPool, and kPoolChain's first pool: the index of the input it pools
      int conv = -1;      // kResize: the layer of the conv whose output it resizes
      int resized = -1;   // kResize: that output's value
    };
    std::vector<Input> inputs;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int v = n.inputs[k];
      if (v < 0 || is_output_[v] || fast_t_[v] < 0 || aliased_[fast_t_[v]] || g_.values[v].shape[1] % 16 ||
          input_index(v) != static_cast<int>(k) || std::count(n.inputs.begin(), n.inputs.end(), v) != 1) {
        return Status::ok();
      }
      for (int c : consumers_[v]) {
        const bool pool =
            g_.nodes[c].op == OpType::MaxPool && input_index(g_.nodes[c].outputs[0]) > static_cast<int>(k);
        if (c != i && !pool && !int8_conv_input(c, v) && !int8_resizes_.count(c)) return Status::ok();
      }
      const auto pit = producer_.find(fast_t_[v]);
      if (pit == producer_.end()) return Status::ok();
      Layer* l = inst_->layers[pit->second].get();
      Input in{Kind::kConv, pit->second};
      if (auto* c = dynamic_cast<ConvLayer*>(l)) {
        if (c->int8 && c->out == fast_t_[v] && c->p.out_format == OutFormat::kNhwcF16) {
          in.kind = Kind::kConv;
        } else if (c->int8 && c->out2 == fast_t_[v] && c->p.out2_format == Out2Format::kF16) {
          in.kind = Kind::kConvOut2;
        } else {
          return Status::ok();
        }
      } else if (dynamic_cast<MaxPoolLayer*>(l) || dynamic_cast<MaxPoolChainLayer*>(l)) {
        // A pool of an input before it (SPPF). A single pool reads that input itself; a chain's later pools read the
        // pool before them, and every output of the chain must be an input too (each gets a slice).
        const int pi = g_.values[v].producer;
        if (pi < 0 || g_.nodes[pi].op != OpType::MaxPool || g_.nodes[pi].outputs[0] != v) return Status::ok();
        const int pooled = g_.nodes[pi].inputs[0];
        const int src = input_index(pooled);
        const bool reads_src = l->ins[0] == fast_t_[pooled];
        if (src >= static_cast<int>(k)) return Status::ok();
        if (auto* ch = dynamic_cast<MaxPoolChainLayer*>(l)) {
          for (int t : ch->outs) {
            if (std::none_of(n.inputs.begin(), n.inputs.end(), [&](int u) { return u >= 0 && fast_t_[u] == t; })) {
              return Status::ok();
            }
          }
          in.kind = Kind::kPoolChain;
          if (reads_src) in.pool_src = src;  // the chain's first pool
        } else {
          if (!reads_src) return Status::ok();
          in.kind = Kind::kPool;
          in.pool_src = src;
        }
      } else if (auto* up = dynamic_cast<UpsampleLayer*>(l)) {
        const int pi = g_.values[v].producer;
        if (pi < 0 || g_.nodes[pi].op != OpType::Resize || g_.nodes[pi].outputs[0] != v) return Status::ok();
        const int u = g_.nodes[pi].inputs[0];
        if (consumers_[v].size() != 1 || is_output_[u] || fast_t_[u] < 0 || up->ins[0] != fast_t_[u]) {
          return Status::ok();
        }
        const auto cit = producer_.find(fast_t_[u]);
        auto* c = cit == producer_.end() ? nullptr : dynamic_cast<ConvLayer*>(inst_->layers[cit->second].get());
        if (!c || !c->int8 || c->out != fast_t_[u] || c->p.out_format != OutFormat::kNhwcF16 || c->out2 >= 0) {
          return Status::ok();
        }
        in.kind = Kind::kResize;
        in.conv = cit->second;
        in.resized = u;
      } else {
        return Status::ok();
      }
      inputs.push_back(in);
    }
    for (const Input& in : inputs) {  // a pool chain's input must be one of the Concat's too
      if (in.kind == Kind::kPoolChain && std::none_of(inputs.begin(), inputs.end(), [&](const Input& o) {
            return o.layer == in.layer && o.pool_src >= 0;
          })) {
        return Status::ok();
      }
    }
    const float scale = qscale_[out_v];
    const int y = q8_[out_v] = nhwc_tensor(g_.values[out_v].shape, DType::kInt8);
    std::vector<int> slices;
    int coff = 0;
    for (int v : n.inputs) {
      const int t = nhwc_tensor(g_.values[v].shape, DType::kInt8);
      TensorRef& x = inst_->tensors[t];
      buffer_bytes_[x.buffer] = 0;  // lives in y's buffer
      x.buffer = inst_->tensors[y].buffer;
      x.ld = inst_->tensors[y].ld;
      x.coff = coff;
      aliased_[t] = true;
      coff += static_cast<int>(g_.values[v].shape[1]);
      slices.push_back(t);
    }
    // The layer at `index` writes `t` instead of its tensor `old`, whose buffer is no longer used.
    const auto retarget = [this](int index, int old, int t) {
      Layer* l = inst_->layers[index].get();
      if (const int b = inst_->tensors[old].buffer; b >= 0) buffer_bytes_[b] = 0;
      producer_.erase(old);
      producer_[t] = index;
      std::replace(l->outs.begin(), l->outs.end(), old, t);
      l->info.out_format = fmt_of(inst_->tensors[l->outs[0]]);
      return l;
    };
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Input& in = inputs[k];
      const int t = slices[k], old = fast_t_[n.inputs[k]];
      Layer* l = retarget(in.layer, old, t);
      const std::string suffix = "+" + n.name;  // once per layer (a pool chain writes several inputs)
      if (l->info.name.size() < suffix.size() ||
          l->info.name.compare(l->info.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        l->info.name += suffix;
      }
      switch (in.kind) {
        case Kind::kConv: {
          auto* c = static_cast<ConvLayer*>(l);
          c->out = t;
          c->p.out_format = OutFormat::kNhwcI8;
          c->p.out_scale = scale;
          break;
        }
        case Kind::kConvOut2: {
          auto* c = static_cast<ConvLayer*>(l);
          c->out2 = t;
          c->p.out2_format = Out2Format::kI8;
          c->p.out2_scale = scale;
          break;
        }
        case Kind::kPool: {
          auto* mp = static_cast<MaxPoolLayer*>(l);
          mp->int8 = true;
          mp->ins = {slices[static_cast<size_t>(in.pool_src)]};
          mp->info.precision = "int8";
          mp->info.in_format = fmt_of(inst_->tensors[mp->ins[0]]);
          break;
        }
        case Kind::kPoolChain: {
          auto* ch = static_cast<MaxPoolChainLayer*>(l);
          ch->int8 = true;
          if (in.pool_src >= 0) ch->ins = {slices[static_cast<size_t>(in.pool_src)]};
          ch->info.precision = "int8";
          ch->info.in_format = fmt_of(inst_->tensors[ch->ins[0]]);
          break;
        }
        case Kind::kResize: {
          // The conv's output quantized with this Concat's scale: its only output when the Resize was its only
          // reader, else a second one beside the fp16 tensor the others read.
          auto* c = static_cast<ConvLayer*>(inst_->layers[in.conv].get());
          const int u = in.resized;
          const int q = nhwc_tensor(g_.values[u].shape, DType::kInt8);
          const bool others = consumers_[u].size() > 1;
          if (others) {
            c->out2 = q;
            c->outs.push_back(q);
            producer_[q] = in.conv;
            c->p.out2_format = Out2Format::kI8;
            c->p.out2_of_q = false;
            c->p.out2_scale = scale;
          } else {
            retarget(in.conv, c->out, q);
            c->out = q;
            c->p.out_format = OutFormat::kNhwcI8;
            c->p.out_scale = scale;
            fast_t_[u] = -1;
          }
          auto* up = static_cast<UpsampleLayer*>(l);
          up->int8 = true;
          up->ins = {q};
          up->info.precision = "int8";
          up->info.in_format = fmt_of(inst_->tensors[q]);
          int8_resizes_.insert(g_.values[n.inputs[k]].producer);
          break;
        }
      }
    }
    for (int v : n.inputs) fast_t_[v] = -1;  // no fp16 copies are left for these values' remaining readers
    int8_concat_slices_.push_back(slices);
    *lowered = true;
    return Status::ok();
  }

  // MaxPool / nearest Resize / Concat on NHWC inputs.
  Status try_nhwc_movement(int i, bool* lowered) {
    const Node& n = g_.nodes[i];
    if (n.outputs.size() != 1 || n.outputs[0] < 0) return Status::ok();
    const int out_v = n.outputs[0];
    const Shape& os = g_.values[out_v].shape;
    if (os.size() != 4 || g_.values[out_v].dtype != DType::kFloat32) return Status::ok();
    for (int v : n.inputs) {
      if (v >= 0 && !g_.is_constant(v) && fast_t_[v] < 0) return Status::ok();  // input not on the fast path
    }
    const int x = n.inputs[0];
    if (!is_float4d(x) || g_.values[x].shape[1] % 8 != 0) return Status::ok();
    const Shape& is = g_.values[x].shape;
    std::unique_ptr<Layer> layer;
    if (n.op == OpType::MaxPool) {
      QD_RETURN_IF_ERROR(try_pool_chain(i, lowered));
      if (*lowered) return Status::ok();
      if (n.outputs.size() > 1 || QD_TRY(n.attrs.get_int("ceil_mode", 0)) != 0) return Status::ok();
      auto k = QD_TRY(n.attrs.get_ints("kernel_shape", std::vector<int64_t>{}));
      if (k.size() != 2) return Status::ok();
      ops::Window win = QD_TRY(ops::read_window(n.attrs, 2, k));
      if (win.dilations[0] != 1 || win.dilations[1] != 1) return Status::ok();
      std::vector<int64_t> o = QD_TRY(ops::window_output({is[2], is[3]}, &win, false));
      auto l = std::make_unique<MaxPoolLayer>();
      l->p = {static_cast<int>(is[0]), static_cast<int>(is[1]), static_cast<int>(is[2]), static_cast<int>(is[3]),
              static_cast<int>(o[0]), static_cast<int>(o[1]), static_cast<int>(k[0]), static_cast<int>(k[1]),
              static_cast<int>(win.strides[0]), static_cast<int>(win.strides[1]), static_cast<int>(win.pads[0]),
              static_cast<int>(win.pads[1])};
      layer = std::move(l);
    } else if (n.op == OpType::Resize) {
      const std::string mode = QD_TRY(n.attrs.get_string("mode", std::string("nearest")));
      const std::string ctm =
          QD_TRY(n.attrs.get_string("coordinate_transformation_mode", std::string("half_pixel")));
      const std::string nm = QD_TRY(n.attrs.get_string("nearest_mode", std::string("round_prefer_floor")));
      // An integer upscale by f maps output x to input floor(x / f): so asymmetric + floor (YOLOv5's export), and
      // half_pixel (ONNX's default) + round_prefer_floor/ceil, whose (x + 0.5) / f - 0.5 lies within 0.5 - 0.5 / f
      // of floor(x / f) (pytorch_half_pixel differs only for outputs of length 1, which map to 0 either way).
      const bool half = ctm == "half_pixel" || ctm == "pytorch_half_pixel";
      const bool floor_map = (ctm == "asymmetric" && nm == "floor") ||
                             (half && (nm == "round_prefer_floor" || nm == "round_prefer_ceil"));
      if (mode != "nearest" || !floor_map) return Status::ok();
      if (os[0] != is[0] || os[1] != is[1] || os[2] % is[2] || os[3] % is[3]) return Status::ok();
      auto l = std::make_unique<UpsampleLayer>();
      l->N = static_cast<int>(is[0]);
      l->C = static_cast<int>(is[1]);
      l->H = static_cast<int>(is[2]);
      l->W = static_cast<int>(is[3]);
      l->fh = static_cast<int>(os[2] / is[2]);
      l->fw = static_cast<int>(os[3] / is[3]);
      layer = std::move(l);
    } else {  // Concat
      int64_t axis = QD_TRY(n.attrs.get_int("axis", 0));
      if (axis < 0) axis += 4;
      if (axis != 1) return Status::ok();
      for (int v : n.inputs) {
        if (!is_float4d(v) || g_.values[v].shape[1] % 8 != 0) return Status::ok();
      }
      auto l = std::make_unique<ConcatLayer>();
      l->in_place.assign(n.inputs.size(), false);
      layer = std::move(l);
    }
    std::vector<int> ins;
    for (int v : n.op == OpType::Concat ? n.inputs : std::vector<int>{x}) ins.push_back(QD_TRY(ensure_fast(v)));
    layer->ins = ins;
    layer->outs = {nhwc_tensor(os)};
    fast_t_[out_v] = layer->outs[0];
    layer->info = {n.name, std::string(op_name(n.op)) + "_nhwc", "nhwc", "fp16", fmt_of(inst_->tensors[ins[0]]),
                   fmt_of(inst_->tensors[layer->outs[0]]), 0};
    add_layer(std::move(layer));
    *lowered = true;
    return Status::ok();
  }

  // The window of MaxPool m when it is odd, stride 1, with (k - 1) / 2 padding on every side (the output the input's
  // size), else empty.
  Expected<std::vector<int64_t>> same_size_pool(const Node& m) {
    if (m.op != OpType::MaxPool || m.outputs.size() != 1 || m.inputs.empty() || !is_float4d(m.inputs[0]) ||
        QD_TRY(m.attrs.get_int("ceil_mode", 0)) != 0) {
      return std::vector<int64_t>{};
    }
    const std::vector<int64_t> k = QD_TRY(m.attrs.get_ints("kernel_shape", std::vector<int64_t>{}));
    if (k.size() != 2 || k[0] % 2 == 0 || k[1] % 2 == 0) return std::vector<int64_t>{};
    ops::Window win = QD_TRY(ops::read_window(m.attrs, 2, k));
    const Shape& is = g_.values[m.inputs[0]].shape;
    const std::vector<int64_t> o = QD_TRY(ops::window_output({is[2], is[3]}, &win, false));
    const bool same = win.strides[0] == 1 && win.strides[1] == 1 && win.dilations[0] == 1 && win.dilations[1] == 1 &&
                      o[0] == is[2] && o[1] == is[3] && win.pads[0] == k[0] / 2 && win.pads[1] == k[1] / 2 &&
                      win.pads[2] == k[0] / 2 && win.pads[3] == k[1] / 2;
    return same ? k : std::vector<int64_t>{};
  }

  // YOLOv5's SPPF: MaxPool i and the MaxPools after it that each pool the one before with the same odd window, stride
  // 1 and (k - 1) / 2 padding, as one maxpool_chain_nhwc layer (on fp16 tensors; in INT8 plans try_int8_concat moves
  // it to the int8 slices of the Concat that takes the pools). The later pools run no layers.
  Status try_pool_chain(int i, bool* lowered) {
    const std::vector<int64_t> k = QD_TRY(same_size_pool(g_.nodes[i]));
    const Shape& is = g_.values[g_.nodes[i].inputs[0]].shape;
    if (k.empty() || !maxpool_chain_fits(static_cast<int>(is[1]), static_cast<int>(is[2]), static_cast<int>(is[3]))) {
      return Status::ok();
    }
    std::vector<int> chain = {i};
    while (chain.size() < kMaxPoolChain) {
      const int y = g_.nodes[chain.back()].outputs[0];
      int next = -1;
      for (int c : consumers_[y]) {
        if (!done_[c] && g_.nodes[c].inputs[0] == y && QD_TRY(same_size_pool(g_.nodes[c])) == k) next = c;
      }
      if (next < 0) break;
      chain.push_back(next);
    }
    if (chain.size() < 2) return Status::ok();
    auto l = std::make_unique<MaxPoolChainLayer>();
    l->N = static_cast<int>(is[0]);
    l->C = static_cast<int>(is[1]);
    l->H = static_cast<int>(is[2]);
    l->W = static_cast<int>(is[3]);
    l->kh = static_cast<int>(k[0]);
    l->kw = static_cast<int>(k[1]);
    l->ins = {QD_TRY(ensure_fast(g_.nodes[i].inputs[0]))};
    std::string names;
    for (int c : chain) {
      const int y = g_.nodes[c].outputs[0];
      l->outs.push_back(fast_t_[y] = nhwc_tensor(g_.values[y].shape));
      names += (names.empty() ? "" : "+") + g_.nodes[c].name;
      done_[c] = true;
    }
    l->info = {names, "MaxPool_nhwc", "maxpool_chain_nhwc", "fp16", fmt_of(inst_->tensors[l->ins[0]]),
               fmt_of(inst_->tensors[l->outs[0]]), 0};
    add_layer(std::move(l));
    *lowered = true;
    return Status::ok();
  }

  // Producers of a Concat's inputs write into the output's channel slice when nothing else needs the input whole.
  void concat_in_place() {
    for (auto& lp : inst_->layers) {
      auto* cat = dynamic_cast<ConcatLayer*>(lp.get());
      if (!cat) continue;
      TensorRef& y = inst_->tensors[cat->outs[0]];
      int coff = 0;
      for (size_t i = 0; i < cat->ins.size(); ++i) {
        const int t = cat->ins[i];
        TensorRef& x = inst_->tensors[t];
        const int C = static_cast<int>(x.shape[1]);
        const auto pit = producer_.find(t);
        // Reformats write whole tensors; a Concat output already hosts its own inputs' slices.
        const std::string kind = pit == producer_.end() ? "" : inst_->layers[pit->second]->info.kind;
        const bool producer_ok = kind == "conv" || kind == "MaxPool_nhwc" || kind == "Resize_nhwc";
        if (producer_ok && x.slot < 0 && x.buffer >= 0 && !aliased_[t] && x.coff == 0 && coff % 8 == 0 &&
            y.buffer >= 0 && x.ld == round_up(C, 8) && C % 8 == 0) {
          buffer_bytes_[x.buffer] = 0;  // its own buffer is no longer used
          x.buffer = y.buffer;
          x.ld = y.ld;
          x.coff = coff;
          aliased_[t] = true;
          cat->in_place[i] = true;
        }
        coff += C;
      }
    }
  }

  // Sibling convs as one: two convs that read the same tensor with the same geometry, precision and epilogue
  // (YOLOv5's C3 cv1 and cv2, 1x1 over the block's input) run as one conv over both weight sets, reading their input
  // once instead of twice, where their outputs can lie side by side in one buffer. That is so when the second's
  // output is a Concat's channel slice (concat_in_place, or an INT8 Concat of try_int8_concat) and the first's can
  // take the slice just before it: the slice of the Concat's preceding input, whose producer writes it after every
  // reader of the first's output has run (the last bottleneck; it may itself read the first's output, but only as
  // its residual: each element is read and then written by the same thread, as every conv epilogue adds its
  // residual). INT8 ones keep each output's scale (ConvParams::out_split: cv2's is the Concat's, cv1's its own).
  Status merge_sibling_convs() {
    auto& layers = inst_->layers;
    std::vector<std::pair<int, int>> neighbours;  // tensors in consecutive slices of a Concat's buffer
    for (const auto& l : layers) {
      const auto* cat = dynamic_cast<const ConcatLayer*>(l.get());
      for (size_t j = 1; cat && j < cat->ins.size(); ++j) {
        if (cat->in_place[j] && cat->in_place[j - 1]) neighbours.emplace_back(cat->ins[j - 1], cat->ins[j]);
      }
    }
    for (const auto& slices : int8_concat_slices_) {
      for (size_t j = 1; j < slices.size(); ++j) neighbours.emplace_back(slices[j - 1], slices[j]);
    }
    for (const auto& [t0, tb] : neighbours) {
      const int ib = producer_index(tb), i0 = producer_index(t0);
      auto* b = ib >= 0 ? dynamic_cast<ConvLayer*>(layers[ib].get()) : nullptr;
      if (!b || !mergeable(*b) || b->out != tb || i0 < 0) continue;
      for (size_t ia = 0; ia < layers.size(); ++ia) {
        auto* a = dynamic_cast<ConvLayer*>(layers[ia].get());
        if (!a || a == b || a->in != b->in || a->int8 != b->int8 || !mergeable(*a) ||
            !same_conv_but_k(a->p, b->p)) {
          continue;
        }
        const int ta = a->out;
        TensorRef& x = inst_->tensors[ta];
        const TensorRef& x0 = inst_->tensors[t0];
        if (x.slot >= 0 || x.buffer < 0 || aliased_[ta] || x.coff != 0 || a->p.K % 8 || x.ld != a->p.K ||
            x.shape != x0.shape || x.dtype != x0.dtype || static_cast<int>(ia) >= i0 || !readers_done_by(ta, i0)) {
          continue;
        }
        const std::string key = "merge:" + a->info.name + "|" + b->info.name + (a->int8 ? ":int8" : "");
        auto it = in_.weights->find(key);
        if (it == in_.weights->end()) it = in_.weights->emplace(key, QD_TRY(merge_packed(*a->w, *b->w))).first;
        auto m = std::make_unique<ConvLayer>(*a);
        m->w = it->second;
        m->p.K = a->p.K + b->p.K;
        if (a->int8) {
          m->p.out_split = a->p.K;
          m->p.out_scale_hi = b->p.out_scale;
        }
        m->info.name = a->info.name + "+" + b->info.name;
        m->info.macs = a->info.macs + b->info.macs;
        buffer_bytes_[x.buffer] = 0;  // a's own buffer is no longer used: its output sits in the Concat's
        x.buffer = x0.buffer;
        x.ld = x0.ld;
        x.coff = x0.coff;
        aliased_[ta] = true;
        const size_t first = std::min(ia, static_cast<size_t>(ib)), second = std::max(ia, static_cast<size_t>(ib));
        layers[first] = std::move(m);
        layers.erase(layers.begin() + static_cast<std::ptrdiff_t>(second));
        reindex_layers();
        return merge_sibling_convs();  // indices moved: start over (a few pairs per network)
      }
    }
    return Status::ok();
  }
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
  // Whether every layer reading tensor t runs before layer `last`, or is `last` reading t only as its residual.
  bool readers_done_by(int t, int last) const {
    for (size_t l = 0; l < inst_->layers.size(); ++l) {
      const Layer& L = *inst_->layers[l];
      if (std::find(L.ins.begin(), L.ins.end(), t) == L.ins.end()) continue;
      if (static_cast<int>(l) < last) continue;
      const auto* c = dynamic_cast<const ConvLayer*>(&L);
      if (static_cast<int>(l) > last || !c || c->in == t || c->res != t) return false;
    }
    return true;
  }
  // After layers were removed: the producers' and the timed convs' layer indices.
  void reindex_layers() {
    producer_.clear();
    conv_layers_.clear();
    for (size_t l = 0; l < inst_->layers.size(); ++l) {
      const Layer& L = *inst_->layers[l];
      for (int t : L.outs) {
        if (t >= 0) producer_[t] = static_cast<int>(l);
      }
      if (const auto* c = dynamic_cast<const ConvLayer*>(&L); c && c->groups == 1) {
        conv_layers_.push_back(static_cast<int>(l));
      }
    }
  }

  // A conv's second output that no layer reads is not written: e.g. the dequantized fp16 copy of an INT8 tensor
  // whose only other readers were residual Adds, which now read its int8 copy.
  void drop_unread_out2() {
    std::set<int> read(inst_->slot_tensor.begin(), inst_->slot_tensor.end());
    for (const auto& l : inst_->layers) read.insert(l->ins.begin(), l->ins.end());
    for (auto& lp : inst_->layers) {
      auto* c = dynamic_cast<ConvLayer*>(lp.get());
      if (!c || c->out2 < 0 || read.count(c->out2) || aliased_[c->out2]) continue;
      if (const int b = inst_->tensors[c->out2].buffer; b >= 0) buffer_bytes_[b] = 0;
      c->outs.erase(std::remove(c->outs.begin(), c->outs.end(), c->out2), c->outs.end());
      c->out2 = -1;
    }
  }

  // Branches beside the main chain (a detector's heads and their decodes) go to a side stream, moved up to start
  // as soon as their inputs exist (plan/stream_schedule.h). What a layer touches, by arena buffer or I/O slot. Not
  // with KernelPolicy::side_stream off (A/B runs).
  void schedule_streams() {
    if (!in_.opt->kernel_policy.side_stream) return;
    auto& layers = inst_->layers;
    const int nbuf = static_cast<int>(buffer_bytes_.size());
    auto id = [&](int t) {  // -1: none (no tensor, a constant)
      if (t < 0) return -1;
      const TensorRef& r = inst_->tensors[t];
      return r.buffer >= 0 ? r.buffer : r.slot >= 0 ? nbuf + r.slot : -1;
    };
    std::vector<LayerAccess> access(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      for (int t : layers[l]->ins) {
        if (const int i = id(t); i >= 0) access[l].reads.push_back(i);
      }
      for (int t : layers[l]->outs) {
        if (const int i = id(t); i >= 0) access[l].writes.push_back(i);
      }
      if (layers[l]->workspace >= 0) access[l].writes.push_back(layers[l]->workspace);
    }
    const StreamSchedule s = schedule_side_branches(access);
    if (!s.any_side()) return;
    std::vector<std::unique_ptr<Layer>> ordered;
    for (size_t p = 0; p < s.order.size(); ++p) {
      ordered.push_back(std::move(layers[s.order[p]]));
      ordered.back()->side = s.side[p];
      ordered.back()->wait = s.wait[p];
      ordered.back()->info.stream = s.side[p] ? 1 : 0;
    }
    layers = std::move(ordered);
    reindex_layers();
  }

  // Lifetimes over the layer sequence, then the arena layout.
  Status plan() {
    std::vector<BufferLife> lives(buffer_bytes_.size());
    for (size_t b = 0; b < lives.size(); ++b) {
      lives[b].bytes = buffer_bytes_[b];
      lives[b].first = INT_MAX;
      lives[b].last = -1;
    }
    // What a side-stream layer touches stays reserved to the end: the main stream runs on without waiting for it.
    const int end = static_cast<int>(inst_->layers.size()) - 1;
    for (size_t l = 0; l < inst_->layers.size(); ++l) {
      const Layer& L = *inst_->layers[l];
      const auto touch = [&](int b) {
        lives[b].first = std::min(lives[b].first, static_cast<int>(l));
        lives[b].last = std::max(lives[b].last, L.side ? end : static_cast<int>(l));
      };
      for (const auto* list : {&L.ins, &L.outs}) {
        for (int t : *list) {
          if (t >= 0 && inst_->tensors[t].buffer >= 0) touch(inst_->tensors[t].buffer);
        }
      }
      if (L.workspace >= 0) touch(L.workspace);
    }
    for (auto& life : lives) {
      if (life.last < 0) {  // never used (aliased away, or a tensor no layer touches)
        life.bytes = 0;
        life.first = life.last = 0;
      }
    }
    MemoryPlan mp = plan_memory(lives);
    inst_->buffer_offsets = mp.offsets;
    inst_->arena_bytes = mp.arena_bytes;
    inst_->activation_bytes = mp.total_bytes;
    return Status::ok();
  }

  // KernelPolicy's epilogue switches (A/B runs), on every conv layer once the layers are final.
  void apply_epilogue_policy() {
    const qdeploy::KernelPolicy& policy = in_.opt->kernel_policy;
    for (auto& l : inst_->layers) {
      auto* c = dynamic_cast<ConvLayer*>(l.get());
      if (!c) continue;
      c->p.direct_epilogue = !policy.staged_epilogue;
      c->p.no_quad_epilogue = c->p.no_quad_epilogue || !policy.quad_epilogue;
      c->p.no_lean = !policy.lean_epilogue;
      c->small_acc_ok = policy.small_acc;
    }
  }

  // ---- kernel choice: time the candidates of each conv signature not chosen yet ----
  // A signature is "<kind>:n<N>:<the rest>"; the batch sits alone in the second field (see nearest_batch_choice).
  // 0: no residual, 1: fp16, 2: int8.
  static int residual_kind(const ConvLayer& c) {
    return c.res < 0 ? 0 : c.p.res_scale != 0.f ? 2 : 1;
  }
  static std::string signature(const ConvParams& p, int res, bool int8) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s:n%d:h%dw%dc%d:k%d:r%ds%d:st%dx%d:p%dx%d:d%dx%d:o%d:res%d",
                  int8 ? "conv_i8" : "conv_f16", p.N, p.H, p.W, p.C, p.K, p.R, p.S, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w,
                  static_cast<int>(p.out_format), res);
    if (p.in_format != InFormat::kNhwc) {  // a stem reading the image: its layout and dtype
      return std::string(buf) + ":image" + (p.in_nchw ? "_nchw" : "_nhwc") + std::to_string(p.in_channels) +
             (p.in_format == InFormat::kImageF16 ? "_f16" : p.in_format == InFormat::kImageF32 ? "_f32" : "_i8");
    }
    return buf;
  }
  // A layer's key among the kernel choices: its shape, output and residual, and a second output (ConvArgs::y2), which
  // the register epilogues write with code of their own: YOLOv5s' /model.6/cv3 (a second int8 output into /model.12's
  // concatenation at its scale) took the TMA kernel timed for /model.6/cv1 of the same shape, which quantizes the
  // second output by exact division, several times slower than cv1. Plans written before the second output was part
  // of the key find their choice under the key without it (legacy_signature).
  static std::string signature(const ConvLayer& c) {
    const std::string s = legacy_signature(c);
    return c.out2 < 0 ? s : s + (c.p.out2_format == Out2Format::kI8 ? ":y2i8" : ":y2f16");
  }
  static std::string legacy_signature(const ConvLayer& c) { return signature(c.p, residual_kind(c), c.int8); }
  // Candidates: every tile configuration, split-K over 2..8 ranges for layers too small to fill the GPU, and
  // cuDNN's algorithms for fp16 layers (BuildOptions::tactic_sources picks the sources).
  struct Candidate {
    int config, splits;
    int algo = -1;         // cuDNN's algorithm, or -1 for qdeploy's kernel
    bool cluster = false;  // split-K inside a thread-block cluster (ConvParams::split_in_cluster)
  };
  static std::string candidate_name(const Candidate& c) {
    if (c.algo >= 0) return "cudnn_" + CudnnConv::algorithm_name(c.algo);
    if (c.splits == 1) return conv_igemm_config_name(c.config);
    return conv_igemm_config_name(c.config) + (c.cluster ? "/cluster" : "/splitk") + std::to_string(c.splits);
  }
  // A candidate that may fail to launch on this GPU (a cuDNN algorithm, a cluster too large for its SMs) is left out;
  // qdeploy's other kernels must run.
  static bool optional(const Candidate& c) { return c.algo >= 0 || c.cluster; }
  bool uses_source(const char* source) const {
    const auto& v = in_.opt->tactic_sources;
    return v.empty() || std::find(v.begin(), v.end(), source) != v.end();
  }
  // The layer's parameters as launched, with the input's real pixel stride (a Concat's channel slice is wider than
  // its channels): what cuDNN and the special-purpose configurations (conv_igemm_config_fits) need to know.
  ConvParams launch_params(const ConvLayer& c) const {
    ConvParams q = c.p;
    q.in_ld = inst_->tensors[c.in].ld;
    return q;
  }
  // INT8 layers take the INT8 configurations; their split-K partial sums are int32, so the result stays exact.
  // cuDNN's algorithms compute fp16 layers only.
  std::vector<Candidate> candidates(const ConvLayer& c) const {
    std::vector<Candidate> out;
    if (!c.int8 && c.p.in_format == InFormat::kNhwc && uses_source("cudnn")) {
      for (int algo : CudnnConv::algorithms(launch_params(c))) out.push_back({0, 1, algo});
    }
    if (!out.empty() && !uses_source("qdeploy")) return out;
    for (const Candidate& own : own_candidates(c)) out.push_back(own);
    return out;
  }
  // qdeploy's own: the tile configurations of the layer's precision, with split-K where it can pay off, through a
  // workspace and a second kernel or inside a cluster (KernelPolicy::cluster_split off leaves the latter out, and the
  // policy's other switches their kernel families). A bit-exact SiLU layer (--int8-mode bitexact) takes only those
  // whose epilogue has the exact path: staged tiles and the workspace's split-K (the register epilogue is within 1
  // LSB; timing under compute-sanitizer picked it and broke bit-exactness).
  std::vector<Candidate> own_candidates(const ConvLayer& c) const {
    const ConvParams p = launch_params(c);
    std::vector<Candidate> out;
    const int64_t mk = static_cast<int64_t>(p.N) * p.OH * p.OW * p.K;
    const int ktiles = p.Kp / (c.int8 ? 64 : 32);  // the K loop's steps: 64 int8 or 32 fp16 elements
    const qdeploy::KernelPolicy& policy = in_.opt->kernel_policy;
    const bool no_cluster_split = !policy.cluster_split;
    for (int k = 0; k < conv_igemm_configs(); ++k) {
      if (conv_igemm_config_int8(k) != c.int8) continue;
      for (int splits : {1, 2, 4, 8}) {
        if (splits > 1 && (mk > (int64_t{1} << 21) || ktiles < 4 * splits)) continue;
        for (bool cluster : {false, true}) {
          if (cluster && no_cluster_split) continue;
          ConvParams q = p;
          q.splits = splits;
          q.split_in_cluster = cluster;
          if ((cluster && splits == 1) || !conv_igemm_config_fits(k, q) || !conv_igemm_config_allowed(k, q, policy)) {
            continue;
          }
          const bool own_epilogue = splits == 1 || cluster;  // else conv_splitk_epilogue's, which is exact
          if (q.exact_silu && q.act == Act::kSilu && own_epilogue && !conv_igemm_config_staged(k)) continue;
          out.push_back({k, splits, -1, cluster});
        }
      }
    }
    return out;
  }
  // Sets the layer up to run `cand` (`warm`: a cuDNN algorithm gets its first call now; timing makes its own).
  Status use(ConvLayer* c, const Candidate& cand, bool warm = true) const {
    c->cudnn.reset();
    c->config = cand.config;
    c->p.splits = cand.splits;
    c->p.split_in_cluster = cand.cluster;
    c->info.kernel = candidate_name(cand);
    if (cand.algo < 0) return Status::ok();
    PackedConv& w = *c->w;
    const size_t row = static_cast<size_t>(w.R) * w.S * w.C;
    if (w.Kp != static_cast<int>(row) && !w.dense.get()) {  // drop the row padding
      QD_RETURN_IF_ERROR(w.dense.alloc(row * w.K * sizeof(__half)));
      QD_CUDA_TRY(cudaMemcpy2D(w.dense.get(), row * sizeof(__half), w.w.get(), w.Kp * sizeof(__half),
                               row * sizeof(__half), w.K, cudaMemcpyDeviceToDevice));
    }
    c->cudnn =
        QD_TRY(CudnnConv::create(launch_params(*c), cand.algo, w.dense.get() ? w.dense.get() : w.w.get(), warm));
    return Status::ok();
  }
  // Applies a remembered choice; false when it names no candidate this build may use.
  bool apply(ConvLayer* c, const std::string& name) const {
    if (name.rfind("cudnn_", 0) == 0) {
      if (c->int8 || !uses_source("cudnn")) return false;
      for (int algo = 0; algo < 8; ++algo) {
        const Candidate cand{0, 1, algo};
        if (candidate_name(cand) == name) return use(c, cand).is_ok();
      }
      return false;
    }
    // Without qdeploy among the sources, an fp16 layer takes qdeploy's kernels only where cuDNN has none.
    const bool own = c->int8 || uses_source("qdeploy");
    for (const Candidate& cand : own ? own_candidates(*c) : candidates(*c)) {
      if (cand.algo < 0 && candidate_name(cand) == name) return use(c, cand).is_ok();
    }
    return false;
  }

  // A conv layer as plan/tactics.h's selection sees it: its candidates by name.
  class ConvTactics final : public TacticLayer {
   public:
    ConvTactics(const Lowerer& lw, ConvLayer* c) : lw_(lw), c_(c) {}
    std::string signature() const override { return Lowerer::signature(*c_); }
    std::string legacy_signature() const override { return c_->out2 >= 0 ? Lowerer::legacy_signature(*c_) : ""; }
    int batch() const override { return c_->p.N; }
    std::vector<Tactic> tactics() const override {
      std::vector<Tactic> out;
      for (const Candidate& c : candidates()) out.push_back({candidate_name(c), optional(c), c.algo < 0});
      return out;
    }
    bool apply(const std::string& name) override { return lw_.apply(c_, name); }
    // The candidate of that name, set up for timing (a cuDNN algorithm gets its first call from the timer).
    Expected<Candidate> prepare(const std::string& name) const {
      for (const Candidate& c : candidates()) {
        if (candidate_name(c) != name) continue;
        QD_RETURN_IF_ERROR(lw_.use(c_, c, false));
        return c;
      }
      return internal("no candidate " + name + " for conv '" + c_->info.name + "'");
    }
    ConvLayer* layer() const { return c_; }

   private:
    // Asked once per layer: cuDNN's list comes from a query.
    const std::vector<Candidate>& candidates() const {
      if (!listed_) cands_ = lw_.candidates(*c_), listed_ = true;
      return cands_;
    }
    const Lowerer& lw_;
    ConvLayer* c_;
    mutable std::vector<Candidate> cands_;
    mutable bool listed_ = false;
  };

  // Times conv candidates on scratch memory laid out like a real run (contents do not matter for speed), made on
  // first use.
  class ConvTimer final : public TacticTimer {
   public:
    explicit ConvTimer(const Lowerer& lw) : lw_(lw) {}
    ~ConvTimer() override {
      if (!s_) return;
      cudaEventDestroy(e0_);
      cudaEventDestroy(e1_);
      cudaStreamSynchronize(s_);
      cudaStreamDestroy(s_);
    }
    Expected<float> time(TacticLayer& layer, const Tactic& t) override {
      QD_RETURN_IF_ERROR(ready());
      auto& l = static_cast<ConvTactics&>(layer);
      ConvLayer* c = l.layer();
      QD_RETURN_IF_ERROR(l.prepare(t.name).status());
      if (c->workspace_bytes() > workspace_.size()) QD_RETURN_IF_ERROR(workspace_.alloc(c->workspace_bytes()));
      c->workspace = static_cast<float*>(workspace_.get());
      std::vector<float> ms;
      Status st;
      for (int rep = 0; rep < 7 && st.is_ok(); ++rep) {
        cudaEventRecord(e0_, s_);
        for (int j = 0; j < 3 && st.is_ok(); ++j) st = c->enqueue(*lw_.inst_, *ptrs_, s_);
        cudaEventRecord(e1_, s_);
        cudaEventSynchronize(e1_);
        float x = 0;
        cudaEventElapsedTime(&x, e0_, e1_);
        if (rep > 0) ms.push_back(x);  // the first round warms up
      }
      c->workspace = nullptr;
      if (!st.is_ok()) {  // leave the stream usable for the next candidate
        cudaStreamSynchronize(s_);
        cudaGetLastError();
        return st;
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    }
    Status refine(const std::map<std::string, std::vector<std::string>>& close, TacticChoices* choices) override {
      QD_RETURN_IF_ERROR(ready());
      return lw_.refine_in_graph(close, *ptrs_, &workspace_, s_, e0_, e1_, choices);
    }

   private:
    Status ready() {
      if (s_) return Status::ok();
      const Instance& inst = *lw_.inst_;
      QD_RETURN_IF_ERROR(arena_.alloc(std::max<size_t>(inst.arena_bytes, 256)));
      for (size_t k = 0; k < inst.slot_names.size(); ++k) {
        io_.push_back(std::make_unique<DeviceBuffer>());
        QD_RETURN_IF_ERROR(io_.back()->alloc(std::max<size_t>(inst.slot_bytes(k), 256)));
        io_ptrs_.push_back(io_.back()->get());
      }
      QD_CUDA_TRY(cudaMemset(arena_.get(), 0, arena_.size()));
      ptrs_.emplace(Pointers{static_cast<char*>(arena_.get()), &io_ptrs_, &inst.buffer_offsets});
      QD_CUDA_TRY(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
      cudaEventCreate(&e0_);
      cudaEventCreate(&e1_);
      return Status::ok();
    }
    const Lowerer& lw_;
    DeviceBuffer arena_, workspace_;
    std::vector<std::unique_ptr<DeviceBuffer>> io_;
    std::vector<void*> io_ptrs_;
    std::optional<Pointers> ptrs_;
    cudaStream_t s_ = nullptr;
    cudaEvent_t e0_ = nullptr, e1_ = nullptr;
  };

  // Each conv's kernel by plan/tactics.h's policy: recorded, timed here, the nearest batch's or the first candidate.
  Status choose_kernels() {
    const PdlOff pdl(!in_.opt->kernel_policy.pdl);  // timed as they will run
    std::vector<ConvTactics> convs;
    convs.reserve(conv_layers_.size());
    std::vector<TacticLayer*> layers;
    for (int li : conv_layers_) {
      convs.emplace_back(*this, static_cast<ConvLayer*>(inst_->layers[li].get()));
      layers.push_back(&convs.back());
    }
    TacticPolicy policy;
    policy.frozen = in_.frozen;
    policy.tune = in_.tune;
    policy.profile = !in_.opt->max_shapes.empty();
    ConvTimer timer(*this);
    QD_RETURN_IF_ERROR(select_tactics(layers, in_.choices, policy, &timer).status());
    // A conv workspace per stream, after the planned activations (the layers of a stream run one at a time).
    size_t ws[2] = {0, 0};
    for (int li : conv_layers_) {
      const auto* c = static_cast<ConvLayer*>(inst_->layers[li].get());
      ws[c->side] = std::max(ws[c->side], c->workspace_bytes());
      inst_->uses_cudnn = inst_->uses_cudnn || c->cudnn;
    }
    inst_->splitk_offset = (inst_->arena_bytes + 255) / 256 * 256;
    inst_->side_splitk_offset = (inst_->splitk_offset + ws[0] + 255) / 256 * 256;
    if (ws[0] || ws[1]) inst_->arena_bytes = inst_->side_splitk_offset + ws[1];
    return Status::ok();
  }

  // The picks made one layer at a time (each timed alone, its weights and input hot in L2 from the launch before)
  // checked in the network as it runs: where other configurations of a layer timed close to the pick alone
  // (plan/tactics.h's near_ties), the whole network runs as a CUDA graph with each in turn, launched alternately with
  // the graph of the picks so far (clock drift stays out of the difference), and the faster kept by at least 0.5% of
  // the medians (0.2% at batch 1). Alone, tile configurations often time within a few percent of each other while in
  // the network one is 5-20% slower, so builds of the same code picked differently and ran up to 13% apart. Not
  // where a cuDNN kernel was picked (its handles must exist before a capture) nor with KernelPolicy::graph_refine off
  // (A/B runs).
  static float refine_keep(int batch) { return batch == 1 ? 0.998f : 0.995f; }
  Status refine_in_graph(const std::map<std::string, std::vector<std::string>>& close, const Pointers& ptrs,
                         DeviceBuffer* workspace, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1,
                         TacticChoices* choices) const {
    if (!in_.opt->kernel_policy.graph_refine) return Status::ok();
    std::map<std::string, std::vector<ConvLayer*>> by_sig;  // the layers of each signature with near ties
    std::vector<ConvLayer*> convs;
    for (int li : conv_layers_) {
      auto* c = static_cast<ConvLayer*>(inst_->layers[li].get());
      if (c->cudnn) return Status::ok();
      convs.push_back(c);
      const std::string sig = signature(*c);
      if (const auto it = close.find(sig); it != close.end() && it->second.size() > 1) by_sig[sig].push_back(c);
    }
    if (by_sig.empty()) return Status::ok();
    const auto set_all = [&](const std::vector<ConvLayer*>& layers, const std::string& name) -> Status {
      for (ConvLayer* c : layers) {
        if (!apply(c, name)) return internal("kernel " + name + " cannot be set up for conv '" + c->info.name + "'");
      }
      return Status::ok();
    };
    // One scratch workspace for every split-K layer (they run one after another), as large as any candidate needs.
    size_t ws = 0;
    for (ConvLayer* c : convs) ws = std::max(ws, c->workspace_bytes());
    for (const auto& [sig, layers] : by_sig) {
      for (const Candidate& cand : candidates(*layers.front())) {
        const auto& names = close.at(sig);
        if (std::find(names.begin(), names.end(), candidate_name(cand)) == names.end()) continue;
        ConvParams q = layers.front()->p;
        q.splits = cand.splits;
        q.split_in_cluster = cand.cluster;
        ws = std::max(ws, conv_igemm_workspace(q));
      }
    }
    if (ws > workspace->size()) QD_RETURN_IF_ERROR(workspace->alloc(ws));
    for (ConvLayer* c : convs) c->workspace = static_cast<float*>(workspace->get());
    // The whole network with the layers' current kernels, as an instantiated CUDA graph.
    const auto capture = [&](cudaGraphExec_t* exec) -> Status {
      cudaGraph_t graph = nullptr;
      QD_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      Status st;
      for (const auto& l : inst_->layers) {
        st = l->enqueue(*inst_, ptrs, s);
        if (!st.is_ok()) break;
      }
      const cudaError_t end = cudaStreamEndCapture(s, &graph);
      QD_RETURN_IF_ERROR(st);
      QD_CUDA_TRY(end);
      const cudaError_t made = cudaGraphInstantiate(exec, graph, 0);
      cudaGraphDestroy(graph);
      QD_CUDA_TRY(made);
      return Status::ok();
    };
    // The medians of the two graphs' GPU times, launched alternately 30 times each after 4 rounds.
    const auto medians = [&](cudaGraphExec_t a, cudaGraphExec_t b, float* ma, float* mb) -> Status {
      std::vector<float> ta, tb;
      for (int i = 0; i < 34; ++i) {
        for (int side = 0; side < 2; ++side) {
          QD_CUDA_TRY(cudaEventRecord(e0, s));
          QD_CUDA_TRY(cudaGraphLaunch(side ? b : a, s));
          QD_CUDA_TRY(cudaEventRecord(e1, s));
          QD_CUDA_TRY(cudaEventSynchronize(e1));
          float x = 0;
          QD_CUDA_TRY(cudaEventElapsedTime(&x, e0, e1));
          if (i >= 4) (side ? tb : ta).push_back(x);
        }
      }
      std::sort(ta.begin(), ta.end());
      std::sort(tb.begin(), tb.end());
      *ma = ta[ta.size() / 2];
      *mb = tb[tb.size() / 2];
      return Status::ok();
    };
    cudaGraphExec_t picked = nullptr;  // the graph of the picks so far
    Status st = capture(&picked);
    for (auto it = by_sig.begin(); it != by_sig.end() && st.is_ok(); ++it) {
      const std::vector<std::string>& cands = close.at(it->first);
      std::string kept = cands.front();
      for (size_t k = 1; k < cands.size() && st.is_ok(); ++k) {
        st = set_all(it->second, cands[k]);
        cudaGraphExec_t other = nullptr;
        float mp = 0.f, mo = 0.f;
        if (st.is_ok()) st = capture(&other);
        if (st.is_ok()) st = medians(picked, other, &mp, &mo);
        if (st.is_ok() && mo < mp * refine_keep(it->second.front()->p.N)) {
          kept = cands[k];
          (*choices)[it->first] = kept;
          std::swap(picked, other);
        }
        if (other) cudaGraphExecDestroy(other);
        if (st.is_ok()) st = set_all(it->second, kept);
      }
    }
    if (picked) cudaGraphExecDestroy(picked);
    for (ConvLayer* c : convs) c->workspace = nullptr;
    if (!st.is_ok()) {  // a network that cannot be captured or run here keeps the picks made alone
      cudaStreamSynchronize(s);
      cudaGetLastError();
      for (const auto& [sig, layers] : by_sig) {
        (*choices)[sig] = close.at(sig).front();
        QD_RETURN_IF_ERROR(set_all(layers, close.at(sig).front()));
      }
    }
    return Status::ok();
  }

  Graph g_;
  const LowerInput& in_;
  std::shared_ptr<Instance> inst_;
  bool fast_ = false;
  std::vector<int> gen_, fast_t_, uses_;
  std::vector<int> io_in_;  // per value: the slot tensor of an input given in a format other than the ONNX form
  // Concat nodes lowered as one SliceConcatLayer (plan_slice_concats).
  struct SliceConcatPlan {
    int src = -1;                          // the value every input slices
    std::vector<SliceSegment> seg;         // columns (the programs are filled when lowered)
    std::vector<int> slices;               // per segment: its Slice node
    std::vector<std::vector<int>> chains;  // per segment: the elementwise nodes after the Slice, in order
    int reshape = -1, target = -1;         // the Reshape and the axis-1 Concat the result lands in, or -1
    int binding = -1;                      // the output slot written directly (an fp16 binding), or -1
  };
  std::map<int, SliceConcatPlan> slice_concat_;
  std::map<int, std::map<int, InPlaceSlice>> plugin_slices_;  // plugin node -> its inputs read in place
  std::set<int> slice_sources_;                    // values read only by the Slices of one slice_concat, whose
                                                   // transposed tile fits its kernel (slice_concat_transposed_fits)
  std::set<int> half_sources_;                     // those whose slice_concat writes an fp16 binding
  std::map<int, int> bound_outputs_;               // graph output -> the tensor in its slot, written by a layer
  std::map<int, std::pair<int, int>> transposed_;  // such a value held transposed by a head conv: tensor, H*W
  std::vector<std::vector<int>> consumers_;
  std::vector<bool> is_output_, done_;
  std::vector<size_t> buffer_bytes_;
  std::vector<int> buffer_users_;  // tensors on each buffer (views share their source's)
  std::map<int, int> producer_;  // tensor -> layer writing it
  std::set<std::string> int8_convs_;  // INT8 plans: the convs lower_int8 puts in INT8
  std::vector<float> qscale_;         // per value: the scale it is quantized with (0: not quantized)
  std::vector<int> q8_;               // per value: its int8 NHWC tensor, once quantized (s2d layout for s2d_ values)
  std::vector<bool> s2d_;             // per value: a graph input the stem convs read as its space-to-depth
  std::vector<int> s2d_t_;            // its fp16 space-to-depth tensor, once made
  std::map<int, bool> aliased_;
  std::set<int> int8_resizes_;  // Resize nodes try_int8_concat moved to int8 (they no longer read the fp16 tensor)
  std::vector<std::vector<int>> int8_concat_slices_;  // try_int8_concat's: each Concat's input tensors, in order
  std::vector<int> conv_layers_;
};

}  // namespace

Expected<std::shared_ptr<Instance>> lower(const LowerInput& in) {
  Graph g = *in.graph;
  PrepareOptions p;
  p.input_shapes = in.shapes;
  QD_RETURN_IF_ERROR(prepare_graph(g, p));
  // Parallel linears read only by plugins (DCNv4's value and offsets) become one GEMM whose slices the plugin reads in
  // place; a graph without plugin ops is left as it is.
  QD_RETURN_IF_ERROR(fuse_parallel_linear(g).status());
  const Status apart = check_batch_split(g);
  Int8Choice int8;
  if (in.opt->precision == Precision::kInt8) int8 = QD_TRY(choose_int8(g, in));
  // INT8 convs keep their BatchNormalization apart: the reference normalizes after the quantized conv.
  QD_RETURN_IF_ERROR(fuse_graph(g, int8.convs).status());
  Lowerer l(std::move(g), in, std::move(int8));
  auto inst = QD_TRY(l.run());
  inst->split_refusal = apart.is_ok() ? "" : apart.message();
  return inst;
}

}  // namespace qd::cuda
