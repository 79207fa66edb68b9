// SliceConcat (ops/fused.h): a detector head's slice / elementwise / concat decode as one node. Its reference kernel
// runs each step through the op's own reference kernel on the slice, so the fused graph computes exactly what the
// nodes it replaced computed.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/common.h"
#include "ops/fused.h"

namespace qd::ops {

namespace {

constexpr OpType kUnarySteps[] = {OpType::Relu,       OpType::Sigmoid,    OpType::Tanh,      OpType::Exp,
                                  OpType::Neg,        OpType::Abs,        OpType::Sqrt,      OpType::Reciprocal,
                                  OpType::HardSwish,  OpType::LeakyRelu,  OpType::HardSigmoid, OpType::Clip};
constexpr OpType kBinarySteps[] = {OpType::Add, OpType::Sub, OpType::Mul, OpType::Div,
                                   OpType::Pow, OpType::Max, OpType::Min};

template <size_t N>
bool one_of(OpType op, const OpType (&list)[N]) {
  return std::find(std::begin(list), std::end(list), op) != std::end(list);
}

bool binary_step(OpType op) { return one_of(op, kBinarySteps); }

// Attribute `name` as a list of n items of type T (absent: empty, which only n == 0 accepts).
template <typename T>
Expected<std::vector<T>> list_attr(const Node& n, const char* name, size_t count) {
  std::vector<T> v;
  if (auto it = n.attrs.all().find(name); it != n.attrs.all().end()) {
    const auto* p = std::get_if<std::vector<T>>(&it->second);
    if (!p) return invalid(std::string("SliceConcat's attribute '") + name + "' has the wrong type");
    v = *p;
  }
  if (v.size() != count) {
    return invalid(std::string("SliceConcat's attribute '") + name + "' has " + std::to_string(v.size()) +
                   " items, expected " + std::to_string(count));
  }
  return v;
}

// Step `st` applied to t (one slice) by the op's reference kernel; `c` is the binary step's constant.
Expected<Tensor> apply_step(const Node& fused, const ElementwiseStep& st, const Tensor& t, const Tensor* c) {
  Node n;
  n.name = fused.name;
  n.op = st.op;
  n.opset = 13;  // Clip takes its bounds as inputs
  n.outputs = {0};
  std::vector<const Tensor*> in = {&t};
  Tensor lo = Tensor::scalar_f32(st.a), hi = Tensor::scalar_f32(st.b);
  if (binary_step(st.op)) {
    in = st.x_first ? std::vector<const Tensor*>{&t, c} : std::vector<const Tensor*>{c, &t};
  } else if (st.op == OpType::Clip) {  // an absent bound stays absent (NaNs pass through as the unfused Clip's do)
    in = {&t, std::isinf(st.a) && st.a < 0 ? nullptr : &lo, std::isinf(st.b) && st.b > 0 ? nullptr : &hi};
  } else if (st.op == OpType::LeakyRelu) {
    n.attrs.set("alpha", st.a);
  } else if (st.op == OpType::HardSigmoid) {
    n.attrs.set("alpha", st.a);
    n.attrs.set("beta", st.b);
  }
  std::vector<DType> types;
  std::vector<Shape> shapes;
  for (const Tensor* x : in) {
    n.inputs.push_back(x ? 0 : -1);
    types.push_back(x ? x->dtype() : DType::kUndefined);
    shapes.push_back(x ? x->shape() : Shape{});
  }
  InferCtx ctx(n, types, shapes, in);
  QD_RETURN_IF_ERROR(infer_node(ctx));
  auto out = QD_TRY(run_node(ctx, in));
  return std::move(out[0]);
}

}  // namespace

Expected<bool> elementwise_step(const Graph& g, const Node& n, int x, ElementwiseStep* st) {
  if (x < 0 || n.outputs.size() != 1 || n.outputs[0] < 0 || n.inputs.empty()) return false;
  const Value& y = g.values[n.outputs[0]];
  if (y.dtype != DType::kFloat32 || g.values[x].dtype != DType::kFloat32 || y.shape != g.values[x].shape) return false;
  ElementwiseStep s;
  s.op = n.op;
  if (one_of(n.op, kUnarySteps)) {
    if (n.inputs[0] != x) return false;
    if (n.op == OpType::Clip) {
      if (!QD_TRY(clip_constant_bounds(g, n, &s.a, &s.b))) return false;
    } else if (n.inputs.size() != 1) {
      return false;
    } else if (n.op == OpType::LeakyRelu) {
      s.a = QD_TRY(n.attrs.get_float("alpha", 0.01f));
    } else if (n.op == OpType::HardSigmoid) {
      s.a = QD_TRY(n.attrs.get_float("alpha", 0.2f));
      s.b = QD_TRY(n.attrs.get_float("beta", 0.5f));
    }
    *st = s;
    return true;
  }
  if (!binary_step(n.op) || n.inputs.size() != 2 || (n.inputs[0] == x) == (n.inputs[1] == x)) return false;
  s.x_first = n.inputs[0] == x;
  s.operand = n.inputs[s.x_first ? 1 : 0];
  const Tensor* c = s.operand >= 0 ? g.constant(s.operand) : nullptr;
  if (!c || c->dtype() != DType::kFloat32 || c->numel() == 0) return false;
  *st = s;
  return true;
}

Expected<SliceConcatAttrs> slice_concat_attrs(const Node& n) {
  SliceConcatAttrs a;
  const auto starts = QD_TRY(n.attrs.get_ints("starts"));
  const size_t segs = starts.size();
  const auto lengths = QD_TRY(list_attr<int64_t>(n, "lengths", segs));
  const auto counts = QD_TRY(list_attr<int64_t>(n, "step_counts", segs));
  int64_t steps = 0;
  for (int64_t k : counts) {
    if (k < 0 || k > 64) return invalid("SliceConcat's step_counts must lie in [0, 64]");
    steps += k;
  }
  const auto ops = QD_TRY(list_attr<std::string>(n, "step_ops", steps));
  const auto operands = QD_TRY(list_attr<int64_t>(n, "step_operands", steps));
  const auto x_first = QD_TRY(list_attr<int64_t>(n, "step_x_first", steps));
  const auto sa = QD_TRY(list_attr<float>(n, "step_a", steps)), sb = QD_TRY(list_attr<float>(n, "step_b", steps));
  size_t k = 0;
  for (size_t s = 0; s < segs; ++s) {
    SliceConcatSegment seg{starts[s], lengths[s], {}};
    for (int64_t j = 0; j < counts[s]; ++j, ++k) {
      const auto op = op_from_name(ops[k]);
      if (!op || !(one_of(*op, kUnarySteps) || binary_step(*op))) {
        return invalid("SliceConcat: '" + ops[k] + "' is not an elementwise step");
      }
      if (binary_step(*op) != (operands[k] >= 1) || operands[k] > INT32_MAX) {
        return invalid("SliceConcat: step " + std::to_string(k) + " (" + ops[k] + ") has a bad operand index");
      }
      seg.steps.push_back({*op, static_cast<int>(operands[k]), x_first[k] != 0, sa[k], sb[k]});
    }
    a.segments.push_back(std::move(seg));
  }
  a.fused = fused_names(n);
  return a;
}

void set_slice_concat_attrs(Node& n, const SliceConcatAttrs& a) {
  std::vector<int64_t> starts, lengths, counts, operands, x_first;
  std::vector<std::string> ops;
  std::vector<float> sa, sb;
  for (const SliceConcatSegment& s : a.segments) {
    starts.push_back(s.start);
    lengths.push_back(s.len);
    counts.push_back(static_cast<int64_t>(s.steps.size()));
    for (const ElementwiseStep& st : s.steps) {
      ops.push_back(op_name(st.op));
      operands.push_back(st.operand);
      x_first.push_back(st.x_first);
      sa.push_back(st.a);
      sb.push_back(st.b);
    }
  }
  n.attrs.set("starts", starts);
  n.attrs.set("lengths", lengths);
  n.attrs.set("step_counts", counts);
  n.attrs.set("step_ops", ops);
  n.attrs.set("step_operands", operands);
  n.attrs.set("step_x_first", x_first);
  n.attrs.set("step_a", sa);
  n.attrs.set("step_b", sb);
  n.attrs.set("fused", a.fused);
}

Status infer_SliceConcat(InferCtx& c) {
  const SliceConcatAttrs a = QD_TRY(slice_concat_attrs(c.node));
  if (c.dtype(0) != DType::kFloat32 || c.rank(0) == 0) {
    return invalid("SliceConcat takes a float32 tensor of rank >= 1");
  }
  if (a.segments.empty()) return invalid("SliceConcat needs at least one segment");
  Shape out = c.shape(0);
  const int64_t cols = out.back();
  int64_t total = 0;
  for (const SliceConcatSegment& s : a.segments) {
    if (s.start < 0 || s.len <= 0 || s.start > cols - s.len) {
      return invalid("SliceConcat's segment [" + std::to_string(s.start) + ", +" + std::to_string(s.len) +
                     ") lies outside the input's last dim " + std::to_string(cols));
    }
    Shape slice = out;
    slice.back() = s.len;
    for (const ElementwiseStep& st : s.steps) {
      if (st.operand < 0) continue;
      const size_t i = static_cast<size_t>(st.operand);
      if (!c.has_input(i) || c.dtype(i) != DType::kFloat32) {
        return invalid("SliceConcat's step operand " + std::to_string(i) + " must be a float32 input");
      }
      auto b = broadcast_shapes(slice, c.shape(i));
      if (!b || *b != slice) {
        return invalid("SliceConcat's operand " + shape_str(c.shape(i)) + " does not broadcast to its slice " +
                       shape_str(slice));
      }
    }
    total += s.len;
  }
  out.back() = total;
  c.set_output(0, DType::kFloat32, out);
  return Status::ok();
}

Status run_SliceConcat(KernelCtx& c) {
  const SliceConcatAttrs a = QD_TRY(slice_concat_attrs(c.node));
  const Tensor& x = *c.in[0];
  Tensor& y = *c.out[0];
  const int64_t cols = x.shape().back(), ocols = y.shape().back(), rows = cols ? x.numel() / cols : 0;
  int64_t at = 0;
  for (const SliceConcatSegment& s : a.segments) {
    Shape ss = x.shape();
    ss.back() = s.len;
    Tensor t = QD_TRY(Tensor::make(DType::kFloat32, ss));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(t.data<float>() + r * s.len, x.data<float>() + r * cols + s.start, s.len * sizeof(float));
    }
    for (const ElementwiseStep& st : s.steps) {
      t = QD_TRY(apply_step(c.node, st, t, st.operand > 0 ? c.in[st.operand] : nullptr));
    }
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(y.data<float>() + r * ocols + at, t.data<float>() + r * s.len, s.len * sizeof(float));
    }
    at += s.len;
  }
  return Status::ok();
}

}  // namespace qd::ops
