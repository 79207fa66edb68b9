// Elementwise chains as one fused pass, and the detection head's decode: slices of one tensor, each through such a
// chain, concatenated (YOLO's xy/wh/conf), as one layer written straight into the levels' Concat.
#include <algorithm>

#include "backends/cuda/lowerer.h"
#include "ops/fused.h"
#include "ops/op.h"

namespace qd::cuda {

// How constant `cs` broadcast to `xs` is indexed: one term per run of dims it does not broadcast over; false when
// it does not broadcast to xs or needs more than two terms.
bool Lowerer::broadcast_terms(const Shape& xs, const Shape& cs, EwOperand* o) {
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
Expected<bool> Lowerer::chain_step(const Node& n, int x, EwStep* st, EwConstants* operands) {
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
Expected<bool> Lowerer::clip_bounds(const Node& n, float* lo, float* hi) const {
  if (!QD_TRY(ops::clip_constant_bounds(g_, n, lo, hi))) return false;
  if (*lo > *hi) *lo = *hi;  // ONNX: every value becomes max; the fused forms clamp with lo <= hi
  return true;
}

// The chain's constants on the device (kept by the instance), with their index terms' magic numbers.
Status Lowerer::upload_operands(const EwConstants& operands, EwProgram* prog) {
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
Status Lowerer::try_eltwise_chain(int i, bool* lowered) {
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

// A Concat along the last axis whose inputs are slices of one value along its last axis (step 1, other dims
// whole), each through an elementwise chain or directly: YOLO's Concat(xy, wh, conf) over the sigmoid of a level.
// It runs as one SliceConcatLayer; its Slices and chains run no layers. When its result only reaches, through a
// Reshape, a Concat along axis 1 whose inputs are all such results (the head's levels), it is written straight
// into that Concat's output, which then runs no layer either.
Status Lowerer::plan_slice_concats() {
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

Status Lowerer::lower_slice_concat(int i) {
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

}  // namespace qd::cuda
