// fuse_gelu: GELU as exporters before ONNX opset 20 write it, x * 0.5 * (1 + Erf(x / sqrt(2))) in five nodes, becomes
// one Gelu node (opset 20's op, exact form). Every backend then makes one pass over the tensor instead of five (a
// FlashInternImage MLP's hidden layer is its largest tensor).
#include <cmath>

#include "passes/graph_uses.h"
#include "passes/passes.h"

namespace qd {

namespace {

// The value of a constant scalar (any shape of one element) of a float type, or NaN.
float scalar(const Graph& g, int v) {
  const Tensor* t = v >= 0 ? g.constant(v) : nullptr;
  if (!t || t->numel() != 1) return NAN;
  if (t->dtype() == DType::kFloat32) return t->data<float>()[0];
  if (t->dtype() == DType::kFloat64) return static_cast<float>(t->data<double>()[0]);
  return NAN;
}

bool near(float a, float b) { return std::fabs(a - b) <= 1e-5f * std::fabs(b); }

// Node n is `op` with one output and two inputs, one of them v (any position unless `first`); the other one in *other.
bool binary_with(const Node& n, OpType op, int v, int* other, bool first = false) {
  if (n.op != op || n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  if (n.inputs[0] == v) {
    *other = n.inputs[1];
  } else if (n.inputs[1] == v && !first) {
    *other = n.inputs[0];
  } else {
    return false;
  }
  return *other != v;
}

}  // namespace

Expected<int> fuse_gelu(Graph& g) {
  const GraphUses uses(g);
  const std::vector<int> producer = [&] {
    std::vector<int> p(g.values.size(), -1);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int o : g.nodes[i].outputs) {
        if (o >= 0) p[o] = static_cast<int>(i);
      }
    }
    return p;
  }();
  // The sole reader of node i's output, or -1.
  const auto next = [&](int i) { return i < 0 ? -1 : uses.sole_reader(g.nodes[i].outputs[0]); };
  const auto out = [&](int i) { return g.nodes[i].outputs[0]; };
  std::vector<bool> gone(g.nodes.size(), false);
  int fused = 0;
  for (size_t ie = 0; ie < g.nodes.size(); ++ie) {
    const Node& e = g.nodes[ie];
    if (e.op != OpType::Erf || e.inputs.size() != 1 || e.inputs[0] < 0 || e.outputs.size() != 1) continue;
    // x / sqrt(2) or x * (1 / sqrt(2)), read by the Erf alone.
    const int id = producer[e.inputs[0]];
    if (id < 0 || uses.sole_reader(e.inputs[0]) != static_cast<int>(ie) || g.nodes[id].inputs.size() != 2) continue;
    const Node& d = g.nodes[id];
    int x = -1, c = -1;
    if (d.op == OpType::Div && !g.is_constant(d.inputs[0]) && near(scalar(g, d.inputs[1]), std::sqrt(2.f))) {
      x = d.inputs[0];
    } else if (d.op == OpType::Mul) {
      for (int k = 0; k < 2 && x < 0; ++k) {
        if (!g.is_constant(d.inputs[k]) && near(scalar(g, d.inputs[1 - k]), std::sqrt(0.5f))) x = d.inputs[k];
      }
    }
    if (x < 0 || g.values[x].dtype != DType::kFloat32) continue;
    // 1 + erf.
    const int ia = next(static_cast<int>(ie));
    if (ia < 0 || !binary_with(g.nodes[ia], OpType::Add, out(ie), &c) || !near(scalar(g, c), 1.f)) continue;
    // Then the products with x and 0.5, in the orders exporters write them:
    //   (x * (1 + erf)) * 0.5,  x * ((1 + erf) * 0.5),  (x * 0.5) * (1 + erf).
    const int im = next(ia);
    if (im < 0) continue;
    std::vector<int> chain = {id, static_cast<int>(ie), ia, im};
    int last = -1, other = -1;
    if (binary_with(g.nodes[im], OpType::Mul, out(ia), &other) && other == x) {
      const int f = next(im);
      if (f >= 0 && binary_with(g.nodes[f], OpType::Mul, out(im), &c) && near(scalar(g, c), 0.5f)) last = f;
    } else if (binary_with(g.nodes[im], OpType::Mul, out(ia), &other) && near(scalar(g, other), 0.5f)) {
      const int f = next(im);
      if (f >= 0 && binary_with(g.nodes[f], OpType::Mul, out(im), &c) && c == x) last = f;
    } else if (binary_with(g.nodes[im], OpType::Mul, out(ia), &other) && other >= 0 && producer[other] >= 0) {
      const int ih = producer[other];  // x * 0.5, read by this Mul alone
      if (uses.sole_reader(other) == im && binary_with(g.nodes[ih], OpType::Mul, x, &c) && near(scalar(g, c), 0.5f)) {
        chain.push_back(ih);
        last = im;
      }
    }
    if (last < 0) continue;
    if (last != im) chain.push_back(last);
    bool taken = false;
    for (int n : chain) taken = taken || gone[n];
    if (taken) continue;
    // The last node becomes the Gelu (it comes after x's producer); the others go.
    Node& gelu = g.nodes[last];
    gelu.op = OpType::Gelu;
    gelu.inputs = {x};
    gelu.attrs = {};
    gelu.attrs.set("approximate", std::string("none"));
    for (int n : chain) gone[n] = n != last;
    ++fused;
  }
  if (fused) drop_nodes(g, gone);
  return fused;
}

}  // namespace qd
