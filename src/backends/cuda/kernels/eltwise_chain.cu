#include <algorithm>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernels/eltwise_chain.h"

namespace qd::cuda {

namespace {

// The same formulas as the generic unary/binary kernels, so fusing changes no result.
__device__ __forceinline__ float step(const EwStep& s, float x, float c) {
  switch (s.op) {
    case EwOp::kRelu: return fmaxf(x, 0.f);
    case EwOp::kSigmoid: return 1.f / (1.f + expf(-x));
    case EwOp::kTanh: return tanhf(x);
    case EwOp::kExp: return expf(x);
    case EwOp::kNeg: return -x;
    case EwOp::kAbs: return fabsf(x);
    case EwOp::kSqrt: return sqrtf(x);
    case EwOp::kReciprocal: return 1.f / x;
    case EwOp::kHardSigmoid: return fmaxf(0.f, fminf(1.f, s.a * x + s.b));
    case EwOp::kHardSwish: return x * fmaxf(0.f, fminf(1.f, x / 6.f + 0.5f));
    case EwOp::kLeakyRelu: return x >= 0.f ? x : s.a * x;
    case EwOp::kClip: return fminf(fmaxf(x, s.a), s.b);
    case EwOp::kAdd: return x + c;
    case EwOp::kSub: return x - c;
    case EwOp::kMul: return x * c;
    case EwOp::kDiv: return x / c;
    case EwOp::kPow: return powf(x, c);
    case EwOp::kMax: return fmaxf(x, c);
    case EwOp::kMin: return fminf(x, c);
    case EwOp::kRSub: return c - x;
    case EwOp::kRDiv: return c / x;
    case EwOp::kRPow: return powf(c, x);
  }
  return x;
}

__device__ __forceinline__ float run_program(const EwProgram& p, float v, int64_t i) {
  for (int k = 0; k < p.steps; ++k) {
    const EwStep& s = p.step[k];
    float c = s.a;
    if (s.operand >= 0) {
      const EwOperand& o = p.operand[s.operand];
      c = o.p[(i / o.div[0]) % o.mod[0] * o.mul[0] + (i / o.div[1]) % o.mod[1] * o.mul[1]];
    }
    v = step(s, v, c);
  }
  return v;
}

__global__ void eltwise_chain_kernel(const float* x, float* y, int64_t n, const EwProgram p) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = run_program(p, x[i], i);
  }
}

__global__ void slice_concat_kernel(const float* x, float* y, const SliceConcatParams p) {
  const int64_t n = p.rows * p.out_cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.out_cols;
    const int col = static_cast<int>(i - r * p.out_cols);
    int k = 0;
    while (k + 1 < p.segments && col >= p.seg[k + 1].out_start) ++k;
    const SliceSegment& sg = p.seg[k];
    const int c = col - sg.out_start;
    const float v = run_program(sg.prog, x[r * p.src_cols + sg.src_start + c], r * sg.len + c);
    const int64_t b = r / p.rows_per_batch;
    y[b * p.out_batch_stride + p.out_offset + (r - b * p.rows_per_batch) * p.out_cols + col] = v;
  }
}

}  // namespace

Status launch_slice_concat(const float* x, float* y, const SliceConcatParams& p, cudaStream_t s) {
  const int64_t n = p.rows * p.out_cols;
  if (n == 0) return Status::ok();
  const int64_t blocks = std::min<int64_t>(ceil_div(n, 256), 65535 * 16);
  slice_concat_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(x, y, p);
  return cuda_status(cudaGetLastError(), "slice_concat");
}

Status launch_eltwise_chain(const float* x, float* y, int64_t n, const EwProgram& prog, cudaStream_t s) {
  if (n == 0) return Status::ok();
  const int64_t blocks = std::min<int64_t>(ceil_div(n, 256), 65535 * 16);
  eltwise_chain_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(x, y, n, prog);
  return cuda_status(cudaGetLastError(), "eltwise_chain");
}

}  // namespace qd::cuda
