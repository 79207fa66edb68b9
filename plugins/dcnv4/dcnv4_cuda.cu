// DCNv4's CUDA kernels, fp32 and fp16 (fp32 accumulation), after the tuned kernel the DCNv4 seed describes: every
// thread owns V consecutive channels of one group of one output pixel and moves them with one vector load per
// bilinear corner and one vector store (V*sizeof(T) = 16 bytes: 128-bit, where D and the alignment allow; 32 bytes
// are two such, more work per thread); the loop over the sampling points is unrolled for 3x3 kernels and partly
// unrolled otherwise. Value and offset_mask may be column slices of wider rows (row_stride > their last dim): the
// fused-linear case, where both are read in place from one GEMM output.
//
// Three kernels, each a set of launch configurations (tactics) the builder times per shape:
//   nhwc_vec     the block's offsets and masks are staged in shared memory (converted to fp32 once), as the seed
//                describes;
//   nhwc_direct  each thread reads its point's offsets and mask from global memory (the lanes of one group read the
//                same addresses, one broadcast load): no staging pass and no barrier, which pays where a pixel has
//                few threads (fp16: 16 bytes hold 8 channels) and many blocks are in flight;
//   nhwc_direct_h2  (fp16) the same, each bilinear sample weighted and summed in half2 arithmetic (accumulate()).
// Tactic = tile width * 10000 + V * 100 + output pixels per block, V in {32, 16, 8 bytes, one element}, pixels in
// {1, 2, ..., 64}; a tile width (direct only) makes the block's pixels a 2-d tile of one image instead of a run.
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

// Where a sampling point lies: its top-left corner (xl, yl), the four corners' bilinear weights, and whether the
// point counts at all (x and y > -1 and < the size). Far-away (or NaN) points are clamped first, so that index
// arithmetic cannot overflow; such a point is outside and contributes nothing.
struct Point {
  float wt[4];
  int xl, yl;
  bool in;
};

__device__ __forceinline__ Point locate(const Params& p, float x, float y) {
  Point q;
  q.in = x > -1.f && y > -1.f && x < static_cast<float>(p.w) && y < static_cast<float>(p.h);
  x = fminf(fmaxf(x, -2.f), static_cast<float>(p.w));
  y = fminf(fmaxf(y, -2.f), static_cast<float>(p.h));
  q.xl = static_cast<int>(floorf(x)), q.yl = static_cast<int>(floorf(y));
  const float lx = x - q.xl, ly = y - q.yl, hx = 1.f - lx, hy = 1.f - ly;
  q.wt[0] = hy * hx, q.wt[1] = hy * lx, q.wt[2] = ly * hx, q.wt[3] = ly * lx;
  return q;
}

// acc[0..V) += m * (the four corners v weighted by wt). kH2 (fp16, even V): the corners are weighted and summed in
// half2 arithmetic (fp16 weights, fp16 sum: one more fp16 rounding) and only that sum is converted to fp32 and
// accumulated, instead of converting every value: conversions are the costly instructions of the fp16 kernels.
template <typename T, int V, bool kH2>
__device__ __forceinline__ void accumulate(const Vec<T, V> (&v)[4], const float (&wt)[4], float m, float (&acc)[V]) {
  if constexpr (kH2) {
    static_assert(V % 2 == 0, "half2 sampling needs pairs of channels");
    __half2 s[V / 2];
#pragma unroll
    for (int e = 0; e < V / 2; ++e) s[e] = __float2half2_rn(0.f);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const __half2 w2 = __float2half2_rn(wt[c]);
      const auto* h = reinterpret_cast<const __half2*>(v[c].v);
#pragma unroll
      for (int e = 0; e < V / 2; ++e) s[e] = __hfma2(w2, h[e], s[e]);
    }
#pragma unroll
    for (int e = 0; e < V / 2; ++e) {
      const float2 f = __half22float2(s[e]);
      acc[2 * e] += m * f.x;
      acc[2 * e + 1] += m * f.y;
    }
  } else {
    float s[V];
#pragma unroll
    for (int e = 0; e < V; ++e) s[e] = 0.f;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
#pragma unroll
      for (int e = 0; e < V; ++e) s[e] += wt[c] * to_f(v[c].v[e]);
    }
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] += m * s[e];
  }
}

// acc += m * bilinear(value at q) from global memory, corners outside reading 0 and nothing when the point is
// outside. Branch-free (predicated loads), so that the unrolled points' loads can be in flight together; adding
// m * 0 leaves acc as skipping the point would. Indices are 32-bit within one image (supports() checks that an
// image fits).
template <typename T, int V, bool kH2>
__device__ __forceinline__ void sample(const T* __restrict__ base, const Params& p, const Point& q, float m,
                                       float (&acc)[V]) {
  const int ld = static_cast<int>(p.v_ld), row = p.w * ld;
  const int at = q.yl * row + q.xl * ld;
  const bool x0 = q.xl >= 0, x1 = q.xl + 1 < p.w, y0 = q.in && q.yl >= 0, y1 = q.in && q.yl + 1 < p.h;
  const bool inside[4] = {y0 && x0, y0 && x1, y1 && x0, y1 && x1};
  const int step[4] = {0, ld, row, row + ld};
  Vec<T, V> v[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
#pragma unroll
    for (int e = 0; e < V; ++e) v[c].v[e] = from_f<T>(0.f);
    if (inside[c]) v[c] = *reinterpret_cast<const Vec<T, V>*>(base + at + step[c]);
  }
  accumulate<T, V, kH2>(v, q.wt, m, acc);
}

// kStaged: a block's offsets and masks are staged in shared memory first (pixels in runs only). Otherwise a block
// takes a run of pix_per_block pixels or, with tile_w > 0, a 2-d tile of tile_w x (pix_per_block / tile_w) pixels of
// one image: neighbouring rows sample overlapping value rows, so a tile finds more of its samples in L1 than a run.
// KS: 3 for a 3x3 kernel (points unrolled), 0 for any size.
template <typename T, int V, int KS, bool kStaged, bool kH2>
__global__ void dcnv4_forward(const T* __restrict__ value, const T* __restrict__ om, T* __restrict__ out, Params p,
                              int pix_per_block, int tile_w) {
  extern __shared__ float s_om[];  // [pix_per_block][g * 3k] when staged
  const int row = p.g * 3 * p.k;
  const int lanes = p.d / V;
  const int lane = threadIdx.x % lanes, grp = (threadIdx.x / lanes) % p.g, lp = threadIdx.x / (lanes * p.g);
  int64_t pix;
  int b, oy, ox;
  bool active;
  if (tile_w > 0) {
    const int tile_h = pix_per_block / tile_w;
    const int tiles_x = (p.wo + tile_w - 1) / tile_w, tiles = tiles_x * ((p.ho + tile_h - 1) / tile_h);
    const int t = static_cast<int>(blockIdx.x % tiles);
    b = static_cast<int>(blockIdx.x / tiles);
    const int oy0 = t / tiles_x * tile_h, ox0 = t % tiles_x * tile_w;
    oy = oy0 + lp / tile_w, ox = ox0 + lp % tile_w;
    active = lp < pix_per_block && oy < p.ho && ox < p.wo;
    pix = (static_cast<int64_t>(b) * p.ho + oy) * p.wo + ox;
  } else {
    const int64_t pix0 = static_cast<int64_t>(blockIdx.x) * pix_per_block;
    const int block_pixels = static_cast<int>(p.pixels - pix0 < pix_per_block ? p.pixels - pix0 : pix_per_block);
    if constexpr (kStaged) {
      for (int i = threadIdx.x; i < block_pixels * row; i += blockDim.x) {
        const int sp = i / row, e = i - sp * row;
        s_om[i] = to_f(om[(pix0 + sp) * p.om_ld + e]);
      }
      __syncthreads();
    }
    active = lp < block_pixels;
    pix = pix0 + lp;
    b = static_cast<int>(pix / (static_cast<int64_t>(p.ho) * p.wo));
    const int q = static_cast<int>(pix - static_cast<int64_t>(b) * p.ho * p.wo);
    oy = q / p.wo, ox = q - oy * p.wo;
  }
  if (!active) return;
  const int kh = KS ? KS : p.kh, kw = KS ? KS : p.kw;
  const int cw = (p.dw * (kw - 1)) >> 1, ch = (p.dh * (kh - 1)) >> 1;
  // The official kernel's operation order, so that fp32 results agree to rounding.
  const float x0 = static_cast<float>(ox * p.sw - p.pw + cw) - static_cast<float>(cw) * p.scale;
  const float y0 = static_cast<float>(oy * p.sh - p.ph + ch) - static_cast<float>(ch) * p.scale;
  const float* offs = s_om + lp * row + grp * 3 * p.k;
  const T* g_offs = om + pix * p.om_ld + grp * 3 * p.k;
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
      float dx, dy, m;
      if constexpr (kStaged) {
        dx = offs[2 * pt], dy = offs[2 * pt + 1], m = offs[2 * p.k + pt];
      } else {
        dx = to_f(g_offs[2 * pt]), dy = to_f(g_offs[2 * pt + 1]), m = to_f(g_offs[2 * p.k + pt]);
      }
      ++pt;
      const Point q = locate(p, x0 + (static_cast<float>(i * p.dw) + dx) * p.scale,
                             y0 + (static_cast<float>(j * p.dh) + dy) * p.scale);
      sample<T, V, kH2>(base, p, q, m, acc);
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
// Tactic = tile width * 10000 + V * 100 + pixels per block (see the top of this file).
int vec_of(int64_t tactic) { return static_cast<int>(tactic / 100 % 100); }
int pix_of(int64_t tactic) { return static_cast<int>(tactic % 100); }
int tile_of(int64_t tactic) { return static_cast<int>(tactic / 10000 % 100); }
size_t smem_bytes(const Params& p, int pix) { return sizeof(float) * static_cast<size_t>(pix) * p.g * 3 * p.k; }

// params() and what every kernel needs; *p is set when it returns ok.
Status checked_params(const Attrs& a, const std::vector<TensorView>& in, const std::vector<TensorView>& out,
                      Params* p) {
  Status st = params(a, in, out, p);
  if (!st.is_ok()) return st;
  if (p->g * p->d > 1024) return bad("more than 1024 channels: one thread per channel does not fit a block");
  if (int64_t{p->h} * p->w * p->v_ld + p->v_ld > INT32_MAX) return bad("one image over 2^31 elements");
  return Status::ok();
}

Status supports(const Attrs& a, const std::vector<TensorView>& in, const std::vector<TensorView>& out) {
  Params p;
  return checked_params(a, in, out, &p);
}

Status supports_h2(const Attrs& a, const std::vector<TensorView>& in, const std::vector<TensorView>& out) {
  Params p;
  Status st = checked_params(a, in, out, &p);
  if (!st.is_ok()) return st;
  if (in[0].dtype != DataType::kFloat16) return bad("half2 sampling is for fp16 tensors");
  if (p.d % 2 || p.v_ld % 2 || p.out_ld % 2) return bad("half2 sampling needs pairs of channels (even D and strides)");
  return Status::ok();
}

Status supports_staged(const Attrs& a, const std::vector<TensorView>& in, const std::vector<TensorView>& out) {
  Params p;
  Status st = checked_params(a, in, out, &p);
  if (!st.is_ok()) return st;
  if (smem_bytes(p, 1) > 48 * 1024) return bad("the offsets of one pixel exceed 48 KiB of shared memory");
  return Status::ok();
}

template <bool kStaged, bool kH2>
std::vector<int64_t> tactics(const Attrs& a, const std::vector<TensorView>& in, const std::vector<TensorView>& out) {
  Params p;
  if (!params(a, in, out, &p).is_ok()) return {};
  const int eb = elem_bytes(in[0].dtype);
  std::vector<int64_t> t;
  for (int bytes : {32, 16, 8, 0}) {
    const int v = bytes ? bytes / eb : 1;
    // Vector width v needs whole vectors per group and aligned rows (base pointers are checked at launch).
    if (p.d % v || p.v_ld % v || p.out_ld % v || (kH2 && v % 2)) continue;
    for (int pix : {1, 2, 4, 8, 16, 32, 64}) {
      const int threads = p.g * (p.d / v) * pix;
      if (threads > 1024 || (kStaged && smem_bytes(p, pix) > 48 * 1024)) continue;
      if (threads < 32 && pix < 64 && p.pixels > pix) continue;  // under a warp: a larger block is better
      t.push_back(int64_t{v} * 100 + pix);
      if constexpr (!kStaged) {
        // 2-d tiles of tile_w x pix / tile_w pixels, where the output has room for them.
        for (int tile_w : {4, 8, 16}) {
          const int tile_h = pix / tile_w;
          if (tile_h < 2 || tile_w * tile_h != pix || tile_w > p.wo || tile_h > p.ho || threads < 32) continue;
          t.push_back(int64_t{tile_w} * 10000 + int64_t{v} * 100 + pix);
        }
      }
    }
  }
  return t;
}

// v8_p16: 8 channels per thread, 16 consecutive pixels per block; v8_t8x2: a tile of 8 x 2 pixels.
std::string tactic_name(int64_t t) {
  const int tw = tile_of(t), pix = pix_of(t);
  const std::string v = "v" + std::to_string(vec_of(t));
  return tw ? v + "_t" + std::to_string(tw) + "x" + std::to_string(pix / tw) : v + "_p" + std::to_string(pix);
}

template <typename T, int V, bool kStaged, bool kH2>
Status launch_v(const Params& p, int pix, int tile_w, const void* value, const void* om, void* out, cudaStream_t s) {
  const int threads = p.g * (p.d / V) * pix;
  const int tile_h = tile_w ? pix / tile_w : 1;
  const int64_t n_blocks = tile_w ? int64_t{p.n} * ((p.wo + tile_w - 1) / tile_w) * ((p.ho + tile_h - 1) / tile_h)
                                  : (p.pixels + pix - 1) / pix;
  if (n_blocks > INT32_MAX) return Status(StatusCode::kUnsupported, "DCNv4: too many blocks");
  const unsigned blocks = static_cast<unsigned>(n_blocks);
  const size_t smem = kStaged ? smem_bytes(p, pix) : 0;
  const auto* v = static_cast<const T*>(value);
  const auto* o = static_cast<const T*>(om);
  auto* y = static_cast<T*>(out);
  auto kernel = p.kh == 3 && p.kw == 3 ? dcnv4_forward<T, V, 3, kStaged, kH2> : dcnv4_forward<T, V, 0, kStaged, kH2>;
  kernel<<<blocks, threads, smem, s>>>(v, o, y, p, pix, tile_w);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return Status(StatusCode::kInternal, std::string("DCNv4 launch: ") + cudaGetErrorString(e));
  return Status::ok();
}

template <typename T, bool kStaged, bool kH2>
Status launch_t(const Params& p, int vec, int pix, int tw, const void* value, const void* om, void* out,
                cudaStream_t s) {
  constexpr int kFull = 16 / sizeof(T);
  if (vec == 2 * kFull) return launch_v<T, 2 * kFull, kStaged, kH2>(p, pix, tw, value, om, out, s);
  if (vec == kFull) return launch_v<T, kFull, kStaged, kH2>(p, pix, tw, value, om, out, s);
  if (vec == kFull / 2) return launch_v<T, kFull / 2, kStaged, kH2>(p, pix, tw, value, om, out, s);
  if constexpr (!kH2) {
    if (vec == 1) return launch_v<T, 1, kStaged, kH2>(p, pix, tw, value, om, out, s);
  }
  return Status(StatusCode::kInvalidArgument, "DCNv4: unknown tactic");
}

template <bool kStaged, bool kH2>
Status launch(const Attrs& a, int64_t tactic, const std::vector<TensorView>& in, const std::vector<TensorView>& out,
              void*, void* stream) {
  Params p;
  Status st = params(a, in, out, &p);
  if (!st.is_ok()) return st;
  const int vec = vec_of(tactic), pix = pix_of(tactic), tw = tile_of(tactic);
  if (vec < 1 || pix < 1 || p.d % vec || (tw && (kStaged || pix % tw)) || tactic >= 1000000) {
    return Status(StatusCode::kInvalidArgument, "DCNv4: tactic does not fit");
  }
  const uintptr_t align = static_cast<uintptr_t>(vec) * elem_bytes(in[0].dtype);
  if (reinterpret_cast<uintptr_t>(in[0].data) % align || reinterpret_cast<uintptr_t>(out[0].data) % align) {
    return Status(StatusCode::kInternal, "DCNv4: a vector tactic got a misaligned pointer");
  }
  if (p.pixels == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  if (in[0].dtype == DataType::kFloat16) {
    return launch_t<__half, kStaged, kH2>(p, vec, pix, tw, in[0].data, in[1].data, out[0].data, s);
  }
  if constexpr (kH2) {
    return Status(StatusCode::kInvalidArgument, "DCNv4: a half2 tactic on fp32 tensors");
  } else {
    return launch_t<float, kStaged, false>(p, vec, pix, tw, in[0].data, in[1].data, out[0].data, s);
  }
}

}  // namespace

std::vector<qdeploy::CudaKernelDef> cuda_kernels() {
  qdeploy::CudaKernelDef staged;
  staged.name = "nhwc_vec";
  staged.supports = &supports_staged;
  staged.tactics = &tactics<true, false>;
  staged.tactic_name = &tactic_name;
  staged.launch = &launch<true, false>;
  qdeploy::CudaKernelDef direct = staged;
  direct.name = "nhwc_direct";
  direct.supports = &supports;
  direct.tactics = &tactics<false, false>;
  direct.launch = &launch<false, false>;
  qdeploy::CudaKernelDef h2 = direct;
  h2.name = "nhwc_direct_h2";
  h2.supports = &supports_h2;
  h2.tactics = &tactics<false, true>;
  h2.launch = &launch<false, true>;
  return {staged, direct, h2};
}

}  // namespace qd_dcnv4
