// DCNv4's CUDA kernels, fp32 and fp16 (fp32 accumulation), after the tuned kernel the DCNv4 seed describes: every
// thread owns V consecutive channels of one group of one output pixel and moves them with one vector load per
// bilinear corner and one vector store (V*sizeof(T) = 16 bytes: 128-bit, where D and the alignment allow); the
// block's offsets and masks are staged in shared memory (converted to fp32 once); the loop over the sampling points
// is unrolled for 3x3 kernels and partly unrolled otherwise. Value and offset_mask may be column slices of wider rows
// (row_stride > their last dim): the fused-linear case, where both are read in place from one GEMM output.
//
// Launch configurations (tactics, timed by the builder per shape): V in {16 bytes, 8 bytes, one element} x output
// pixels per block in {1, 2, ..., 64}; tactic = V * 100 + pixels.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "dcnv4.h"

namespace qd_dcnv4 {

namespace {

using qdeploy::Attrs;
using qdeploy::DataType;
using qdeploy::Status;
using qdeploy::StatusCode;
using qdeploy::TensorView;

struct Params {
  int n, h, w, ho, wo, g, d, k, kh, kw, sh, sw, ph, pw, dh, dw, rc;
  float scale;
  int64_t v_ld, om_ld, out_ld;  // row strides (elements) of value, offset_mask, output
  int64_t pixels;               // n * ho * wo
};

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

// acc[0..V) += m * bilinear(value at (x, y)), corners outside reading 0 (the caller checked -1 < x < w, -1 < y < h).
template <typename T, int V>
__device__ __forceinline__ void sample(const T* __restrict__ base, const Params& p, float x, float y, float m,
                                       float (&acc)[V]) {
  const int xl = static_cast<int>(floorf(x)), yl = static_cast<int>(floorf(y));
  const float lx = x - xl, ly = y - yl, hx = 1.f - lx, hy = 1.f - ly;
  const float wt[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
  float s[V];
#pragma unroll
  for (int e = 0; e < V; ++e) s[e] = 0.f;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int yy = yl + (c >> 1), xx = xl + (c & 1);
    Vec<T, V> v;
    if (yy >= 0 && yy < p.h && xx >= 0 && xx < p.w) {
      v = *reinterpret_cast<const Vec<T, V>*>(base + (static_cast<int64_t>(yy) * p.w + xx) * p.v_ld);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) v.v[e] = from_f<T>(0.f);
    }
#pragma unroll
    for (int e = 0; e < V; ++e) s[e] += wt[c] * to_f(v.v[e]);
  }
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] += m * s[e];
}

// KS: 3 for a 3x3 kernel (points unrolled), 0 for any size.
template <typename T, int V, int KS>
__global__ void dcnv4_forward(const T* __restrict__ value, const T* __restrict__ om, T* __restrict__ out, Params p,
                              int pix_per_block) {
  extern __shared__ float s_om[];  // [pix_per_block][g * 3k]
  const int row = p.g * 3 * p.k;
  const int64_t pix0 = static_cast<int64_t>(blockIdx.x) * pix_per_block;
  const int block_pixels = static_cast<int>(p.pixels - pix0 < pix_per_block ? p.pixels - pix0 : pix_per_block);
  for (int i = threadIdx.x; i < block_pixels * row; i += blockDim.x) {
    const int lp = i / row, e = i - lp * row;
    s_om[i] = to_f(om[(pix0 + lp) * p.om_ld + e]);
  }
  __syncthreads();
  const int lanes = p.d / V;
  const int lane = threadIdx.x % lanes, grp = (threadIdx.x / lanes) % p.g, lp = threadIdx.x / (lanes * p.g);
  if (lp >= block_pixels) return;
  const int64_t pix = pix0 + lp;
  const int b = static_cast<int>(pix / (static_cast<int64_t>(p.ho) * p.wo));
  const int q = static_cast<int>(pix - static_cast<int64_t>(b) * p.ho * p.wo);
  const int oy = q / p.wo, ox = q - oy * p.wo;
  const int kh = KS ? KS : p.kh, kw = KS ? KS : p.kw;
  const int cw = (p.dw * (kw - 1)) >> 1, ch = (p.dh * (kh - 1)) >> 1;
  // The official kernel's operation order, so that fp32 results agree to rounding.
  const float x0 = static_cast<float>(ox * p.sw - p.pw + cw) - static_cast<float>(cw) * p.scale;
  const float y0 = static_cast<float>(oy * p.sh - p.ph + ch) - static_cast<float>(ch) * p.scale;
  const float* offs = s_om + lp * row + grp * 3 * p.k;
  const float* masks = offs + 2 * p.k;
  const T* base = value + static_cast<int64_t>(b) * p.h * p.w * p.v_ld + grp * p.d + lane * V;
  float acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = 0.f;
  int pt = 0;
  // Kernel-x outer, kernel-y inner (the official point order); fully unrolled when KS fixes the size.
#pragma unroll 3
  for (int i = 0; i < kw; ++i) {
#pragma unroll 3
    for (int j = 0; j < kh; ++j) {
      if (p.rc && i == kw / 2 && j == kh / 2) continue;
      const float x = x0 + (static_cast<float>(i * p.dw) + offs[2 * pt]) * p.scale;
      const float y = y0 + (static_cast<float>(j * p.dh) + offs[2 * pt + 1]) * p.scale;
      const float m = masks[pt];
      ++pt;
      if (x > -1.f && y > -1.f && x < static_cast<float>(p.w) && y < static_cast<float>(p.h)) {
        sample<T, V>(base, p, x, y, m, acc);
      }
    }
  }
  Vec<T, V> o;
#pragma unroll
  for (int e = 0; e < V; ++e) o.v[e] = from_f<T>(acc[e]);
  *reinterpret_cast<Vec<T, V>*>(out + pix * p.out_ld + grp * p.d + lane * V) = o;
}

Status bad(const std::string& m) { return Status(StatusCode::kUnsupported, m); }

Status params(const Attrs& a, const std::vector<TensorView>& in, const std::vector<TensorView>& out, Params* p) {
  if (in.size() != 2 || out.size() != 1) return bad("DCNv4 takes two inputs and gives one output");
  Geometry q;
  Status st = resolve_geometry(a, in[0].shape, in[1].shape, &q);
  if (!st.is_ok()) return st;
  if (in[0].dtype != in[1].dtype || in[0].dtype != out[0].dtype) return bad("mixed dtypes");
  if (in[0].dtype != DataType::kFloat32 && in[0].dtype != DataType::kFloat16) return bad("fp32 or fp16 only");
  if (in[0].ld() < q.channels() || in[1].ld() < in[1].shape[3] || out[0].ld() < q.channels()) {
    return bad("a row stride shorter than the row");
  }
  const int64_t pixels = q.n * q.ho * q.wo;
  if (q.n * q.h * q.w * in[0].ld() > INT32_MAX * int64_t{64} || pixels > INT32_MAX) return bad("tensor too large");
  *p = {static_cast<int>(q.n), static_cast<int>(q.h), static_cast<int>(q.w), static_cast<int>(q.ho),
        static_cast<int>(q.wo), q.g, q.d, q.k, q.kh, q.kw, q.sh, q.sw, q.ph, q.pw, q.dh, q.dw, q.remove_center ? 1 : 0,
        q.offset_scale, in[0].ld(), in[1].ld(), out[0].ld(), pixels};
  return Status::ok();
}

int elem_bytes(DataType t) { return t == DataType::kFloat16 ? 2 : 4; }
int vec_of(int64_t tactic) { return static_cast<int>(tactic / 100); }
int pix_of(int64_t tactic) { return static_cast<int>(tactic % 100); }
size_t smem_bytes(const Params& p, int pix) { return sizeof(float) * static_cast<size_t>(pix) * p.g * 3 * p.k; }

Status supports(const Attrs& a, const std::vector<TensorView>& in, const std::vector<TensorView>& out) {
  Params p;
  Status st = params(a, in, out, &p);
  if (!st.is_ok()) return st;
  if (p.g * p.d > 1024) return bad("more than 1024 channels: one thread per channel does not fit a block");
  if (smem_bytes(p, 1) > 48 * 1024) return bad("the offsets of one pixel exceed 48 KiB of shared memory");
  return Status::ok();
}

std::vector<int64_t> tactics(const Attrs& a, const std::vector<TensorView>& in, const std::vector<TensorView>& out) {
  Params p;
  if (!params(a, in, out, &p).is_ok()) return {};
  const int eb = elem_bytes(in[0].dtype);
  std::vector<int64_t> t;
  for (int bytes : {16, 8, 0}) {
    const int v = bytes ? bytes / eb : 1;
    // Vector width v needs whole vectors per group and aligned rows (base pointers are checked at launch).
    if (p.d % v || p.v_ld % v || p.out_ld % v) continue;
    for (int pix : {1, 2, 4, 8, 16, 32, 64}) {
      const int threads = p.g * (p.d / v) * pix;
      if (threads > 1024 || smem_bytes(p, pix) > 48 * 1024) continue;
      if (threads < 32 && pix < 64 && p.pixels > pix) continue;  // under a warp: a larger block is better
      t.push_back(int64_t{v} * 100 + pix);
    }
  }
  return t;
}

std::string tactic_name(int64_t t) { return "v" + std::to_string(vec_of(t)) + "_p" + std::to_string(pix_of(t)); }

template <typename T, int V>
Status launch_v(const Params& p, int pix, const void* value, const void* om, void* out, cudaStream_t s) {
  const int threads = p.g * (p.d / V) * pix;
  const unsigned blocks = static_cast<unsigned>((p.pixels + pix - 1) / pix);
  const size_t smem = smem_bytes(p, pix);
  const auto* v = static_cast<const T*>(value);
  const auto* o = static_cast<const T*>(om);
  auto* y = static_cast<T*>(out);
  if (p.kh == 3 && p.kw == 3) {
    dcnv4_forward<T, V, 3><<<blocks, threads, smem, s>>>(v, o, y, p, pix);
  } else {
    dcnv4_forward<T, V, 0><<<blocks, threads, smem, s>>>(v, o, y, p, pix);
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return Status(StatusCode::kInternal, std::string("DCNv4 launch: ") + cudaGetErrorString(e));
  return Status::ok();
}

template <typename T>
Status launch_t(const Params& p, int vec, int pix, const void* value, const void* om, void* out, cudaStream_t s) {
  constexpr int kFull = 16 / sizeof(T);
  if (vec == kFull) return launch_v<T, kFull>(p, pix, value, om, out, s);
  if (vec == kFull / 2) return launch_v<T, kFull / 2>(p, pix, value, om, out, s);
  if (vec == 1) return launch_v<T, 1>(p, pix, value, om, out, s);
  return Status(StatusCode::kInvalidArgument, "DCNv4: unknown tactic");
}

Status launch(const Attrs& a, int64_t tactic, const std::vector<TensorView>& in, const std::vector<TensorView>& out,
              void*, void* stream) {
  Params p;
  Status st = params(a, in, out, &p);
  if (!st.is_ok()) return st;
  const int vec = vec_of(tactic), pix = pix_of(tactic);
  if (vec < 1 || pix < 1 || p.d % vec) return Status(StatusCode::kInvalidArgument, "DCNv4: tactic does not fit");
  const uintptr_t align = static_cast<uintptr_t>(vec) * elem_bytes(in[0].dtype);
  if (reinterpret_cast<uintptr_t>(in[0].data) % align || reinterpret_cast<uintptr_t>(out[0].data) % align) {
    return Status(StatusCode::kInternal, "DCNv4: a vector tactic got a misaligned pointer");
  }
  if (p.pixels == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  if (in[0].dtype == DataType::kFloat16) return launch_t<__half>(p, vec, pix, in[0].data, in[1].data, out[0].data, s);
  return launch_t<float>(p, vec, pix, in[0].data, in[1].data, out[0].data, s);
}

}  // namespace

std::vector<qdeploy::CudaKernelDef> cuda_kernels() {
  qdeploy::CudaKernelDef k;
  k.name = "nhwc_vec";
  k.supports = &supports;
  k.tactics = &tactics;
  k.tactic_name = &tactic_name;
  k.launch = &launch;
  return {k};
}

}  // namespace qd_dcnv4
