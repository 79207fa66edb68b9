// NonZero and Compress: their output size depends on the data, so qdeploy (static shapes) runs them only when that
// data is known while building (constants, or values folded from shapes); otherwise they are unsupported.
#include "ops/movement.h"

namespace qd::ops {

namespace {

bool nonzero_at(const Tensor& t, int64_t i) { return t.get_f64(i) != 0.0; }  // NaN counts as non-zero

int64_t count_nonzero(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += nonzero_at(t, i);
  return n;
}

struct CompressGeom {
  bool flat;  // no axis: the input is flattened
  int axis;
  int64_t kept;
};

Expected<CompressGeom> compress_geom(const InferCtx& c) {
  const Tensor* cond = c.value(1);
  if (c.rank(1) != 1) return invalid("condition must be 1-D, got shape " + shape_str(c.shape(1)));
  if (c.dtype(1) != DType::kBool) return invalid("condition must be bool");
  if (!cond) {
    return unsupported("Compress with a runtime condition: its output size depends on data (qdeploy needs static shapes)");
  }
  CompressGeom g{true, 0, 0};
  int64_t len;
  if (c.node.attrs.has("axis")) {
    if (c.rank(0) == 0) return invalid("input must have rank >= 1 to compress along an axis");
    g.flat = false;
    g.axis = QD_TRY(normalize_axis(QD_TRY(c.node.attrs.get_int("axis")), c.rank(0)));
    len = c.shape(0)[g.axis];
  } else {
    len = numel(c.shape(0));
  }
  if (cond->numel() > len) {
    return invalid("condition has " + std::to_string(cond->numel()) + " entries but the compressed axis has " +
                   std::to_string(len));
  }
  g.kept = count_nonzero(*cond);
  return g;
}

}  // namespace

Status infer_NonZero(InferCtx& c) {
  const Tensor* x = c.value(0);
  if (!x) {
    return unsupported("NonZero on runtime data: its output size depends on the values (qdeploy needs static shapes)");
  }
  if (dtype_size(x->dtype()) == 0) return unsupported(std::string("NonZero on ") + dtype_name(x->dtype()));
  // A scalar is treated as a 1-element vector, as numpy did.
  c.set_output(0, DType::kInt64, {std::max<int64_t>(1, static_cast<int64_t>(x->rank())), count_nonzero(*x)});
  return Status::ok();
}

Status run_NonZero(KernelCtx& c) {
  const Tensor& x = *c.in[0];
  const Shape& s = x.shape();
  const size_t r = s.size();
  const int64_t nnz = c.out[0]->shape()[1];
  int64_t* y = c.out[0]->data<int64_t>();
  std::vector<int64_t> pos(r, 0);
  int64_t k = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (nonzero_at(x, i)) {
      if (k >= nnz) return internal("NonZero count changed since inference");
      if (r == 0) y[k] = 0;
      for (size_t d = 0; d < r; ++d) y[d * nnz + k] = pos[d];
      ++k;
    }
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < s[d]) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

Status infer_Compress(InferCtx& c) {
  const CompressGeom g = QD_TRY(compress_geom(c));
  if (g.flat) {
    c.set_output(0, c.dtype(0), {g.kept});
  } else {
    Shape out = c.shape(0);
    out[g.axis] = g.kept;
    c.set_output(0, c.dtype(0), std::move(out));
  }
  return Status::ok();
}

Status run_Compress(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const CompressGeom g = QD_TRY(compress_geom(ic));
  const Tensor& cond = *c.in[1];
  const Shape& s = c.in[0]->shape();
  const size_t esz = dtype_size(c.in[0]->dtype());
  const int64_t outer = g.flat ? 1 : dim_product(s, 0, g.axis);
  const int64_t dim = g.flat ? numel(s) : s[g.axis];
  const int64_t inner = (g.flat ? 1 : dim_product(s, g.axis + 1, s.size())) * esz;
  const auto* x = static_cast<const std::byte*>(c.in[0]->raw());
  auto* y = static_cast<std::byte*>(c.out[0]->raw());
  if (inner == 0) return Status::ok();
  for (int64_t o = 0; o < outer; ++o) {
    int64_t k = 0;
    for (int64_t j = 0; j < cond.numel(); ++j) {
      if (!nonzero_at(cond, j)) continue;
      std::memcpy(y + (o * g.kept + k) * inner, x + (o * dim + j) * inner, inner);
      ++k;
    }
  }
  return Status::ok();
}

}  // namespace qd::ops
