// Ops that permute elements: Transpose, and DepthToSpace / SpaceToDepth (a reshape, a transpose and a reshape).
// All are strided copies by element width, so they work on every dtype (int8 activations included).
#include "ops/movement.h"
#include "ops/op_geometry.h"

namespace qd::ops {

Expected<std::vector<int64_t>> transpose_perm(const InferCtx& c) {
  const size_t r = c.rank(0);
  std::vector<int64_t> perm;
  if (c.node.attrs.has("perm")) {
    perm = QD_TRY(c.node.attrs.get_ints("perm"));
    if (perm.size() != r) {
      return invalid("perm has " + std::to_string(perm.size()) + " entries but the input " + shape_str(c.shape(0)) +
                     " has rank " + std::to_string(r));
    }
    std::vector<char> seen(r, 0);
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(r) || seen[p]) {
        return invalid("perm must be a permutation of 0.." + std::to_string(r) + "-1; " + std::to_string(p) +
                       " is out of range or repeated");
      }
      seen[p] = 1;
    }
  } else {
    for (size_t i = r; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  return perm;
}

namespace {

// DepthToSpace / SpaceToDepth as a strided copy of a 6-d view (see PermutedView).
Status permute_view(KernelCtx& c, const PermutedView& v) {
  const std::vector<int64_t> vs = strides_of(v.view);
  Shape out_view(6);
  std::vector<int64_t> st(6);
  for (int i = 0; i < 6; ++i) {
    out_view[i] = v.view[v.perm[i]];
    st[i] = vs[v.perm[i]];
  }
  Tensor y = c.out[0]->reshaped(out_view);
  return strided_copy(*c.in[0], y, st, 0);
}

struct BlockGeom {
  int64_t n, c, h, w, b;
};

Expected<BlockGeom> block_geom(const InferCtx& c) {
  if (c.rank(0) != 4) return invalid("input must be 4-D (NCHW), got " + shape_str(c.shape(0)));
  const int64_t b = QD_TRY(c.node.attrs.get_int("blocksize"));
  if (b <= 0 || b > (int64_t{1} << 20)) return invalid("blocksize must be positive, got " + std::to_string(b));
  const Shape& s = c.shape(0);
  return BlockGeom{s[0], s[1], s[2], s[3], b};
}

Expected<bool> depth_to_space_crd(const Node& n) {
  const std::string mode = QD_TRY(n.attrs.get_string("mode", "DCR"));
  if (mode != "DCR" && mode != "CRD") return invalid("mode must be DCR or CRD, got '" + mode + "'");
  return mode == "CRD";
}

}  // namespace

Status infer_Transpose(InferCtx& c) {
  const std::vector<int64_t> perm = QD_TRY(transpose_perm(c));
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = c.shape(0)[perm[i]];
  c.set_output(0, c.dtype(0), std::move(out));
  return Status::ok();
}
Status run_Transpose(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const std::vector<int64_t> perm = QD_TRY(transpose_perm(ic));
  const std::vector<int64_t> in_st = strides_of(c.in[0]->shape());
  std::vector<int64_t> st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) st[i] = in_st[perm[i]];
  return strided_copy(*c.in[0], *c.out[0], st, 0);
}

Status infer_DepthToSpace(InferCtx& c) {
  const BlockGeom g = QD_TRY(block_geom(c));
  QD_RETURN_IF_ERROR(depth_to_space_crd(c.node).status());
  if (g.c % (g.b * g.b) != 0) {
    return invalid("channels " + std::to_string(g.c) + " are not a multiple of blocksize^2 = " +
                   std::to_string(g.b * g.b));
  }
  auto hb = checked_numel({g.h, g.b});
  auto wb = checked_numel({g.w, g.b});
  if (!hb || !wb) return invalid("output dims overflow");
  c.set_output(0, c.dtype(0), {g.n, g.c / (g.b * g.b), *hb, *wb});
  return Status::ok();
}
Expected<PermutedView> depth_to_space_view(const InferCtx& c) {
  const BlockGeom g = QD_TRY(block_geom(c));
  const bool crd = QD_TRY(depth_to_space_crd(c.node));
  const int64_t co = g.c / (g.b * g.b);
  // Output order [N, C', H, b, W, b].
  if (crd) return PermutedView{{g.n, co, g.b, g.b, g.h, g.w}, {0, 1, 4, 2, 5, 3}};
  return PermutedView{{g.n, g.b, g.b, co, g.h, g.w}, {0, 3, 4, 1, 5, 2}};
}
Status run_DepthToSpace(KernelCtx& c) {
  const PermutedView v = QD_TRY(depth_to_space_view(infer_ctx_of(c)));
  return permute_view(c, v);
}

Status infer_SpaceToDepth(InferCtx& c) {
  const BlockGeom g = QD_TRY(block_geom(c));
  QD_RETURN_IF_ERROR(depth_to_space_crd(c.node).status());
  if (g.h % g.b != 0 || g.w % g.b != 0) {
    return invalid("spatial dims " + std::to_string(g.h) + "x" + std::to_string(g.w) +
                   " are not multiples of blocksize " + std::to_string(g.b));
  }
  auto cb = checked_numel({g.c, g.b, g.b});
  if (!cb) return invalid("output channels overflow");
  c.set_output(0, c.dtype(0), {g.n, *cb, g.h / g.b, g.w / g.b});
  return Status::ok();
}
Expected<PermutedView> space_to_depth_view(const InferCtx& c) {
  const BlockGeom g = QD_TRY(block_geom(c));
  // Input viewed as [N, C, H/b, b, W/b, b]; output order [N, b, b, C, H/b, W/b] (DCR), or [N, C, b, b, H/b, W/b]
  // with mode CRD (opset 28).
  const bool crd = QD_TRY(depth_to_space_crd(c.node));
  const Shape view{g.n, g.c, g.h / g.b, g.b, g.w / g.b, g.b};
  if (crd) return PermutedView{view, {0, 1, 3, 5, 2, 4}};
  return PermutedView{view, {0, 3, 5, 1, 2, 4}};
}
Status run_SpaceToDepth(KernelCtx& c) {
  const PermutedView v = QD_TRY(space_to_depth_view(infer_ctx_of(c)));
  return permute_view(c, v);
}

}  // namespace qd::ops
