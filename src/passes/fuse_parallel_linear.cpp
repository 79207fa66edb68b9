// fuse_parallel_linear: two linear layers reading one tensor become one with concatenated weights, and two Slices
// of its output's last axis (the channel axis for 1x1 convs) give back the two results under their old names.
// The GPU then runs one GEMM instead of two and reads the input once; a plugin that accepts row-strided inputs
// (DCNv4's value and offsets) reads the slices in place, so they cost no copy (the DCNv4 seed's fused-input variant).
#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "ops/op.h"
#include "ops/plugin_registry.h"
#include "passes/passes.h"

namespace qd {

namespace {

// One linear layer: the node, its constant weight and optional constant bias (a following Add for MatMul), and the
// value holding its result.
struct Linear {
  int node = -1;
  int add = -1;  // MatMul's bias Add (-1: none)
  const Tensor* w = nullptr;
  const Tensor* b = nullptr;
  int out = -1;
  int64_t k = 0;  // output features
};

bool float_weights(DType t) { return t == DType::kFloat32 || t == DType::kFloat16; }

// x (rows) concatenated with y along their last axis, both [rows, cols] row-major; or along the first axis.
Tensor concat2(const Tensor& a, const Tensor& b, const Shape& shape, bool last_axis) {
  Tensor t = *Tensor::make(a.dtype(), shape);
  const size_t e = dtype_size(a.dtype());
  auto* dst = static_cast<char*>(t.raw());
  const auto* pa = static_cast<const char*>(a.raw());
  const auto* pb = static_cast<const char*>(b.raw());
  if (!last_axis) {
    std::memcpy(dst, pa, a.nbytes());
    std::memcpy(dst + a.nbytes(), pb, b.nbytes());
    return t;
  }
  const int64_t ka = a.shape().back(), kb = b.shape().back(), rows = ka ? a.numel() / ka : 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + (r * (ka + kb)) * e, pa + r * ka * e, ka * e);
    std::memcpy(dst + (r * (ka + kb) + ka) * e, pb + r * kb * e, kb * e);
  }
  return t;
}

Tensor zeros(DType t, int64_t n) { return *Tensor::make(t, {n}); }

// An attribute, or a value that disqualifies the node when it has the wrong type (the graph passed inference, so
// this does not happen; the pass must not crash if it does).
int64_t int_attr(const Node& n, const char* name, int64_t def) {
  auto v = n.attrs.get_int(name, def);
  return v ? *v : -999;
}
float float_attr(const Node& n, const char* name, float def) {
  auto v = n.attrs.get_float(name, def);
  return v ? *v : -999.f;
}

class Fuser {
 public:
  Fuser(Graph& g, const FuseParallelLinearOptions& opt) : g_(g), opt_(opt), uses_(g.use_counts()) {
    consumers_.assign(g.values.size(), {});
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int v : g.nodes[i].inputs) {
        if (v >= 0) consumers_[v].push_back(static_cast<int>(i));
      }
    }
    is_output_.assign(g.values.size(), false);
    for (int o : g.outputs) is_output_[o] = true;
  }

  Expected<int> run() {
    int fused = 0;
    std::vector<bool> used(g_.nodes.size(), false);
    const size_t original = g_.values.size();  // fusing adds values (weights, slices) after these
    for (size_t x = 0; x < original; ++x) {
      std::vector<Linear> ls;
      for (int c : consumers_[x]) {
        if (used[c]) continue;
        auto l = linear(c, static_cast<int>(x));
        if (l) ls.push_back(*l);
      }
      // Pairs in graph order, each node in one pair at most.
      for (size_t i = 0; i + 1 < ls.size(); i += 2) {
        if (!compatible(ls[i], ls[i + 1])) continue;
        if (!opt_.all && !(read_by_plugins(ls[i].out) && read_by_plugins(ls[i + 1].out))) continue;
        QD_RETURN_IF_ERROR(fuse(static_cast<int>(x), ls[i], ls[i + 1]));
        used[ls[i].node] = used[ls[i + 1].node] = true;
        ++fused;
      }
    }
    if (!fused) return 0;
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!dropped_.count(static_cast<int>(i))) kept.push_back(std::move(g_.nodes[i]));
    }
    for (Node& n : added_) kept.push_back(std::move(n));
    g_.nodes = std::move(kept);
    g_.relink();
    QD_RETURN_IF_ERROR(g_.topo_sort());
    QD_RETURN_IF_ERROR(infer_shapes(g_));
    return fused;
  }

 private:
  std::optional<Linear> linear(int c, int x) const {
    const Node& n = g_.nodes[c];
    Linear l;
    l.node = c;
    const int out = n.outputs.empty() ? -1 : n.outputs[0];
    if (out < 0 || !g_.values[out].has_shape || n.inputs.empty() || n.inputs[0] != x) return std::nullopt;
    if (n.op == OpType::MatMul && n.inputs.size() == 2) {
      l.w = g_.constant(n.inputs[1]);
      if (!l.w || l.w->shape().size() != 2 || !float_weights(l.w->dtype())) return std::nullopt;
      l.k = l.w->shape()[1];
      l.out = out;
      // A bias Add of a constant [K] read only here (what exporters write for a Linear on 3-d input).
      if (uses_[out] == 1 && !is_output_[out] && consumers_[out].size() == 1) {
        const Node& a = g_.nodes[consumers_[out][0]];
        if (a.op == OpType::Add && a.inputs.size() == 2 && a.outputs.size() == 1) {
          const int other = a.inputs[0] == out ? a.inputs[1] : a.inputs[0];
          const Tensor* b = g_.constant(other);
          if (b && b->shape() == Shape{l.k} && b->dtype() == l.w->dtype()) {
            l.add = consumers_[out][0];
            l.b = b;
            l.out = a.outputs[0];
          }
        }
      }
      return l;
    }
    if (n.op == OpType::Gemm) {
      if (int_attr(n, "transA", 0) != 0 || float_attr(n, "alpha", 1.f) != 1.f ||
          float_attr(n, "beta", 1.f) != 1.f) {
        return std::nullopt;
      }
      l.w = n.inputs.size() > 1 ? g_.constant(n.inputs[1]) : nullptr;
      if (!l.w || l.w->shape().size() != 2 || !float_weights(l.w->dtype())) return std::nullopt;
      const int64_t trans_b = int_attr(n, "transB", 0);
      if (trans_b != 0 && trans_b != 1) return std::nullopt;
      const bool tb = trans_b != 0;
      l.k = tb ? l.w->shape()[0] : l.w->shape()[1];
      if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
        l.b = g_.constant(n.inputs[2]);
        if (!l.b || l.b->shape() != Shape{l.k}) return std::nullopt;
      }
      l.out = out;
      return l;
    }
    if (n.op == OpType::Conv && opt_.convs) {
      l.w = n.inputs.size() > 1 ? g_.constant(n.inputs[1]) : nullptr;
      if (!l.w || l.w->shape().size() != 4 || l.w->shape()[2] != 1 || l.w->shape()[3] != 1) return std::nullopt;
      if (int_attr(n, "group", 1) != 1) return std::nullopt;
      for (const char* a : {"strides", "dilations", "pads"}) {
        const auto values = n.attrs.get_ints(a, std::vector<int64_t>{});
        if (!values) return std::nullopt;
        for (int64_t v : *values) {
          if (v != (a[0] == 'p' ? 0 : 1)) return std::nullopt;
        }
      }
      const auto pad = n.attrs.get_string("auto_pad", std::string("NOTSET"));
      if (!pad || *pad != "NOTSET") return std::nullopt;
      l.k = l.w->shape()[0];
      if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
        l.b = g_.constant(n.inputs[2]);
        if (!l.b || l.b->shape() != Shape{l.k}) return std::nullopt;
      }
      l.out = out;
      return l;
    }
    return std::nullopt;
  }

  bool compatible(const Linear& a, const Linear& b) const {
    const Node &na = g_.nodes[a.node], &nb = g_.nodes[b.node];
    if (na.op != nb.op || a.w->dtype() != b.w->dtype()) return false;
    if (na.op == OpType::Gemm && int_attr(na, "transB", 0) != int_attr(nb, "transB", 0)) return false;
    if (na.op == OpType::Conv && a.w->shape()[1] != b.w->shape()[1]) return false;
    // The input-feature axis of the weights must agree.
    const int in_axis = na.op == OpType::Gemm && int_attr(na, "transB", 0) ? 1 : 0;
    if (na.op != OpType::Conv && a.w->shape()[in_axis] != b.w->shape()[in_axis]) return false;
    return float_weights(g_.values[a.out].dtype) && g_.values[a.out].dtype == g_.values[b.out].dtype;
  }

  // Every reader of v (through shape-only Reshapes) is a plugin op: the slices will be read in place.
  bool read_by_plugins(int v) const {
    if (is_output_[v] || consumers_[v].empty()) return false;
    for (int c : consumers_[v]) {
      const Node& n = g_.nodes[c];
      if (is_plugin_op(n.op)) continue;
      if (n.op == OpType::Reshape && n.inputs[0] == v && read_by_plugins(n.outputs[0])) continue;
      return false;
    }
    return true;
  }

  int constant(const std::string& name, Tensor t) { return g_.add_constant(name, std::move(t)); }

  std::string fresh(const std::string& base) const {
    std::string name = base;
    for (int i = 1; g_.find_value(name) >= 0; ++i) name = base + "_" + std::to_string(i);
    return name;
  }

  Status fuse(int x, const Linear& a, const Linear& b) {
    const Node na = g_.nodes[a.node];
    const Node nb = g_.nodes[b.node];
    const std::string name = na.name + "+" + nb.name;
    const bool gemm_tb = na.op == OpType::Gemm && int_attr(na, "transB", 0) != 0;
    // Weights joined along their output-feature axis: columns of MatMul's [C, K] and Gemm's [C, K], rows of a
    // transposed Gemm's [K, C] and of a conv's [K, C, 1, 1].
    const bool rows = gemm_tb || na.op == OpType::Conv;
    Shape ws = a.w->shape();
    ws[rows ? 0 : 1] = a.k + b.k;
    const int w = constant(fresh(name + ".weight"), concat2(*a.w, *b.w, ws, !rows));
    int bias = -1;
    if (a.b || b.b) {
      const DType t = a.w->dtype();
      const Tensor ba = a.b ? *a.b : zeros(t, a.k), bb = b.b ? *b.b : zeros(t, b.k);
      bias = constant(fresh(name + ".bias"), concat2(ba, bb, {a.k + b.k}, false));
    }
    Node f;
    f.name = name;
    f.op = na.op;
    f.opset = na.opset;
    f.attrs = na.attrs;
    f.inputs = {x, w};
    const int fused = g_.add_value(fresh(name + ".out"));
    g_.values[fused].dtype = g_.values[a.out].dtype;
    if (na.op == OpType::MatMul) {
      f.outputs = {fused};
      added_.push_back(f);
      if (bias >= 0) {
        const int biased = g_.add_value(fresh(name + ".biased"));
        g_.values[biased].dtype = g_.values[a.out].dtype;
        Node add;
        add.name = name + ".bias_add";
        add.op = OpType::Add;
        add.opset = g_.nodes[a.add >= 0 ? a.add : b.add].opset;
        add.inputs = {fused, bias};
        add.outputs = {biased};
        added_.push_back(add);
        slice_source_ = biased;
      } else {
        slice_source_ = fused;
      }
    } else {
      if (bias >= 0) f.inputs.push_back(bias);
      f.outputs = {fused};
      added_.push_back(f);
      slice_source_ = fused;
    }
    const int rank = static_cast<int>(g_.values[a.out].shape.size());
    const int64_t axis = na.op == OpType::Conv ? 1 : rank - 1;
    add_slice(name + ".slice0", 0, a.k, axis, a.out);
    add_slice(name + ".slice1", a.k, a.k + b.k, axis, b.out);
    for (const Linear* l : {&a, &b}) {
      dropped_.insert(l->node);
      if (l->add >= 0) dropped_.insert(l->add);
    }
    return Status::ok();
  }

  void add_slice(const std::string& name, int64_t start, int64_t end, int64_t axis, int out) {
    Node s;
    s.name = name;
    s.op = OpType::Slice;
    s.opset = 13;  // starts, ends, axes, steps as inputs
    s.inputs = {slice_source_, constant(fresh(name + ".starts"), Tensor::from_i64({start})),
                constant(fresh(name + ".ends"), Tensor::from_i64({end})),
                constant(fresh(name + ".axes"), Tensor::from_i64({axis})),
                constant(fresh(name + ".steps"), Tensor::from_i64({1}))};
    s.outputs = {out};
    added_.push_back(s);
  }

  Graph& g_;
  const FuseParallelLinearOptions& opt_;
  std::vector<int> uses_;
  std::vector<std::vector<int>> consumers_;
  std::vector<bool> is_output_;
  std::set<int> dropped_;
  std::vector<Node> added_;
  int slice_source_ = -1;
};

}  // namespace

Expected<int> fuse_parallel_linear(Graph& g, const FuseParallelLinearOptions& opt) { return Fuser(g, opt).run(); }

}  // namespace qd
