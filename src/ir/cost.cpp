#include "ir/cost.h"

#include <algorithm>

#include "ops/op_geometry.h"
#include "ops/op_traits.h"
#include "ops/plugin_registry.h"

namespace qd {

namespace {
const Shape& shape_of(const Graph& g, int v) { return g.values[v].shape; }
// a * b, saturating at INT64_MAX (dims are never negative here).
int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
// The product of dims [from, end) of s, saturating.
int64_t dims_product(const Shape& s, size_t from) {
  int64_t k = 1;
  for (size_t i = from; i < s.size(); ++i) k = mul_sat(k, s[i]);
  return k;
}
}  // namespace

int64_t node_macs(const Graph& g, const Node& n) {
  for (int v : n.inputs) {
    if (v >= 0 && !g.values[v].has_shape) return 0;
  }
  if (const PluginOp* p = plugin_op(n.op)) {  // a plugin op counts its own, when it declares how
    if (!p->def.macs) return 0;
    std::vector<qdeploy::Dims> in;
    for (int v : n.inputs) {
      if (v >= 0) in.push_back(g.values[v].shape);
    }
    auto attrs = resolve_plugin_attrs(p->def, n.attrs);
    return attrs ? p->def.macs(*attrs, in) : 0;
  }
  switch (op_traits(n.op).macs) {  // the op's `macs` trait in ops.def
    case MacsRule::kConv: {
      // out elements x (input channels per group x kernel window)
      return mul_sat(dims_product(shape_of(g, n.outputs[0]), 0), dims_product(shape_of(g, n.inputs[1]), 1));
    }
    case MacsRule::kGemm: {
      const Shape& a = shape_of(g, n.inputs[0]);
      const Shape& y = shape_of(g, n.outputs[0]);
      const bool trans_a = n.attrs.get_int("transA", 0).has_value() && *n.attrs.get_int("transA", 0) != 0;
      return mul_sat(dims_product(y, 0), a.size() == 2 ? a[trans_a ? 0 : 1] : 0);
    }
    case MacsRule::kMatMul: {
      const Shape& a = shape_of(g, n.inputs[0]);
      const Shape& y = shape_of(g, n.outputs[0]);
      return a.empty() ? 0 : mul_sat(dims_product(y, 0), a.back());
    }
    case MacsRule::kConvTranspose: {
      // every input element is multiplied by (output channels per group x kernel window)
      return mul_sat(dims_product(shape_of(g, n.inputs[0]), 0), dims_product(shape_of(g, n.inputs[1]), 1));
    }
    case MacsRule::kNone:
      break;
  }
  return 0;
}

int64_t node_work(const Graph& g, const Node& n) {
  int64_t work = node_macs(g, n);
  if (n.op == OpType::Einsum) {  // its equation decides: no MAC trait
    std::vector<Shape> in;
    for (int v : n.inputs) {
      if (v < 0 || !g.values[v].has_shape) return work;
      in.push_back(g.values[v].shape);
    }
    const auto w = ops::einsum_work(n, in);
    return !w ? work : *w >= 9.2e18 ? INT64_MAX : add_macs(work, static_cast<int64_t>(*w));
  }
  if (n.outputs.empty() || n.outputs[0] < 0 || !g.values[n.outputs[0]].has_shape) return work;
  auto k = n.attrs.get_ints("kernel_shape", std::vector<int64_t>{});
  if (!k || k->empty()) return work;
  int64_t window = 1;
  for (int64_t d : *k) window = mul_sat(window, std::max<int64_t>(d, 0));
  return add_macs(work, mul_sat(window, dims_product(shape_of(g, n.outputs[0]), 0)));
}

int64_t parameter_count(const Graph& g) {
  int64_t n = 0;
  for (const auto& [v, t] : g.constants) {
    if (is_float(t.dtype()) || t.dtype() == DType::kInt8) n += t.numel();
  }
  return n;
}

}  // namespace qd
