// The CUDA lowering's entry (lower()) and its core: the walk over the nodes, tensors and reformats between layouts,
// generic layers, and after every node the stream schedule and the activation memory plan. lowerer.h lists the
// other files of the class.
#include <algorithm>
#include <climits>

#include "backends/cuda/lowerer.h"
#include "backends/cuda/kernels/generic.h"
#include "ir/cost.h"
#include "ops/fused.h"
#include "ops/op.h"
#include "ops/plugin_registry.h"
#include "passes/passes.h"
#include "plan/memory_plan.h"
#include "plan/stream_schedule.h"
#include "quant/precision_plan.h"

namespace qd::cuda {

std::string layer_name(const Node& n) {
  std::string s = n.name;
  if (n.op != OpType::FusedConv) return s;
  if (auto f = ops::fused_conv_attrs(n)) {
    for (const std::string& x : f->fused) s += "+" + x;
  }
  return s;
}

Expected<Int8Choice> choose_int8(const Graph& g, const LowerInput& in) {
  Int8Choice c;
  const PrecisionPlan plan = QD_TRY(compute_precision(g, *in.int8, Precision::kFp16));
  if (in.int8_convs && *in.int8_convs) {
    c.convs = **in.int8_convs;
  } else {
    std::set<std::string> plan_int8;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (plan.is_int8(i)) plan_int8.insert(g.nodes[i].name);
    }
    c.convs = cuda_int8_nodes(g, plan_int8);
    if (in.int8_convs) *in.int8_convs = c.convs;
  }
  c.scale.assign(g.values.size(), 0.f);
  for (const Node& n : g.nodes) {
    if (!c.convs.count(n.name)) continue;
    auto q = plan.tensors.find(n.inputs[0]);
    if (q == plan.tensors.end()) return internal("INT8 node '" + n.name + "' has no input scale in the precision plan");
    c.scale[n.inputs[0]] = q->second.scale;
  }
  return c;
}

Expected<std::shared_ptr<Instance>> Lowerer::run() {
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
  layout_ = cuda_layouts(g_, in_.opt->precision, int8_convs_);
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
  plan_row_norms();
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

TensorRef Lowerer::generic_ref(int v) const {
  TensorRef r;
  r.dtype = g_.values[v].dtype;
  r.shape = g_.values[v].shape;
  r.bytes = static_cast<size_t>(numel(r.shape)) * dtype_size(r.dtype);
  return r;
}

// A binding's tensor in its format (a float value given as fp16 or int8, NCHW or dense NHWC).
TensorRef Lowerer::binding_ref(int v, const TensorDesc& f) const {
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
Expected<int> Lowerer::add_convert(int src, int dst, const std::string& suffix) {
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

int Lowerer::add_tensor(TensorRef r) {
  if (!r.constant && r.slot < 0) {
    r.buffer = static_cast<int>(buffer_bytes_.size());
    buffer_bytes_.push_back(r.bytes);
    buffer_users_.push_back(1);
  }
  inst_->tensors.push_back(std::move(r));
  return static_cast<int>(inst_->tensors.size() - 1);
}

// An NHWC tensor, fp16 or int8, its channels padded to 16 bytes' worth.
int Lowerer::nhwc_tensor(const Shape& shape, DType dtype) {
  TensorRef r;
  r.dtype = dtype;
  r.shape = shape;
  r.nhwc = true;
  r.ld = round_up(static_cast<int>(shape[1]), 16 / static_cast<int>(dtype_size(dtype)));
  r.bytes = static_cast<size_t>(shape[0] * shape[2] * shape[3]) * r.ld * dtype_size(dtype);
  return add_tensor(r);
}

void Lowerer::add_layer(std::unique_ptr<Layer> l) {
  for (int t : l->outs) {
    if (t >= 0) producer_[t] = static_cast<int>(inst_->layers.size());
  }
  inst_->layers.push_back(std::move(l));
}

// The value in NCHW, its ONNX dtype (reformatting from NHWC when only that exists).
Expected<int> Lowerer::ensure_generic(int v) {
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
  if (fast_t_[v] < 0 && rows_f16_.count(v)) return rows_to_generic(v);
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
Expected<int> Lowerer::ensure_fast(int v) {
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

// Node c is an INT8 conv (or linear layer) reading v as its data input (and nowhere else): it takes v's int8 copy.
bool Lowerer::int8_conv_input(int c, int v) const {
  const Node& n = g_.nodes[c];
  return (is_conv(n.op) || n.op == OpType::Gemm || n.op == OpType::MatMul) && int8_convs_.count(n.name) &&
         n.inputs[0] == v &&
         std::count(n.inputs.begin(), n.inputs.end(), v) == 1;
}

// Quantizes v once, when its first consumer is lowered: the int8 NHWC copy for INT8 convs, and its dequantized
// value for every other consumer (the reference's rule), which then replaces v.
Status Lowerer::resolve(int v) {
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
  // Linear layers (choose_int8: never beside an INT8 conv) read v as its rows [..., C], N of them, as N pixels.
  bool rows = false;
  for (int c : consumers_[v]) rows = rows || (int8_conv_input(c, v) && !is_conv(g_.nodes[c].op));
  if ((!rows && vs.size() != 4) || vs.empty() || g_.values[v].dtype != DType::kFloat32) {
    return unsupported("INT8 input '" + g_.values[v].name + "' is not a 4-d (Conv) or a linear layer's float tensor");
  }
  const Shape sh = rows ? Shape{numel(vs) / vs.back(), vs.back(), 1, 1} : vs;
  auto l = std::make_unique<QuantizeLayer>();
  l->scale = qscale_[v];
  q8_[v] = nhwc_tensor(sh, DType::kInt8);
  // Only INT8 convs read v (e.g. the network input feeding the stem): no dequantized copy.
  bool others = is_output_[v];
  for (int c : consumers_[v]) others = others || !int8_conv_input(c, v);
  int src, dq = -1;
  if (rows) {
    // Rows are v's ONNX layout: read and write the generic form (any fast copy held the unquantized value).
    src = QD_TRY(ensure_generic(v));
    if (others) {
      dq = add_tensor(generic_ref(v));
      gen_[v] = dq;
      fast_t_[v] = -1;
    }
  } else if (!others) {
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

Status Lowerer::lower_node(int i) {
  const Node& n = g_.nodes[i];
  if (slice_concat_.count(i)) return lower_slice_concat(i);
  if (is_plugin_op(n.op)) return lower_plugin(i);
  if (try_row_view(i)) return Status::ok();
  if (fast_ && QD_TRY(try_nhwc_transpose(i))) return Status::ok();
  for (int v : n.inputs) QD_RETURN_IF_ERROR(resolve(v));
  if (row_norms_.count(i)) return lower_row_norm(i);
  if (layout_.fast(i)) {
    if (n.op == OpType::Conv || n.op == OpType::FusedConv) {
      bool lowered = false;
      QD_RETURN_IF_ERROR(try_fused_conv(i, &lowered));
      if (lowered) return Status::ok();
    } else if (n.op == OpType::MaxPoolChain) {
      return lower_pool_chain(i);
    } else if ((n.op == OpType::Gemm || n.op == OpType::MatMul) && int8_convs_.count(n.name)) {
      return lower_linear(i);
    } else if (n.op == OpType::Gemm || n.op == OpType::MatMul) {
      const auto lin = linear_operands(g_, n);
      if (lin && linear_fp16(*lin)) return lower_linear(i);
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

// Reshape-like ops change only the shape: the output is a view of the input's buffer, no layer runs.
bool Lowerer::try_view(const Node& n) {
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

Status Lowerer::lower_generic(int i) {
  const Node& n = g_.nodes[i];
  if (try_view(n)) return Status::ok();
  // A generic kernel runs the node in its ONNX dtypes.
  const Support support = CudaTarget().supports(g_, n, uniform_formats(g_, n, TensorPrecision::kFp32));
  if (!support.yes) return unsupported(support.reason);
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

// After layers were removed: the producers' and the timed convs' layer indices.
void Lowerer::reindex_layers() {
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
void Lowerer::drop_unread_out2() {
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
void Lowerer::schedule_streams() {
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
Status Lowerer::plan() {
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
void Lowerer::apply_epilogue_policy() {
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
  static_assert(kCudaMaxPoolChain == kMaxPoolChain, "cuda_fusion_rules states the chain kernel's limits");
  static_assert(kCudaMaxSliceSegments == kMaxSliceSegments && kCudaMaxEwSteps == kMaxEwSteps &&
                    kCudaMaxEwOperands == kMaxEwOperands,
                "cuda_fusion_rules states the decode kernel's limits");
  const FusionRules rules = cuda_fusion_rules(in.opt->precision);
  // INT8 convs keep their BatchNormalization apart: the reference normalizes after the quantized conv.
  QD_RETURN_IF_ERROR(fuse_graph(g, int8.convs, rules).status());
  Lowerer l(std::move(g), in, std::move(int8));
  auto inst = QD_TRY(l.run());
  inst->split_refusal = apart.is_ok() ? "" : apart.message();
  return inst;
}

}  // namespace qd::cuda
