// Convs and linear layers (Gemm, MatMul) as tensor-core layers: the stem's space-to-depth, the fused epilogue
// (activation, residual, INT8 output with a second output), the detection head's transposed write, weight packing;
// and, once every layer exists, sibling convs reading one tensor merged into one.
#include <algorithm>

#include "backends/cuda/lowerer.h"
#include "backends/cuda/weight_pack.h"
#include "ir/cost.h"
#include "ops/fused.h"
#include "ops/op.h"

namespace qd::cuda {

// Stem convs (a graph input with at most 4 channels, even H and W, read only by stride-2 convs with even kernels and
// pads) run as stride-1 convs with half the kernel over the input's space-to-depth [N, 4C, H/2, W/2]: 4C channels
// pad to 16 instead of C to 8 (fp16) or 16 (int8), so the conv does 2x (fp16) or 4x (int8) less padded work and the
// reformat or quantize pass writes a quarter of the pixels. Same products, summed in another order.
Status Lowerer::plan_s2d() {
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

// The space-to-depth copy of graph input v: fp16 (int8 false) or int8 with v's scale.
Expected<int> Lowerer::ensure_s2d(int v, bool int8) {
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
Expected<int> Lowerer::image_stem_input(int v, const ops::ConvGeom& geo, bool int8) {
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

// The tensor a conv's epilogue adds. An INT8 tensor: its int8 copy, read as q * s in fp32 like the reference (its fp16
// copy would round it); INT8 convs only, the fp16 kernels' epilogue reads fp16 residuals (conv_igemm_kernels.cuh).
Status Lowerer::bind_residual(ConvLayer& l, int v) {
  QD_RETURN_IF_ERROR(resolve(v));
  if (l.int8 && !q8_.empty() && q8_[v] >= 0 && !s2d_[v]) {
    l.res = q8_[v];
    l.p.res_scale = qscale_[v];
  } else {
    l.res = QD_TRY(ensure_fast(v));
  }
  return Status::ok();
}

// A Conv or FusedConv (BatchNormalization folded, activation and residual fused by the passes) as one
// tensor-core layer.
Status Lowerer::try_fused_conv(int i, bool* lowered) {
  const Node& n = g_.nodes[i];
  if (n.inputs.size() < 2 || !is_float4d(n.inputs[0]) || !g_.is_constant(n.inputs[1])) return Status::ok();
  const Tensor& w = *g_.constant(n.inputs[1]);
  if (w.dtype() != DType::kFloat32 || w.shape().size() != 4) return Status::ok();
  const Tensor* bias = n.inputs.size() > 2 && n.inputs[2] >= 0 ? g_.constant(n.inputs[2]) : nullptr;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !bias) return Status::ok();
  Shape out_shape;
  const ops::ConvGeom geo = QD_TRY(ops::conv_geom(n, g_.values[n.inputs[0]].shape, w.shape(), &out_shape));
  // Grouped convs run conv_grouped_i8 / conv_grouped_f16 (CUDA cores) with the fused epilogue.

  const bool int8 = int8_convs_.count(n.name) != 0;
  const ConvEpilogue epi = QD_TRY(conv_epilogue(n));
  std::string names = layer_name(n);
  int cur = n.outputs[0];
  Act act = epi.act;
  const float aa = epi.a, ab = epi.b;
  const int res_value = epi.residual ? n.inputs[3] : -1;
  // A detection head: Conv -> Reshape [N, A, G, OH, OW] -> Transpose (0, 1, 3, 4, 2) [-> Sigmoid] read only by
  // one SliceConcat. The conv writes its NCHW result (after the Sigmoid), and the SliceConcat's layer reads it
  // transposed; the Reshape, Transpose and Sigmoid run no layers.
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
  if (res_value >= 0) QD_RETURN_IF_ERROR(bind_residual(*l, res_value));
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
  // NHWC fp16 output when the layout plan puts a consumer on the fast path, or a consumer reads it as fp16 rows
  // (lower_rows.cpp); NCHW fp32 straight from the epilogue otherwise.
  bool fast_consumer = fast_reader(cur);
  for (int c : consumers_[cur]) {
    fast_consumer |= fast_ && nhwc_transpose(c, true) && f16_rows_only(g_.nodes[c].outputs[0]);
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
    int8_out &= nhwc_reader(op) || op == OpType::Add;
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
    l->info.kernel = int8 ? "conv_grouped_i8" : "conv_grouped_f16";
  } else {
    conv_layers_.push_back(static_cast<int>(inst_->layers.size()));  // timed among the tile configurations
  }
  add_layer(std::move(l));
  *lowered = true;
  return Status::ok();
}

// The QAT model's per-channel scales of weight constant `w`, or null (then computed from the weights).
const std::vector<float>* Lowerer::qat_weight_scales(int w) const {
  auto it = in_.int8->weight_scales.find(g_.values[w].name);
  return it == in_.int8->weight_scales.end() ? nullptr : &it->second;
}

namespace {
bool exact_gelu(const Node& n) {
  if (n.op != OpType::Gelu || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  const auto approximate = n.attrs.get_string("approximate", "none");
  return approximate && *approximate == "none";
}
}  // namespace

// A linear layer (linear_operands: a Gemm or MatMul with constant weights, in INT8 or fp16) as the 1x1 conv
// it is over its N input rows: the same kernels and epilogue. INT8 reads the input's int8 copy and computes
// y = acc * (s_x * s_w[k]) + bias[k]; fp16 reads an fp16 copy of the rows (ensure_rows_f16). The result goes in fp32
// straight into the value ([N, K] row-major is the ONNX layout of [..., K]), or as fp16 rows where every reader takes
// those (lower_rows.cpp). A MatMul's bias Add that only it feeds becomes the epilogue's bias, and an exact GELU that
// only reads an fp16 result its activation.
Status Lowerer::lower_linear(int i) {
  const Node& n = g_.nodes[i];
  const int x = n.inputs[0];
  const bool int8 = int8_convs_.count(n.name) > 0;
  auto lin = linear_operands(g_, n);
  if (!lin || (int8 && q8_[x] < 0) || (!int8 && !linear_fp16(*lin))) {
    return internal("linear layer '" + n.name + "' cannot be lowered");
  }
  const auto [b, bias, trans_b, N, C, K] = *lin;
  int y = n.outputs[0];
  std::string names = layer_name(n);
  const Tensor* add_bias = bias;
  if (const int add = n.op == OpType::MatMul ? bias_add(y, K) : -1; add >= 0) {  // a Gemm has its own bias input
    const Node& a = g_.nodes[add];
    add_bias = g_.constant(a.inputs[a.inputs[0] == y ? 1 : 0]);
    done_[add] = true;
    names += "+" + a.name;
    y = a.outputs[0];
  }
  // A GELU (exact, as fuse_gelu makes it) that only reads an fp16 result: the epilogue's (INT8 epilogues have none).
  Act act = Act::kNone;
  if (const int c = sole_consumer(y); !int8 && c >= 0 && exact_gelu(g_.nodes[c])) {
    act = Act::kGelu;
    done_[c] = true;
    names += "+" + g_.nodes[c].name;
    y = g_.nodes[c].outputs[0];
  }
  // A ConvNeXt block's end (QAT weight scales would need the layer scale too: not absorbed there).
  std::optional<NchwResidual> tail;
  if (fast_ && K % 8 == 0 && !(int8 && qat_weight_scales(n.inputs[1]))) tail = nchw_residual(y, K);
  if (tail) {
    for (int c : {tail->transpose, tail->mul, tail->add}) {
      if (c < 0) continue;
      done_[c] = true;
      names += "+" + g_.nodes[c].name;
    }
    y = g_.nodes[tail->add].outputs[0];
  }
  const std::string key = names + (int8 ? ":int8" : ":linear");
  auto it = in_.weights->find(key);
  if (it == in_.weights->end()) {
    Tensor w(DType::kFloat32, {K, C, 1, 1});  // B as conv weights [K][C], times the layer scale
    for (int64_t k = 0; k < K; ++k) {
      const float f = tail && tail->scale ? tail->scale->data<float>()[k] : 1.f;
      for (int64_t c = 0; c < C; ++c) {
        w.data<float>()[k * C + c] = f * b->data<float>()[trans_b ? k * C + c : c * K + k];
      }
    }
    Tensor bv(DType::kFloat32, {K});
    if (add_bias) std::copy(add_bias->data<float>(), add_bias->data<float>() + K, bv.data<float>());
    if (tail && tail->scale) {
      for (int64_t k = 0; k < K; ++k) bv.data<float>()[k] *= tail->scale->data<float>()[k];
    }
    auto packed = int8 ? QD_TRY(pack_conv_int8(w, &bv, qscale_[x], qat_weight_scales(n.inputs[1])))
                       : QD_TRY(pack_conv(w, &bv));
    it = in_.weights->emplace(key, packed).first;
  }
  auto l = std::make_unique<ConvLayer>();
  l->int8 = int8;
  l->w = it->second;
  ConvParams& p = l->p;
  p.N = static_cast<int>(N);
  p.H = p.W = p.OH = p.OW = p.R = p.S = 1;
  p.C = l->w->C;
  p.K = static_cast<int>(K);
  p.Kp = l->w->Kp;
  p.act = act;
  l->in = int8 ? q8_[x] : QD_TRY(ensure_rows_f16(x, N, C));
  if (tail) {  // the residual as a conv's, the sum NHWC fp16
    QD_RETURN_IF_ERROR(bind_residual(*l, tail->residual));
    p.out_format = OutFormat::kNhwcF16;
    l->out = fast_t_[y] = nhwc_tensor(g_.values[y].shape);
  } else if (K % 8 == 0 && f16_rows_only(y)) {  // readers that all take fp16 rows get them from the epilogue
    p.out_format = OutFormat::kNhwcF16;
    l->out = rows_f16_[y] = nhwc_tensor({N, K, 1, 1});
  } else {
    p.out_format = OutFormat::kNchwF32;
    l->out = gen_[y] = add_tensor(generic_ref(y));
  }
  l->ins = {l->in};
  if (l->res >= 0) l->ins.push_back(l->res);
  l->outs = {l->out};
  l->info = {names, n.op == OpType::MatMul ? "matmul" : "gemm", "", int8 ? "int8" : "fp16",
             fmt_of(inst_->tensors[l->in]), fmt_of(inst_->tensors[l->out]), static_cast<double>(node_macs(g_, n))};
  conv_layers_.push_back(static_cast<int>(inst_->layers.size()));
  add_layer(std::move(l));
  return Status::ok();
}

// The Add that only consumes a MatMul's result y and adds a constant fp32 vector of its K columns (a Linear's bias,
// broadcast over the rows, not widening y), or -1.
int Lowerer::bias_add(int y, int64_t K) const {
  const int c = sole_consumer(y);
  if (c < 0 || g_.nodes[c].op != OpType::Add || g_.nodes[c].inputs.size() != 2) return -1;
  const Node& a = g_.nodes[c];
  const int o = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
  const Tensor* t = o >= 0 && o != y ? g_.constant(o) : nullptr;
  if (!t || t->dtype() != DType::kFloat32 || t->numel() != K || t->shape().empty() || t->shape().back() != K ||
      t->shape().size() > g_.values[y].shape.size() || a.outputs.size() != 1 ||
      g_.values[a.outputs[0]].shape != g_.values[y].shape) {
    return -1;
  }
  return c;
}

// Float value v's rows [N, C] (C its last dimension) as an fp16 NHWC tensor [N, C, 1, 1], converted once: what an
// fp16 linear layer reads.
Expected<int> Lowerer::ensure_rows_f16(int v, int64_t N, int64_t C) {
  if (auto it = rows_f16_.find(v); it != rows_f16_.end()) return it->second;
  const int src = QD_TRY(ensure_generic(v));
  const int view = view_tensor(src, {N, C, 1, 1});  // the same memory, as [N, C, 1, 1]
  const int t = nhwc_tensor({N, C, 1, 1});
  auto l = std::make_unique<ConvertLayer>();
  l->info = {g_.values[v].name + ":to_f16_rows", "reformat", "convert_tensor", "fp32->fp16",
             fmt_of(inst_->tensors[view]), fmt_of(inst_->tensors[t]), 0};
  l->ins = {view};
  l->outs = {t};
  add_layer(std::move(l));
  return rows_f16_[v] = t;
}

// Sibling convs as one: two convs that read the same tensor with the same geometry, precision and epilogue
// (YOLOv5's C3 cv1 and cv2, 1x1 over the block's input) run as one conv over both weight sets, reading their input
// once instead of twice, where their outputs can lie side by side in one buffer. That is so when the second's
// output is a Concat's channel slice (concat_in_place, or an INT8 Concat of try_int8_concat) and the first's can
// take the slice just before it: the slice of the Concat's preceding input, whose producer writes it after every
// reader of the first's output has run (the last bottleneck; it may itself read the first's output, but only as
// its residual: each element is read and then written by the same thread, as every conv epilogue adds its
// residual). INT8 ones keep each output's scale (ConvParams::out_split: cv2's is the Concat's, cv1's its own).
Status Lowerer::merge_sibling_convs() {
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

// Whether every layer reading tensor t runs before layer `last`, or is `last` reading t only as its residual.
bool Lowerer::readers_done_by(int t, int last) const {
  for (size_t l = 0; l < inst_->layers.size(); ++l) {
    const Layer& L = *inst_->layers[l];
    if (std::find(L.ins.begin(), L.ins.end(), t) == L.ins.end()) continue;
    if (static_cast<int>(l) < last) continue;
    const auto* c = dynamic_cast<const ConvLayer*>(&L);
    if (static_cast<int>(l) > last || !c || c->in == t || c->res != t) return false;
  }
  return true;
}

}  // namespace qd::cuda
