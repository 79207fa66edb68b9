// Placement and layouts, decided from a target's answers (plan/target.h) before any layer is made: each node runs in
// the target's own formats (the fast layout: channels-last fp16 or int8 tensor-core layers on CUDA) or in the ONNX
// form (NCHW, the ONNX dtypes: generic kernels). A value read in another layout than its producer writes it in is
// reformatted once per layout; the plan lists those reformats. The builder lowers each node where the plan put it,
// and `qdeploy inspect` shows the plan.
#pragma once

#include <functional>
#include <vector>

#include "ir/graph.h"
#include "plan/target.h"

namespace qd {

enum class Layout : uint8_t { kOnnx, kFast };
const char* layout_name(Layout l);

struct LayoutPlan {
  std::vector<Layout> nodes;   // per node
  std::vector<Layout> values;  // per value: the layout its producer writes (graph inputs and constants: kOnnx)
  struct Reformat {
    int value = -1;
    Layout to = Layout::kFast;
    std::vector<int> readers;  // the nodes that read the value in layout `to`
  };
  std::vector<Reformat> reformats;  // in node order of their first reader
  bool fast(int node) const { return nodes[static_cast<size_t>(node)] == Layout::kFast; }
  int count(Layout l) const;
};

// `wanted(i)`: the precision the build wants node i's data tensors in (kFp32: the ONNX form). A node is fast when it
// wants fp16 or int8 and the target supports it in those formats. A fast node writes the fast layout when one of its
// readers is fast or it cannot write the ONNX form itself (Target::writes_onnx_form); graph outputs are read in the
// ONNX form.
LayoutPlan plan_layouts(const Graph& g, const Target& t, const std::function<TensorPrecision(int)>& wanted);

}  // namespace qd
