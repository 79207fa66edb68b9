// check_batch_split: whether a shape-bound graph treats the items of its batch independently, so that an engine may
// run the batch as parts (passes.h). An analysis, not a rewrite: it follows the batch axis from the graph inputs and
// accepts an op only where each output item provably depends on the same input item alone.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_traits.h"
#include "passes/passes.h"

namespace qd {

namespace {

class BatchCheck {
 public:
  explicit BatchCheck(const Graph& g) : g_(g), batched_(g.values.size(), false) {}

  Status run() {
    if (g_.inputs.empty()) return no("the model has no inputs");
    const auto dim0_name = [&](int v) {
      const Value& x = g_.values[v];
      return x.dim_names.empty() ? std::string() : x.dim_names[0];
    };
    for (int v : g_.inputs) {
      const Value& x = g_.values[v];
      if (x.shape.empty()) return no("input '" + x.name + "' has no batch dim (a scalar)");
      if (n_ < 0) n_ = x.shape[0];
      // Every input's first dim is the batch: the same size, and the same symbol where the model names it.
      if (x.shape[0] != n_ || dim0_name(v) != dim0_name(g_.inputs[0])) {
        return no("input '" + x.name + "' does not have the batch as its first dim");
      }
      batched_[v] = true;
    }
    if (n_ < 1) return no("the batch is empty");
    for (const Node& node : g_.nodes) {
      const bool any = std::any_of(node.inputs.begin(), node.inputs.end(), [&](int v) { return batched(v); });
      if (!any) continue;  // computed from constants alone
      QD_RETURN_IF_ERROR(check(node).prefix("node '" + node.name + "' (" + op_name(node.op) + ")"));
      for (int o : node.outputs) {
        if (o < 0) continue;
        const Value& y = g_.values[o];
        if (!y.has_shape || y.shape.empty() || y.shape[0] != n_) {
          return no("node '" + node.name + "' (" + op_name(node.op) + "): output '" + y.name +
                    "' does not keep the batch as its first dim");
        }
        batched_[o] = true;
      }
    }
    for (int v : g_.outputs) {
      if (!batched(v)) return no("output '" + g_.values[v].name + "' is not computed per batch item");
    }
    return Status::ok();
  }

 private:
  static Status no(const std::string& why) { return unsupported(why); }
  bool batched(int v) const { return v >= 0 && batched_[v]; }
  int rank(int v) const { return static_cast<int>(g_.values[v].shape.size()); }
  const Shape& shape(int v) const { return g_.values[v].shape; }
  int in(const Node& n, size_t i) const { return i < n.inputs.size() ? n.inputs[i] : -1; }

  int64_t attr_int(const Node& n, const char* name, int64_t def) const {
    auto v = n.attrs.get_int(name, def);
    return v ? *v : def;
  }
  // A constant int64 input's values, or nullopt where it is not a constant.
  std::optional<std::vector<int64_t>> const_ints(int v) const {
    const Tensor* t = g_.constant(v);
    if (!t) return std::nullopt;
    std::vector<int64_t> out;
    for (int64_t i = 0; i < t->numel(); ++i) out.push_back(t->get_i64(i));
    return out;
  }
  // Axes from an attribute (older opsets) or a constant input; nullopt where neither is known.
  std::optional<std::vector<int64_t>> axes_of(const Node& n, size_t input, const char* attr = "axes") const {
    if (n.attrs.has(attr)) {
      auto a = n.attrs.get_ints(attr);
      if (a) return *a;
      return std::nullopt;
    }
    const int v = in(n, input);
    if (v < 0) return std::vector<int64_t>{};
    return const_ints(v);
  }
  static bool has_axis0(const std::vector<int64_t>& axes, int r) {
    return std::any_of(axes.begin(), axes.end(), [&](int64_t a) { return a == 0 || a == -r; });
  }
  Status axis_not0(int64_t axis, int r, const char* what) const {
    if (axis == 0 || axis == -r) return no(std::string(what) + " along the batch axis");
    return Status::ok();
  }

  // Broadcasting ops: every batched operand spans the output's rank with the batch first; every other operand
  // broadcasts along the batch (fewer dims, or a first dim of 1).
  Status broadcast(const Node& n) const {
    const int r = rank(n.outputs[0]);
    for (int v : n.inputs) {
      if (v < 0) continue;
      if (batched(v) ? rank(v) != r : r > 0 && rank(v) == r && shape(v)[0] != 1) {
        return no("operand '" + g_.values[v].name + "' does not broadcast along the batch");
      }
    }
    return Status::ok();
  }
  // Ops whose batched input is input 0 and whose other inputs are parameters (weights, scales, sizes).
  Status first_only(const Node& n) const {
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (batched(n.inputs[i])) return no("input " + std::to_string(i) + " depends on the batch");
    }
    if (!batched(in(n, 0))) return no("its parameters depend on the batch");
    return Status::ok();
  }

  Status check(const Node& n) const {
    if (n.outputs.empty() || n.outputs[0] < 0) return no("no first output");
    const int x = in(n, 0);
    const int r = x >= 0 ? rank(x) : 0;
    // The rule per op is its `batch` trait in ops.def (ops/op_traits.h).
    switch (op_traits(n.op).batch) {
      case BatchRule::kBroadcast:
        return broadcast(n);
      case BatchRule::kPerItem:
        if (n.op == OpType::BatchNormalization && attr_int(n, "training_mode", 0) != 0) {
          return no("training-mode statistics over the batch");
        }
        return first_only(n);
      case BatchRule::kPerItemScale: {
        QD_RETURN_IF_ERROR(first_only(n));
        // A per-axis scale along the batch axis (or blocks of it) would differ between the parts.
        const int s = in(n, 1);
        if (s >= 0 && rank(s) >= 1 && shape(s)[0] > 1) {
          const int64_t axis = attr_int(n, "axis", 1);
          if (rank(s) == r || axis == 0 || axis == -r) return no("a scale per batch index");
        }
        return Status::ok();
      }
      case BatchRule::kNormAxis: {
        QD_RETURN_IF_ERROR(first_only(n));
        // LayerNormalization's axis defaults to -1; the softmax family's to 1 before opset 13, then -1.
        const int64_t def = n.op == OpType::LayerNormalization || n.opset >= 13 ? -1 : 1;
        return axis_not0(attr_int(n, "axis", def), r, "normalization");
      }
      case BatchRule::kStatsAxes: {
        QD_RETURN_IF_ERROR(first_only(n));
        auto axes = n.attrs.get_ints("axes", std::vector<int64_t>{0, 2, 3});
        if (!axes || has_axis0(*axes, r)) return no("statistics over the batch");
        return Status::ok();
      }
      case BatchRule::kSearchAxis:  // TopK's axis defaults to -1, ArgMax's and ArgMin's to 0
        QD_RETURN_IF_ERROR(first_only(n));
        return axis_not0(attr_int(n, "axis", n.op == OpType::TopK ? -1 : 0), r, "a search");
      case BatchRule::kRunningSum: {
        QD_RETURN_IF_ERROR(first_only(n));
        auto axis = const_ints(in(n, 1));
        if (!axis || axis->size() != 1) return no("an axis that is not a constant");
        return axis_not0((*axis)[0], r, "a running sum");
      }
      case BatchRule::kReduce: {
        QD_RETURN_IF_ERROR(first_only(n));
        auto axes = axes_of(n, 1);
        if (!axes) return no("axes that are not constants");
        if (axes->empty() && attr_int(n, "noop_with_empty_axes", 0) == 0) return no("a reduction over all dims");
        if (has_axis0(*axes, r)) return no("a reduction over the batch");
        return Status::ok();
      }
      case BatchRule::kTriangle:
        QD_RETURN_IF_ERROR(first_only(n));
        if (r < 3) return no("a triangle that spans the batch");
        return Status::ok();
      // Shape changes: the batch stays the first dim of input and output (checked for every output after).
      case BatchRule::kKeepsBatchDim:
        return first_only(n);
      case BatchRule::kPad: {
        QD_RETURN_IF_ERROR(first_only(n));
        auto pads = n.attrs.has("pads") ? axes_of(n, 1, "pads") : const_ints(in(n, 1));
        if (!pads || in(n, 3) >= 0 || pads->size() != static_cast<size_t>(2 * r) || (*pads)[0] != 0 ||
            (*pads)[r] != 0) {
          return no("padding along the batch axis (or pads that are not constants)");
        }
        return Status::ok();
      }
      case BatchRule::kSqueeze: {
        QD_RETURN_IF_ERROR(first_only(n));
        auto axes = axes_of(n, 1);
        if (!axes || (axes->empty() && n.op == OpType::Unsqueeze)) return no("axes that are not constants");
        const int rr = n.op == OpType::Squeeze ? r : rank(n.outputs[0]);
        if (axes->empty() ? shape(x)[0] == 1 : has_axis0(*axes, rr)) return no("the batch axis squeezed or moved");
        return Status::ok();
      }
      case BatchRule::kPermute: {
        QD_RETURN_IF_ERROR(first_only(n));
        auto perm = n.attrs.get_ints("perm", std::vector<int64_t>{});
        if (!perm || perm->empty() || (*perm)[0] != 0) return no("the batch axis moved");
        return Status::ok();
      }
      case BatchRule::kTile: {
        QD_RETURN_IF_ERROR(first_only(n));
        auto reps = const_ints(in(n, 1));
        if (!reps || reps->empty() || (*reps)[0] != 1) return no("repeats along the batch axis");
        return Status::ok();
      }
      case BatchRule::kConcat:
        for (int v : n.inputs) {
          if (v >= 0 && !batched(v)) return no("an operand that is not per batch item");
        }
        return axis_not0(attr_int(n, "axis", 0), r, "a concatenation");
      case BatchRule::kSplit:
        QD_RETURN_IF_ERROR(first_only(n));
        return axis_not0(attr_int(n, "axis", 0), r, "a split");
      case BatchRule::kSlice: {
        QD_RETURN_IF_ERROR(first_only(n));
        // Opset 1-9: axes and starts as attributes; later: inputs 3 and 1. Axes default to 0 .. len(starts) - 1.
        const bool attrs = n.opset < 10;
        std::optional<std::vector<int64_t>> axes = attrs ? axes_of(n, 99) : (in(n, 3) >= 0 ? const_ints(in(n, 3))
                                                                                               : std::nullopt);
        if (axes && axes->empty()) axes.reset();
        if (!axes && !(attrs ? n.attrs.has("axes") : in(n, 3) >= 0)) {
          auto starts = attrs ? axes_of(n, 99, "starts") : const_ints(in(n, 1));
          if (starts) {
            axes = std::vector<int64_t>();
            for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
          }
        }
        if (!axes) return no("axes or starts that are not constants");
        if (has_axis0(*axes, r)) return no("a slice along the batch axis");
        return Status::ok();
      }
      case BatchRule::kGather: {
        const int64_t axis = attr_int(n, "axis", 0);
        if (batched(x) && !batched(in(n, 1))) return axis_not0(axis, r, "a gather");
        // An embedding: items of a batched index tensor look up a constant table.
        if (!batched(x) && (axis == 0 || axis == -r)) return Status::ok();
        return no("a gather whose data and indices both depend on the batch");
      }
      case BatchRule::kIndexElements:
        for (int v : n.inputs) {
          if (v >= 0 && (!batched(v) || rank(v) != r)) return no("an operand that is not per batch item");
        }
        return axis_not0(attr_int(n, "axis", 0), r, "indexing");
      case BatchRule::kGemm:
        QD_RETURN_IF_ERROR(first_only(n));
        if (attr_int(n, "transA", 0) != 0) return no("A transposed (the batch as its columns)");
        if (in(n, 2) >= 0 && rank(in(n, 2)) == 2 && shape(in(n, 2))[0] != 1) return no("C spans the batch");
        return Status::ok();
      case BatchRule::kMatMul: {
        const int b = in(n, 1), out_r = rank(n.outputs[0]);
        if (batched(x) && batched(b)) {
          if (r < 3 || r != out_r || rank(b) != out_r) return no("both matrices depend on the batch");
          return Status::ok();
        }
        if (batched(x)) {  // rows of A, or A's leading dims, per item; B a weight
          if (r != out_r || (rank(b) == out_r && r >= 3 && shape(b)[0] != 1)) return no("B spans the batch");
          return Status::ok();
        }
        if (rank(b) < 3 || rank(b) != out_r || (r == out_r && shape(x)[0] != 1)) {
          return no("the batch among B's rows, or A spanning it");
        }
        return Status::ok();
      }
      case BatchRule::kNone:
        break;
    }
    return no("not known to keep batch items apart");
  }

  const Graph& g_;
  std::vector<bool> batched_;
  int64_t n_ = -1;
};

}  // namespace

Status check_batch_split(const Graph& g) { return BatchCheck(g).run(); }

}  // namespace qd
