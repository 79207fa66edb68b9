// MaxPool, nearest Resize and channel Concat on NHWC tensors: pooling chains (SPPF) as one layer, Concats in place
// (producers write their slices), and Concats that feed INT8 convs built in int8.
#include <algorithm>

#include "backends/cuda/lowerer.h"
#include "ops/fused.h"
#include "ops/window.h"

namespace qd::cuda {

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
Status Lowerer::try_int8_concat(int i, bool* lowered) {
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
      const OpType op = g_.nodes[c].op;
      const bool pool = (op == OpType::MaxPool || op == OpType::MaxPoolChain) &&
                        input_index(g_.nodes[c].outputs[0]) > static_cast<int>(k);
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
      const int pooled = pooled_value(v);
      if (pooled < 0) return Status::ok();
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

// The value MaxPool (or a MaxPoolChain's step) v pools, or -1 when no pool makes v.
int Lowerer::pooled_value(int v) const {
  const int p = g_.values[v].producer;
  if (p < 0) return -1;
  const Node& n = g_.nodes[p];
  if (n.op == OpType::MaxPool) return n.outputs[0] == v ? n.inputs[0] : -1;
  if (n.op != OpType::MaxPoolChain) return -1;
  const auto k = std::find(n.outputs.begin(), n.outputs.end(), v) - n.outputs.begin();
  return k == 0 ? n.inputs[0] : n.outputs[static_cast<size_t>(k) - 1];
}

// MaxPool / nearest Resize / Concat on NHWC inputs.
Status Lowerer::try_nhwc_movement(int i, bool* lowered) {
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

// A MaxPoolChain (passes/fuse_pool_chain.cpp; lower() lets it make one only where maxpool_chain_nhwc fits) as one
// layer with an output per pool, on fp16 tensors; in INT8 plans try_int8_concat moves it to the int8 slices of the
// Concat that takes the pools.
Status Lowerer::lower_pool_chain(int i) {
  const Node& n = g_.nodes[i];
  const Shape& is = g_.values[n.inputs[0]].shape;
  const std::vector<int64_t> k = QD_TRY(ops::same_size_pool_window(n, is));
  if (k.empty() || n.outputs.size() > kMaxPoolChain) return internal("MaxPoolChain '" + n.name + "' cannot be lowered");
  auto l = std::make_unique<MaxPoolChainLayer>();
  l->N = static_cast<int>(is[0]);
  l->C = static_cast<int>(is[1]);
  l->H = static_cast<int>(is[2]);
  l->W = static_cast<int>(is[3]);
  l->kh = static_cast<int>(k[0]);
  l->kw = static_cast<int>(k[1]);
  l->ins = {QD_TRY(ensure_fast(n.inputs[0]))};
  for (int y : n.outputs) l->outs.push_back(fast_t_[y] = nhwc_tensor(g_.values[y].shape));
  std::string names = n.name;
  for (const std::string& f : ops::fused_names(n)) names += "+" + f;
  l->info = {names, "MaxPool_nhwc", "maxpool_chain_nhwc", "fp16", fmt_of(inst_->tensors[l->ins[0]]),
             fmt_of(inst_->tensors[l->outs[0]]), 0};
  add_layer(std::move(l));
  return Status::ok();
}

// Producers of a Concat's inputs write into the output's channel slice when nothing else needs the input whole.
void Lowerer::concat_in_place() {
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

}  // namespace qd::cuda
