// Channels-last blocks (ConvNeXt, InternImage) in fp16 and INT8 plans: the activations between their linear layers
// travel as fp16 rows ([tokens, C], Lowerer::rows_f16_) instead of fp32 values converted before every linear layer.
// A linear layer whose readers all take fp16 rows writes only those (with a GELU after it in its epilogue);
// LayerNormalization over the last axis runs as one RowNormLayer with the residual Add before it, writing fp16 rows
// for such readers (fp32 for others); plugin ops run in fp16 in fp16 plans where their kernels take it
// (lower_plugin.cpp), reading and writing fp16 rows. Where such a block meets NCHW convs (ConvNeXt: depthwise conv ->
// Transpose (0, 2, 3, 1) -> LayerNorm -> linear layers -> Transpose (0, 3, 1, 2) [-> layer scale] -> residual Add),
// the Transposes are views: a conv's NHWC fp16 output is its pixels' fp16 rows, and fp16 rows [N*H*W, C] are the
// NHWC fp16 tensor of the NCHW value, which the last linear layer writes with the layer scale in its weights and the
// residual Add in its epilogue (lower_linear).
#include <algorithm>
#include <cmath>

#include "backends/cuda/lowerer.h"
#include "ops/op_geometry.h"
#include "ops/plugin_registry.h"

namespace qd::cuda {

// Node c reads v as the rows of an fp16 linear layer (lower_linear through ensure_rows_f16).
bool Lowerer::reads_f16_rows(int c, int v) const {
  const Node& n = g_.nodes[c];
  if ((n.op != OpType::Gemm && n.op != OpType::MatMul) || !layout_.fast(c) || int8_convs_.count(n.name) ||
      n.inputs.empty() || n.inputs[0] != v || std::count(n.inputs.begin(), n.inputs.end(), v) != 1) {
    return false;
  }
  const auto lin = linear_operands(g_, n);
  return lin && linear_fp16(*lin);
}

// A Reshape-like node that keeps its input's last dimension: the rows stay the same rows.
bool Lowerer::row_view(int c) const {
  const Node& n = g_.nodes[c];
  static const OpType kViews[] = {OpType::Reshape, OpType::Flatten, OpType::Squeeze, OpType::Unsqueeze,
                                  OpType::Identity};
  if (std::find(std::begin(kViews), std::end(kViews), n.op) == std::end(kViews) || done_[c]) return false;
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  const Shape &a = g_.values[n.inputs[0]].shape, &b = g_.values[n.outputs[0]].shape;
  return !a.empty() && !b.empty() && a.back() == b.back() && g_.values[n.outputs[0]].dtype == DType::kFloat32;
}

// Every reader of v takes it as fp16 rows (fp16 linear layers; plugin ops run in fp16, directly or through the
// column slices they read in place; views keeping the last dim whose readers do), v is no graph output, and its rows
// are whole 16-byte runs: its producer may write only those.
bool Lowerer::f16_rows_only(int v) const {
  const Shape& s = g_.values[v].shape;
  if (is_output_[v] || consumers_[v].empty() || s.empty() || s.back() % 8 != 0 ||
      g_.values[v].dtype != DType::kFloat32) {
    return false;
  }
  for (int c : consumers_[v]) {
    if (reads_f16_rows(c, v) || f16_plugins_.count(c)) continue;
    const auto slice = plugin_slice_reader_.find(c);
    if (slice != plugin_slice_reader_.end() && f16_plugins_.count(slice->second)) continue;
    if (row_view(c) && f16_rows_only(g_.nodes[c].outputs[0])) continue;
    if (row_norm_reads_f16(c, v)) continue;
    if (nhwc_transpose(c, false) && fast_reader(g_.nodes[c].outputs[0])) continue;
    return false;
  }
  return true;
}

// A view of rows that exist only as fp16 rows (written by a layer of this file) is those rows; no layer runs.
bool Lowerer::try_row_view(int i) {
  if (!row_view(i)) return false;
  const Node& n = g_.nodes[i];
  const auto it = rows_f16_.find(n.inputs[0]);
  if (it == rows_f16_.end()) return false;
  rows_f16_[n.outputs[0]] = it->second;
  return gen_[n.inputs[0]] < 0;  // else the generic view follows too
}

// Transpose c between a 4-d value's NCHW form and its channels-last [N, H, W, C] form (to_rows: perm (0, 2, 3, 1),
// else (0, 3, 1, 2)), its channels whole 16-byte fp16 runs, not a graph output: the two sides are one NHWC fp16
// tensor, read as pixels or as rows.
bool Lowerer::nhwc_transpose(int c, bool to_rows) const {
  const Node& n = g_.nodes[c];
  if (n.op != OpType::Transpose || done_[c] || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1 ||
      n.outputs[0] < 0 || is_output_[n.outputs[0]]) {
    return false;
  }
  const Shape& s = g_.values[n.inputs[0]].shape;
  const auto perm = n.attrs.get_ints("perm", std::vector<int64_t>{});
  const std::vector<int64_t> want = to_rows ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 3, 1, 2};
  return perm && *perm == want && s.size() == 4 && s[to_rows ? 1 : 3] % 8 == 0 &&
         g_.values[n.inputs[0]].dtype == DType::kFloat32;
}

// Some reader of v takes its NHWC fp16 tensor: a conv (or other NHWC op) on the fast path.
bool Lowerer::fast_reader(int v) const {
  for (int c : consumers_[v]) {
    if (nhwc_reader(g_.nodes[c].op) && layout_.fast(c)) return true;
  }
  return false;
}

// LayerNormalization c runs as a RowNormLayer without a residual Add and may read v as fp16 rows.
bool Lowerer::row_norm_reads_f16(int c, int v) const {
  const auto it = row_norms_.find(c);
  return it != row_norms_.end() && it->second < 0 && g_.nodes[c].inputs[0] == v;
}

// A view of tensor t with another logical shape (same memory, same format).
int Lowerer::view_tensor(int t, const Shape& shape) {
  TensorRef r = inst_->tensors[t];
  r.shape = shape;
  inst_->tensors.push_back(r);
  if (r.buffer >= 0) ++buffer_users_[r.buffer];
  return static_cast<int>(inst_->tensors.size() - 1);
}

// nhwc_transpose i, when its input's NHWC fp16 tensor (or fp16 rows) exists: no layer runs.
Expected<bool> Lowerer::try_nhwc_transpose(int i) {
  const Node& n = g_.nodes[i];
  const bool to_rows = nhwc_transpose(i, true);
  if (!to_rows && !nhwc_transpose(i, false)) return false;
  const int x = n.inputs[0], y = n.outputs[0];
  QD_RETURN_IF_ERROR(resolve(x));  // readers of a quantized value see it dequantized
  const Shape& s = g_.values[x].shape;
  if (to_rows) {
    if (fast_t_[x] < 0 || !f16_rows_only(y)) return false;
    const TensorRef& t = inst_->tensors[fast_t_[x]];
    if (t.coff != 0 || t.ld != s[1]) return false;  // (a Concat's channel slice is no whole rows)
    rows_f16_[y] = view_tensor(fast_t_[x], {s[0] * s[2] * s[3], s[1], 1, 1});
  } else {
    const auto it = rows_f16_.find(x);
    if (it == rows_f16_.end()) return false;
    fast_t_[y] = view_tensor(it->second, g_.values[y].shape);
  }
  return true;
}

// What follows linear layer result y ([N, H, W, K]) at the end of a ConvNeXt block: Transpose (0, 3, 1, 2) ->
// [Mul by a constant per-channel layer scale ->] Add of a value r of the same shape, each the sole reader of the one
// before, the sum no graph output. The linear layer then computes r + scale * (x W + b) as a conv with the scale in
// its weights and bias and r as its epilogue's residual, and writes the sum's NHWC fp16 tensor.
std::optional<Lowerer::NchwResidual> Lowerer::nchw_residual(int y, int64_t K) const {
  NchwResidual t;
  t.transpose = sole_consumer(y);
  if (t.transpose < 0 || !nhwc_transpose(t.transpose, false) || g_.values[y].shape.back() != K) return std::nullopt;
  int cur = g_.nodes[t.transpose].outputs[0];
  const Shape& s = g_.values[cur].shape;
  int c = sole_consumer(cur);
  if (c >= 0 && g_.nodes[c].op == OpType::Mul && g_.nodes[c].inputs.size() == 2) {
    const Node& m = g_.nodes[c];
    const int o = m.inputs[0] == cur ? m.inputs[1] : m.inputs[0];
    const Tensor* k = o != cur ? g_.constant(o) : nullptr;
    const Shape& ks = k ? k->shape() : Shape{};
    // [K, 1, 1] or [1, K, 1, 1]: one factor per channel
    const bool per_channel = k && k->dtype() == DType::kFloat32 && k->numel() == K && ks.size() >= 3 &&
                             ks.size() <= 4 && ks[ks.size() - 3] == K;
    if (!per_channel || m.outputs.size() != 1 || m.outputs[0] < 0 || g_.values[m.outputs[0]].shape != s) {
      return std::nullopt;
    }
    t.mul = c;
    t.scale = k;
    cur = m.outputs[0];
    c = sole_consumer(cur);
  }
  if (c < 0 || g_.nodes[c].op != OpType::Add || g_.nodes[c].inputs.size() != 2) return std::nullopt;
  const Node& a = g_.nodes[c];
  const int r = a.inputs[0] == cur ? a.inputs[1] : a.inputs[0];
  if (r < 0 || r == cur || g_.is_constant(r) || g_.values[r].shape != s || g_.values[r].dtype != DType::kFloat32 ||
      a.outputs.size() != 1 || a.outputs[0] < 0 || is_output_[a.outputs[0]] || g_.values[a.outputs[0]].shape != s) {
    return std::nullopt;
  }
  t.add = c;
  t.residual = r;
  return t;
}

// The fp32 value of v held only as fp16 rows, for a reader that wants the ONNX form.
Expected<int> Lowerer::rows_to_generic(int v) {
  const int rows = rows_f16_.at(v);
  const int t = add_tensor(generic_ref(v));
  const int view = view_tensor(t, inst_->tensors[rows].shape);
  auto l = std::make_unique<ConvertLayer>();
  l->info = {g_.values[v].name + ":from_f16_rows", "reformat", "convert_tensor", "fp16->fp32",
             fmt_of(inst_->tensors[rows]), fmt_of(inst_->tensors[view]), 0};
  l->ins = {rows};
  l->outs = {view};
  add_layer(std::move(l));
  return gen_[v] = t;
}

// A LayerNormalization RowNormLayer runs: over the last axis (whole 16-byte fp16 rows, at most kRowNormMaxC
// values), fp32, its scale and bias constant vectors of that length, without the Mean and InvStdDev outputs, reading
// and writing the arena (not a caller's binding, whose alignment is the caller's).
bool Lowerer::row_norm_fits(int i) const {
  const Node& n = g_.nodes[i];
  if (n.op != OpType::LayerNormalization || n.inputs.size() < 2 || n.outputs.empty() || n.outputs[0] < 0) return false;
  for (size_t k = 1; k < n.outputs.size(); ++k) {
    if (n.outputs[k] >= 0) return false;
  }
  const int x = n.inputs[0], y = n.outputs[0];
  if (x < 0 || g_.values[x].producer < 0 || g_.values[x].dtype != DType::kFloat32 || is_output_[y] ||
      g_.values[y].dtype != DType::kFloat32) {
    return false;
  }
  const Shape& xs = g_.values[x].shape;
  if (xs.size() < 2 || numel(xs) == 0 || xs.back() % 8 != 0 || xs.back() > kRowNormMaxC) return false;
  const auto geo = ops::layer_norm_geom(n, xs);
  const auto eps = n.attrs.get_float("epsilon", 1e-5f);
  if (!geo || geo->axis != static_cast<int>(xs.size()) - 1 || geo->stash != DType::kFloat32 || !eps ||
      !std::isfinite(*eps) || *eps < 0) {
    return false;
  }
  for (size_t k = 1; k <= 2; ++k) {
    if (k >= n.inputs.size() || n.inputs[k] < 0) {
      if (k == 1) return false;
      continue;
    }
    const Tensor* t = g_.constant(n.inputs[k]);
    if (!t || t->dtype() != DType::kFloat32 || t->numel() != xs.back()) return false;
  }
  return true;
}

// Add a of two fp32 values of one shape, computed in the arena, whose sum only LayerNormalization ln and later
// nodes read (so ln's layer can make it), not quantized and not a graph output.
bool Lowerer::residual_add(int a, int ln) const {
  const Node& n = g_.nodes[a];
  if (n.op != OpType::Add || n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  const int s = n.outputs[0];
  if (is_output_[s] || (!qscale_.empty() && qscale_[s] != 0.f)) return false;
  for (int v : n.inputs) {
    if (v < 0 || g_.values[v].producer < 0 || g_.values[v].dtype != DType::kFloat32 ||
        g_.values[v].shape != g_.values[s].shape) {
      return false;
    }
  }
  for (int c : consumers_[s]) {
    if (c < ln) return false;
  }
  return true;
}

void Lowerer::plan_row_norms() {
  if (!fast_) return;
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (done_[i] || !row_norm_fits(static_cast<int>(i))) continue;
    const int p = g_.values[g_.nodes[i].inputs[0]].producer;
    const bool add = !done_[p] && residual_add(p, static_cast<int>(i));
    if (add) done_[p] = true;
    row_norms_[static_cast<int>(i)] = add ? p : -1;
  }
}

Status Lowerer::lower_row_norm(int i) {
  const Node& n = g_.nodes[i];
  const int add = row_norms_.at(i), x = n.inputs[0], y = n.outputs[0];
  const Shape& xs = g_.values[x].shape;
  auto l = std::make_unique<RowNormLayer>();
  l->C = static_cast<int>(xs.back());
  l->rows = numel(xs) / xs.back();
  l->eps = *n.attrs.get_float("epsilon", 1e-5f);
  std::string name = n.name;
  int sum = -1;
  if (add >= 0) {
    const Node& a = g_.nodes[add];
    for (int v : a.inputs) QD_RETURN_IF_ERROR(resolve(v));
    l->ins = {QD_TRY(ensure_generic(a.inputs[0])), QD_TRY(ensure_generic(a.inputs[1]))};
    if (uses_[x] > 1) sum = gen_[x] = add_tensor(generic_ref(x));  // the residual stream's next Add reads it
    name = a.name + "+" + n.name;
  } else if (const auto rows = rows_f16_.find(x); rows != rows_f16_.end() && gen_[x] < 0) {
    l->ins = {rows->second, -1};
  } else {
    l->ins = {QD_TRY(ensure_generic(x)), -1};
  }
  l->ins.push_back(QD_TRY(ensure_generic(n.inputs[1])));
  l->ins.push_back(n.inputs.size() > 2 && n.inputs[2] >= 0 ? QD_TRY(ensure_generic(n.inputs[2])) : -1);
  const bool f16 = f16_rows_only(y);
  const int out = f16 ? nhwc_tensor({l->rows, l->C, 1, 1}) : add_tensor(generic_ref(y));
  (f16 ? rows_f16_[y] : gen_[y]) = out;
  l->outs = {sum, f16 ? out : -1, f16 ? -1 : out};
  l->info = {name, "LayerNormalization", add >= 0 ? "add_layer_norm_rows" : "layer_norm_rows", f16 ? "fp16" : "fp32",
             fmt_of(inst_->tensors[l->ins[0]]), fmt_of(inst_->tensors[out]), 0};
  add_layer(std::move(l));
  return Status::ok();
}

}  // namespace qd::cuda
