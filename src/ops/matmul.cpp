// Gemm and MatMul (numpy-style batched, with broadcasting of the batch dims). Float via BLAS.
#include <cblas.h>

#include "ops/common.h"
#include "ops/op_geometry.h"

namespace qd::ops {

namespace {

void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, const float* b,
             double beta, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), static_cast<float>(alpha), a, static_cast<int>(ta ? m : k), b,
              static_cast<int>(tb ? k : n), static_cast<float>(beta), c, static_cast<int>(n));
}
void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* b,
             double beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(ta ? m : k), b,
              static_cast<int>(tb ? k : n), beta, c, static_cast<int>(n));
}
// Integer matmul (rare; shape subgraphs never need it, conformance tests do).
template <typename T>
void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a, const T* b, double beta,
             T* c) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = static_cast<T>(alpha * acc + beta * c[i * n + j]);
    }
  }
}

}  // namespace

Status infer_Gemm(InferCtx& c) {
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  if (c.rank(0) != 2 || c.rank(1) != 2) return invalid("Gemm takes 2-d A and B, got " + shape_str(c.shape(0)) + " and " + shape_str(c.shape(1)));
  const bool ta = QD_TRY(c.node.attrs.get_int("transA", 0)) != 0;
  const bool tb = QD_TRY(c.node.attrs.get_int("transB", 0)) != 0;
  const int64_t m = c.shape(0)[ta ? 1 : 0], k = c.shape(0)[ta ? 0 : 1];
  const int64_t kb = c.shape(1)[tb ? 1 : 0], n = c.shape(1)[tb ? 0 : 1];
  if (k != kb) return invalid("Gemm's inner dims differ: " + std::to_string(k) + " vs " + std::to_string(kb));
  if (c.has_input(2)) {
    auto b = broadcast_shapes(c.shape(2), {m, n});
    if (!b || *b != Shape{m, n}) return invalid("Gemm's C " + shape_str(c.shape(2)) + " does not broadcast to " + shape_str({m, n}));
  }
  c.set_output(0, c.dtype(0), {m, n});
  return Status::ok();
}

Status run_Gemm(KernelCtx& c) {
  const bool ta = QD_TRY(c.node.attrs.get_int("transA", 0)) != 0;
  const bool tb = QD_TRY(c.node.attrs.get_int("transB", 0)) != 0;
  const double alpha = QD_TRY(c.node.attrs.get_float("alpha", 1.0f));
  const double beta = QD_TRY(c.node.attrs.get_float("beta", 1.0f));
  const Shape& ys = c.out[0]->shape();
  const int64_t m = ys[0], n = ys[1], k = c.in[0]->shape()[ta ? 0 : 1];
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* y = c.out[0]->data<T>();
    const bool has_c = c.in.size() > 2 && c.in[2];
    if (has_c) {
      BroadcastIndex bi(c.in[2]->shape(), ys);
      for (int64_t i = 0; i < m * n; ++i, bi.next()) y[i] = c.in[2]->data<T>()[bi.index()];
    }
    gemm_rm(ta, tb, m, n, k, alpha, c.in[0]->data<T>(), c.in[1]->data<T>(), has_c ? beta : 0.0, y);
    return Status::ok();
  });
}

// Batched matmul geometry: a [..., M, K] x b [..., K, N] with 1-d operands promoted as numpy does.
Expected<MatMulGeom> matmul_geom(const Shape& a_in, const Shape& b_in) {
  if (a_in.empty() || b_in.empty()) return invalid("MatMul operands must have rank >= 1");
  MatMulGeom g;
  g.a = a_in.size() == 1 ? Shape{1, a_in[0]} : a_in;
  g.b = b_in.size() == 1 ? Shape{b_in[0], 1} : b_in;
  g.m = g.a[g.a.size() - 2];
  g.k = g.a.back();
  g.n = g.b.back();
  if (g.b[g.b.size() - 2] != g.k) {
    return invalid("MatMul inner dims differ: " + shape_str(a_in) + " x " + shape_str(b_in));
  }
  g.batch = QD_TRY(broadcast_shapes(Shape(g.a.begin(), g.a.end() - 2), Shape(g.b.begin(), g.b.end() - 2)));
  g.out = g.batch;
  if (a_in.size() > 1) g.out.push_back(g.m);
  if (b_in.size() > 1) g.out.push_back(g.n);
  return g;
}

Status infer_MatMul(InferCtx& c) {
  QD_RETURN_IF_ERROR(check_same_dtype(c));
  const MatMulGeom g = QD_TRY(matmul_geom(c.shape(0), c.shape(1)));
  c.set_output(0, c.dtype(0), g.out);
  return Status::ok();
}

Status run_MatMul(KernelCtx& c) {
  const MatMulGeom g = QD_TRY(matmul_geom(c.in[0]->shape(), c.in[1]->shape()));
  return dispatch_numeric(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    Shape ab(g.a.begin(), g.a.end() - 2), bb(g.b.begin(), g.b.end() - 2);
    BroadcastIndex ia(ab, g.batch), ib(bb, g.batch);
    const int64_t batches = numel(g.batch);
    T* y = c.out[0]->data<T>();
    for (int64_t i = 0; i < batches; ++i, ia.next(), ib.next()) {
      gemm_rm(false, false, g.m, g.n, g.k, 1.0, c.in[0]->data<T>() + ia.index() * g.m * g.k,
              c.in[1]->data<T>() + ib.index() * g.k * g.n, 0.0, y + i * g.m * g.n);
    }
    return Status::ok();
  });
}

}  // namespace qd::ops

namespace qd::ops {

// MatMulInteger: int32 y = (a - a_zero_point) x (b - b_zero_point), computed exactly in float64.
// a_zero_point: scalar or one per row of a; b_zero_point: scalar or one per column of b.
Status infer_MatMulInteger(InferCtx& c) {
  for (size_t i = 0; i < 2; ++i) {
    if (c.dtype(i) != DType::kInt8 && c.dtype(i) != DType::kUInt8) return invalid("MatMulInteger takes int8/uint8 inputs");
  }
  const MatMulGeom g = QD_TRY(matmul_geom(c.shape(0), c.shape(1)));
  if (c.has_input(2) && numel(c.shape(2)) != 1 && numel(c.shape(2)) != g.m) return invalid("a_zero_point must be a scalar or one per row");
  if (c.has_input(3) && numel(c.shape(3)) != 1 && numel(c.shape(3)) != g.n) return invalid("b_zero_point must be a scalar or one per column");
  c.set_output(0, DType::kInt32, g.out);
  return Status::ok();
}

Status run_MatMulInteger(KernelCtx& c) {
  const MatMulGeom g = QD_TRY(matmul_geom(c.in[0]->shape(), c.in[1]->shape()));
  const Tensor& a = *c.in[0];
  const Tensor& b = *c.in[1];
  const Tensor* azp = c.in.size() > 2 ? c.in[2] : nullptr;
  const Tensor* bzp = c.in.size() > 3 ? c.in[3] : nullptr;
  Tensor ad(DType::kFloat64, g.a), bd(DType::kFloat64, g.b);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double z = !azp ? 0.0 : azp->numel() == 1 ? azp->get_f64(0) : azp->get_f64((i / g.k) % g.m);
    ad.data<double>()[i] = a.get_f64(i) - z;
  }
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double z = !bzp ? 0.0 : bzp->numel() == 1 ? bzp->get_f64(0) : bzp->get_f64(i % g.n);
    bd.data<double>()[i] = b.get_f64(i) - z;
  }
  Tensor yd(DType::kFloat64, g.out);
  Shape ab(g.a.begin(), g.a.end() - 2), bb(g.b.begin(), g.b.end() - 2);
  BroadcastIndex ia(ab, g.batch), ib(bb, g.batch);
  for (int64_t i = 0; i < numel(g.batch); ++i, ia.next(), ib.next()) {
    gemm_rm(false, false, g.m, g.n, g.k, 1.0, ad.data<double>() + ia.index() * g.m * g.k,
            bd.data<double>() + ib.index() * g.k * g.n, 0.0, yd.data<double>() + i * g.m * g.n);
  }
  for (int64_t i = 0; i < yd.numel(); ++i) c.out[0]->data<int32_t>()[i] = static_cast<int32_t>(yd.data<double>()[i]);
  return Status::ok();
}

}  // namespace qd::ops
