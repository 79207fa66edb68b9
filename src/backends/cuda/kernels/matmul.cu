// MatMul (numpy batching with broadcast batch dims, 1-d operands promoted; geometry from ops::matmul_geom) and Gemm
// (transA/transB, alpha, beta, C broadcast to [M, N]) on the tiled fp32 GEMM core, for fp32 and fp16 storage.
#include "backends/cuda/kernels/gemm_tile.cuh"
#include "ops/op_geometry.h"

namespace qd::cuda {

namespace {

// A(m, k) = p[base + m * sm + k * sk], base per batch from a broadcast walk (operand `which` of it).
template <typename T>
struct StridedOperand {
  const T* p;
  int64_t sm, sk;
  Walk<2> batches;
  int which;
  int64_t base = 0;
  __device__ __forceinline__ void batch(int64_t b) {
    int64_t off[2];
    walk_offsets<int64_t>(batches, b, off);
    base = off[which];
  }
  __device__ __forceinline__ float operator()(int64_t r, int64_t c) const {
    return to_float(p[base + r * sm + c * sk]);
  }
};

// y[b, m, n] = alpha * acc + beta * C[m * csm + n * csn] (no C: beta = 0).
template <typename T>
struct GemmOut {
  T* y;
  int64_t M, N;
  float alpha, beta;
  const T* c;
  int64_t csm, csn;
  __device__ __forceinline__ void operator()(int64_t b, int64_t m, int64_t n, float acc) const {
    float v = alpha * acc;
    if (c) v += beta * to_float(c[m * csm + n * csn]);
    y[(b * M + m) * N + n] = from_float<T>(v);
  }
};

template <typename T>
class MatMulKernel final : public GenericKernel {
 public:
  MatMulKernel(int64_t M, int64_t N, int64_t K, int64_t batches, bool ta, bool tb, const Walk<2>& bw, float alpha,
               float beta, bool has_c, int64_t csm, int64_t csn)
      : M_(M), N_(N), K_(K), batches_(batches), ta_(ta), tb_(tb), bw_(bw), alpha_(alpha), beta_(beta), has_c_(has_c),
        csm_(csm), csn_(csn) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    // A is [M, K] (or [K, M] with transA), B is [K, N] (or [N, K] with transB), row-major.
    const StridedOperand<T> a{static_cast<const T*>(in[0]), ta_ ? 1 : K_, ta_ ? M_ : 1, bw_, 0};
    const StridedOperand<T> b{static_cast<const T*>(in[1]), tb_ ? 1 : N_, tb_ ? K_ : 1, bw_, 1};
    const T* c = has_c_ && in.size() > 2 ? static_cast<const T*>(in[2]) : nullptr;
    const GemmOut<T> ep{static_cast<T*>(out[0]), M_, N_, alpha_, beta_, c, csm_, csn_};
    return launch_gemm_tile(M_, N_, K_, batches_, a, b, ep, s);
  }

 private:
  int64_t M_, N_, K_, batches_;
  bool ta_, tb_;
  Walk<2> bw_;
  float alpha_, beta_;
  bool has_c_;
  int64_t csm_, csn_;
};

}  // namespace

MadeKernel make_matmul(const NodeArgs& a) {
  const DType t = a.in[0].dtype;
  if (!is_float_storage(t)) return no_kernel_dtype(a, t);
  for (size_t i = 1; i < a.in.size(); ++i) {
    if (a.has_in(i) && a.in[i].dtype != t) return no_kernel(a, "inputs of different types");
  }
  if (a.out[0].dtype != t) return internal("matmul: output type differs from the input's");
  KernelPtr k;
  if (a.node.op == OpType::MatMul) {
    const ops::MatMulGeom g = QD_TRY(ops::matmul_geom(a.in[0].shape, a.in[1].shape));
    if (g.out != a.out[0].shape) return internal("MatMul: the output spec differs from the inferred output");
    DimsStrides v;
    v.dims = g.batch;
    std::vector<int64_t> sa = broadcast_strides(Shape(g.a.begin(), g.a.end() - 2), g.batch);
    std::vector<int64_t> sb = broadcast_strides(Shape(g.b.begin(), g.b.end() - 2), g.batch);
    for (int64_t& s : sa) s *= g.m * g.k;
    for (int64_t& s : sb) s *= g.k * g.n;
    v.strides = {sa, sb};
    Walk<2> w;
    QD_RETURN_IF_ERROR(make_walk(coalesce(v), &w));
    const int64_t batches = volume(g.batch);
    QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
      k.reset(new MatMulKernel<decltype(tag)>(g.m, g.n, g.k, batches, false, false, w, 1.f, 0.f, false, 0, 0));
      return Status::ok();
    }));
    return std::move(k);
  }
  // Gemm
  const Shape& as = a.in[0].shape;
  const Shape& bs = a.in[1].shape;
  if (as.size() != 2 || bs.size() != 2) return invalid("Gemm takes 2-d A and B");
  const bool ta = QD_TRY(a.node.attrs.get_int("transA", 0)) != 0;
  const bool tb = QD_TRY(a.node.attrs.get_int("transB", 0)) != 0;
  const float alpha = QD_TRY(a.node.attrs.get_float("alpha", 1.0f));
  const float beta = QD_TRY(a.node.attrs.get_float("beta", 1.0f));
  const int64_t M = as[ta ? 1 : 0], K = as[ta ? 0 : 1], N = bs[tb ? 0 : 1];
  if (bs[tb ? 1 : 0] != K) return invalid("Gemm's inner dims differ");
  if (a.out[0].shape != Shape{M, N}) return internal("Gemm: the output spec differs from the inferred output");
  const bool has_c = a.has_in(2);
  int64_t csm = 0, csn = 0;
  if (has_c) {
    const std::vector<int64_t> cs = broadcast_strides(a.in[2].shape, {M, N});
    csm = cs[0];
    csn = cs[1];
  }
  Walk<2> one;  // a single batch at offset 0
  QD_RETURN_IF_ERROR(make_walk(DimsStrides{{1}, {{0}, {0}}}, &one));
  QD_RETURN_IF_ERROR(dispatch_float_storage(t, [&](auto tag) {
    k.reset(new MatMulKernel<decltype(tag)>(M, N, K, 1, ta, tb, one, alpha, has_c ? beta : 0.f, has_c, csm, csn));
    return Status::ok();
  }));
  return std::move(k);
}

}  // namespace qd::cuda
