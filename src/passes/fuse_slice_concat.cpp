// fuse_slice_concat: a Concat along the last axis whose inputs are each a Slice of one tensor's last axis (step 1,
// every other dim whole), directly or through elementwise steps with constants, becomes one SliceConcat. That is a
// detector head's decode described by its shape: YOLO's Concat(xy, wh, conf) over the columns of one sigmoid, each
// column group through its own arithmetic (Mul 2, Sub 0.5, Add grid, Mul stride; Mul 2, Pow 2, Mul anchors). A target
// then runs the whole decode as one pass over the source, writing each column once. Which ones it runs that way
// depends on its kernels (segments, steps, constants): `fits` says it.
#include <algorithm>

#include "ops/fused.h"
#include "ops/op_geometry.h"
#include "passes/graph_uses.h"
#include "passes/passes.h"

namespace qd {

namespace {

constexpr size_t kMaxSteps = 64;  // per segment; slice_concat_attrs' bound

// The segment of a Concat input v: back from v through steps that only the next one reads, to a Slice of src's last
// axis; false when v is not such a segment. `nodes` gets the Slice then the steps in order.
Expected<bool> segment_of(const Graph& g, const GraphUses& uses, int v, int* src, ops::SliceConcatSegment* seg,
                          std::vector<int>* nodes) {
  std::vector<ops::ElementwiseStep> steps;
  std::vector<int> chain;
  int x = v;
  while (g.values[x].producer >= 0 && g.nodes[g.values[x].producer].op != OpType::Slice && steps.size() < kMaxSteps) {
    const int p = g.values[x].producer;
    const Node& e = g.nodes[p];
    int in = -1;
    for (int u : e.inputs) {
      if (u >= 0 && !g.is_constant(u)) in = in < 0 ? u : -2;
    }
    ops::ElementwiseStep st;
    if (in < 0 || uses.sole_reader(in) != p || !QD_TRY(ops::elementwise_step(g, e, in, &st))) return false;
    steps.insert(steps.begin(), st);
    chain.insert(chain.begin(), p);
    x = in;
  }
  const int sl = g.values[x].producer;
  if (sl < 0 || g.nodes[sl].op != OpType::Slice || g.nodes[sl].outputs.size() != 1) return false;
  const Node& sn = g.nodes[sl];
  const int s = sn.inputs[0];
  const Shape& xs = g.values[s].shape;
  if (s < 0 || (*src >= 0 && *src != s) || g.values[s].dtype != DType::kFloat32 || xs.empty() ||
      xs.size() != g.values[v].shape.size()) {
    return false;
  }
  auto geo = ops::slice_geom(infer_ctx_for(g, sn));
  if (!geo) return false;
  const size_t last = xs.size() - 1;
  for (size_t d = 0; d < last; ++d) {
    if (geo->out[d] != xs[d] || geo->step[d] != 1) return false;
  }
  if (geo->step[last] != 1 || geo->out[last] <= 0) return false;
  *src = s;
  seg->start = geo->start[last];
  seg->len = geo->out[last];
  seg->steps = std::move(steps);
  nodes->push_back(sl);
  nodes->insert(nodes->end(), chain.begin(), chain.end());
  return true;
}

}  // namespace

Expected<int> fuse_slice_concat(Graph& g, const SliceConcatRule& fits) {
  if (!fits) return 0;
  const GraphUses uses(g);
  std::vector<bool> gone(g.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& cat = g.nodes[i];
    if (cat.op != OpType::Concat || cat.outputs.size() != 1 || cat.outputs[0] < 0 || cat.inputs.empty()) continue;
    const Shape& os = g.values[cat.outputs[0]].shape;
    int64_t axis = QD_TRY(cat.attrs.get_int("axis", 0));
    if (axis < 0) axis += static_cast<int64_t>(os.size());
    if (g.values[cat.outputs[0]].dtype != DType::kFloat32 || os.empty() ||
        axis != static_cast<int64_t>(os.size()) - 1) {
      continue;
    }
    Node f;
    f.name = cat.name;
    f.op = OpType::SliceConcat;
    f.opset = cat.opset;
    f.outputs = cat.outputs;
    f.inputs = {-1};
    ops::SliceConcatAttrs a;
    std::vector<int> folded;
    bool ok = true;
    for (int v : cat.inputs) {
      ops::SliceConcatSegment seg;
      ok = v >= 0 && uses.sole_reader(v) == static_cast<int>(i) &&
           QD_TRY(segment_of(g, uses, v, &f.inputs[0], &seg, &folded));
      if (!ok) break;
      for (ops::ElementwiseStep& st : seg.steps) {  // the constant's value id becomes the fused node's input index
        if (st.operand < 0) continue;
        auto at = std::find(f.inputs.begin() + 1, f.inputs.end(), st.operand);
        if (at == f.inputs.end()) at = f.inputs.insert(at, st.operand);
        st.operand = static_cast<int>(at - f.inputs.begin());
      }
      a.segments.push_back(std::move(seg));
    }
    if (!ok) continue;
    for (int k : folded) a.fused.push_back(g.nodes[k].name);
    ops::set_slice_concat_attrs(f, a);
    if (!fits(g, f)) continue;
    for (int k : folded) gone[k] = true;
    g.nodes[i] = std::move(f);
    ++fused;
  }
  if (fused) drop_nodes(g, gone);
  return fused;
}

}  // namespace qd
