// Elementwise chains as one fused pass, and the detection head's decode (SliceConcat, from fuse_slice_concat) as one
// layer written straight into the levels' Concat.
#include <algorithm>

#include "backends/cuda/lowerer.h"
#include "ops/fused.h"
#include "ops/op.h"

namespace qd::cuda {

// Step `es` of an elementwise program on x of shape xs as the kernels run it; `c` is a binary step's constant (a
// scalar becomes the immediate, a tensor an operand read with its broadcast terms). False when the kernels cannot.
bool Lowerer::ew_step(const ops::ElementwiseStep& es, const Shape& xs, const Tensor* c, EwStep* st,
                      EwConstants* operands) {
  static const std::pair<OpType, EwOp> kUnary[] = {
      {OpType::Relu, EwOp::kRelu},       {OpType::Sigmoid, EwOp::kSigmoid},
      {OpType::Tanh, EwOp::kTanh},       {OpType::Exp, EwOp::kExp},
      {OpType::Neg, EwOp::kNeg},         {OpType::Abs, EwOp::kAbs},
      {OpType::Sqrt, EwOp::kSqrt},       {OpType::Reciprocal, EwOp::kReciprocal},
      {OpType::HardSwish, EwOp::kHardSwish}, {OpType::LeakyRelu, EwOp::kLeakyRelu},
      {OpType::HardSigmoid, EwOp::kHardSigmoid}, {OpType::Clip, EwOp::kClip}};
  static const std::tuple<OpType, EwOp, EwOp> kBinary[] = {
      {OpType::Add, EwOp::kAdd, EwOp::kAdd}, {OpType::Sub, EwOp::kSub, EwOp::kRSub},
      {OpType::Mul, EwOp::kMul, EwOp::kMul}, {OpType::Div, EwOp::kDiv, EwOp::kRDiv},
      {OpType::Pow, EwOp::kPow, EwOp::kRPow}, {OpType::Max, EwOp::kMax, EwOp::kMax},
      {OpType::Min, EwOp::kMin, EwOp::kMin}};
  st->a = es.a;
  st->b = es.b;
  for (const auto& [op, ew] : kUnary) {
    if (es.op != op) continue;
    st->op = ew;
    if (ew == EwOp::kClip && st->a > st->b) st->a = st->b;  // ONNX: every value becomes max; the kernel clamps
    return true;
  }
  for (const auto& [op, fwd, rev] : kBinary) {
    if (es.op != op) continue;
    if (!c || c->dtype() != DType::kFloat32 || c->numel() == 0) return false;
    st->op = es.x_first ? fwd : rev;
    if (c->numel() == 1) {
      st->a = c->data<float>()[0];
      return true;
    }
    BroadcastTerms t;
    if (operands->size() == kMaxEwOperands || !broadcast_terms(xs, c->shape(), &t)) return false;
    EwOperand o;
    for (int k = 0; k < 2; ++k) {
      o.div[k] = t.div[k];
      o.mod[k] = t.mod[k];
      o.mul[k] = t.mul[k];
    }
    st->operand = static_cast<int16_t>(operands->size());
    operands->push_back({c, o});
    return true;
  }
  return false;
}

// One step of an elementwise chain on x: node n as ops::elementwise_step reads it, where the kernels run it.
Expected<bool> Lowerer::chain_step(const Node& n, int x, EwStep* st, EwConstants* operands) {
  ops::ElementwiseStep es;
  if (!QD_TRY(ops::elementwise_step(g_, n, x, &es))) return false;
  return ew_step(es, g_.values[x].shape, es.operand >= 0 ? g_.constant(es.operand) : nullptr, st, operands);
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

// The head decodes fuse_slice_concat made (SliceConcat nodes), each one SliceConcatLayer. When its result only
// reaches, through a Reshape, a Concat along axis 1 whose inputs are all such results (the head's levels), it is
// written straight into that Concat's output, which then runs no layer either.
Status Lowerer::plan_slice_concats() {
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    const Node& n = g_.nodes[i];
    if (n.op != OpType::SliceConcat) continue;
    const ops::SliceConcatAttrs a = QD_TRY(ops::slice_concat_attrs(n));
    const Shape& os = g_.values[n.outputs[0]].shape;
    SliceConcatPlan pl;
    pl.src = n.inputs[0];
    int out_start = 0;
    for (const ops::SliceConcatSegment& s : a.segments) {
      SliceSegment seg;
      seg.src_start = static_cast<int>(s.start);
      seg.len = static_cast<int>(s.len);
      seg.out_start = out_start;
      out_start += seg.len;
      pl.seg.push_back(seg);
    }
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
    if (pl.target >= 0) done_[pl.reshape] = done_[pl.target] = true;
    // A head conv may then write the source transposed (lower_conv), when the kernel's tile fits.
    if (!is_output_[pl.src] && consumers_[pl.src].size() == 1 &&
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
  const ops::SliceConcatAttrs a = QD_TRY(ops::slice_concat_attrs(n));
  for (size_t k = 0; k < pl.seg.size(); ++k) {
    SliceSegment& sg = p.seg[k] = pl.seg[k];
    Shape slice = g_.values[pl.src].shape;
    slice.back() = sg.len;
    EwConstants operands;
    for (const ops::ElementwiseStep& es : a.segments[k].steps) {
      const Tensor* c = es.operand > 0 ? g_.constant(n.inputs[es.operand]) : nullptr;
      if (!ew_step(es, slice, c, &sg.prog.step[sg.prog.steps++], &operands)) {
        return internal("SliceConcat '" + n.name + "' has a step the decode kernel cannot run (cuda_fusion_rules)");
      }
    }
    QD_RETURN_IF_ERROR(upload_operands(operands, &sg.prog));
  }
  std::string names;
  for (const std::string& f : a.fused) names += f + "+";
  names += n.name;
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
