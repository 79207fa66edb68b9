#include <algorithm>
#include <climits>
#include <type_traits>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernels/nhwc.h"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/requantize.cuh"

namespace qd::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = ceil_div(n, kThreads);
  return static_cast<unsigned>(b < 65535 * 32 ? b : 65535 * 32);
}

template <typename T>
__device__ __forceinline__ float to_f(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }

// One thread per 8 channels of a pixel, consecutive threads on consecutive pixels: each channel's reads are coalesced
// across the warp, the 8 values (padding zeroed) leave as one 16-byte store, and a small map (batch 1, 14x14) still
// has enough threads to fill the GPU.
template <typename T>
__global__ void nchw_to_nhwc_kernel(const T* x, __half* y, int ld, int C, int HW, int64_t pixels) {
  const int64_t total = pixels * (ld / 8);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t chunk = i / pixels, pix = i - chunk * pixels;
    const int64_t n = pix / HW, hw = pix - n * HW;
    const int c0 = static_cast<int>(chunk) * 8;
    const T* src = x + (n * C + c0) * HW + hw;
    __align__(16) __half v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = c0 + j < C ? __float2half_rn(to_f(src[static_cast<int64_t>(j) * HW])) : __float2half_rn(0.f);
    *reinterpret_cast<uint4*>(y + pix * ld + c0) = *reinterpret_cast<const uint4*>(v);
  }
}

template <typename T>
__global__ void nhwc_to_nchw_kernel(const __half* x, int ld, int coff, T* y, int C, int HW, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t hw = i % HW;
    const int64_t nc = i / HW;
    const int64_t n = nc / C, c = nc - n * C;
    const float v = __half2float(x[(n * HW + hw) * ld + coff + c]);
    if constexpr (sizeof(T) == 2) {
      y[i] = __float2half_rn(v);
    } else {
      y[i] = v;
    }
  }
}

// The NHWC movement kernels move L half2 per thread: 4 (16-byte accesses) when channel counts, strides and offsets
// are multiples of 8, else 1. Index arithmetic in I: uint32_t when the element count fits, else int64_t.
template <int L>
struct H2Vec;
template <>
struct H2Vec<1> {
  using T = __half2;
};
template <>
struct H2Vec<4> {
  using T = uint4;
};
template <int L>
__device__ __forceinline__ void load_h2(const __half* p, __half2 (&r)[L]) {
  *reinterpret_cast<typename H2Vec<L>::T*>(r) = *reinterpret_cast<const typename H2Vec<L>::T*>(p);
}
template <int L>
__device__ __forceinline__ void store_h2(__half* p, const __half2 (&r)[L]) {
  *reinterpret_cast<typename H2Vec<L>::T*>(p) = *reinterpret_cast<const typename H2Vec<L>::T*>(r);
}

// Thread i of a pooling kernel with CV channel groups per pixel: its group, output row and column; returns the image.
template <typename I>
__device__ __forceinline__ I pool_position(I i, int CV, const PoolParams& p, int* cv, int* oh, int* ow) {
  *cv = static_cast<int>(i % CV);
  I t = i / CV;
  *ow = static_cast<int>(t % p.OW);
  t /= p.OW;
  *oh = static_cast<int>(t % p.OH);
  return t / p.OH;
}

// Calls f(pixel) for each tap of output pixel (n, oh, ow) inside the image (pixel = (n * H + ih) * W + iw): taps in
// the padding are skipped, which is max-pooling's -inf padding.
template <typename I, typename F>
__device__ __forceinline__ void for_each_tap(const PoolParams& p, I n, int oh, int ow, F f) {
  for (int r = 0; r < p.kh; ++r) {
    const int ih = oh * p.sh - p.ph + r;
    if (ih < 0 || ih >= p.H) continue;
#pragma unroll 5  // a row's loads in flight together (YOLOv5's SPPF at batch 1: one load latency per tap otherwise)
    for (int s = 0; s < p.kw; ++s) {
      const int iw = ow * p.sw - p.pw + s;
      if (iw >= 0 && iw < p.W) f((n * p.H + ih) * p.W + iw);
    }
  }
}

// One thread per (output pixel, 2L channels).
template <int L, typename I>
__global__ void maxpool_nhwc_kernel(const __half* x, int xld, __half* y, int yld, PoolParams p, I total) {
  pdl_wait();
  pdl_trigger();
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total; i += static_cast<I>(gridDim.x) * blockDim.x) {
    int cv, oh, ow;
    const I n = pool_position(i, p.C / (2 * L), p, &cv, &oh, &ow);
    alignas(16) __half2 m[L];
#pragma unroll
    for (int l = 0; l < L; ++l) m[l] = __floats2half2_rn(-65504.f, -65504.f);
    for_each_tap(p, n, oh, ow, [&](I pix) {
      alignas(16) __half2 v[L];
      load_h2<L>(x + pix * xld + cv * 2 * L, v);
#pragma unroll
      for (int l = 0; l < L; ++l) m[l] = __hmax2(m[l], v[l]);
    });
    store_h2<L>(y + ((n * p.OH + oh) * p.OW + ow) * yld + cv * 2 * L, m);
  }
}

// 8 fp16 channels' maximum.
__device__ __forceinline__ uint4 hmax8(uint4 a, uint4 b) {
  const __half2* x = reinterpret_cast<const __half2*>(&a);
  const __half2* y = reinterpret_cast<const __half2*>(&b);
  uint4 r;
  __half2* z = reinterpret_cast<__half2*>(&r);
#pragma unroll
  for (int j = 0; j < 4; ++j) z[j] = __hmax2(x[j], y[j]);
  return r;
}

// 16 int8 channels' maximum.
__device__ __forceinline__ uint4 vmax16(uint4 a, uint4 b) {
  return make_uint4(__vmaxs4(a.x, b.x), __vmaxs4(a.y, b.y), __vmaxs4(a.z, b.z), __vmaxs4(a.w, b.w));
}

struct PoolChainOuts {
  char* p[kMaxPoolChain];  // at channel 0 of the block's group
  int ld[kMaxPoolChain];   // bytes between pixels
};

// maxpool_chain_nhwc: block (n, channel group of 16 bytes: 8 fp16 or 16 int8 channels). Each pool is a row pass into
// `t` and a column pass back into `a` (max-pooling is separable; taps past the border are skipped, -inf padding), whose
// result is also stored. xld and y.ld in bytes. A thread per pixel (up to 1024): with 128 threads, the SPPF at batch
// 1 (20 x 20 pixels, 16 blocks of INT8 channels) had each warp issue ~5,600 instructions one after another (Nsight
// Compute). (A thread per 4-byte word of a pixel, tried too, was slower at every batch size:
// four times the index arithmetic.)
template <bool kI8>
__global__ void maxpool_chain_nhwc_kernel(const char* x, int xld, PoolChainOuts y, int count, int groups, int H,
                                          int W, int rh, int rw) {
  pdl_wait();
  pdl_trigger();
  extern __shared__ uint4 plane[];
  const auto vmax = [](uint4 u, uint4 v) { return kI8 ? vmax16(u, v) : hmax8(u, v); };
  const int HW = H * W;
  uint4 *a = plane, *t = plane + HW;
  const int n = blockIdx.x / groups, cv = blockIdx.x - n * groups;
  const int64_t base = static_cast<int64_t>(n) * HW;
#pragma unroll 4  // loads in flight together
  for (int i = threadIdx.x; i < HW; i += blockDim.x) {
    a[i] = *reinterpret_cast<const uint4*>(x + (base + i) * xld + cv * 16);
  }
  __syncthreads();
  for (int k = 0; k < count; ++k) {
    for (int i = threadIdx.x; i < HW; i += blockDim.x) {
      const int w = i % W;
      uint4 m = a[i];
      for (int d = max(-rw, -w); d <= min(rw, W - 1 - w); ++d) m = vmax(m, a[i + d]);
      t[i] = m;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < HW; i += blockDim.x) {
      const int h = i / W;
      uint4 m = t[i];
      for (int d = max(-rh, -h); d <= min(rh, H - 1 - h); ++d) m = vmax(m, t[i + d * W]);
      a[i] = m;
      *reinterpret_cast<uint4*>(y.p[k] + (base + i) * y.ld[k] + cv * 16) = m;
    }
    __syncthreads();
  }
}

// INT8: one thread per (output pixel, 16 channels as four packed words, __vmaxs4), or per channel when channel counts,
// strides or offsets are not multiples of 16.
template <bool kWide>
__global__ void maxpool_nhwc_i8_kernel(const int8_t* x, int xld, int8_t* y, int yld, PoolParams p, int64_t total) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int cv, oh, ow;
    const int64_t n = pool_position(i, kWide ? p.C / 16 : p.C, p, &cv, &oh, &ow);
    int8_t* dst = y + ((n * p.OH + oh) * p.OW + ow) * yld;
    if constexpr (kWide) {
      uint4 m = make_uint4(0x80808080u, 0x80808080u, 0x80808080u, 0x80808080u);  // -128 in every lane
      for_each_tap(p, n, oh, ow, [&](int64_t pix) {
        const uint4 v = *reinterpret_cast<const uint4*>(x + pix * xld + cv * 16);
        m = make_uint4(__vmaxs4(m.x, v.x), __vmaxs4(m.y, v.y), __vmaxs4(m.z, v.z), __vmaxs4(m.w, v.w));
      });
      *reinterpret_cast<uint4*>(dst + cv * 16) = m;
    } else {
      int8_t m = -128;
      for_each_tap(p, n, oh, ow, [&](int64_t pix) { m = max(m, x[pix * xld + cv]); });
      dst[cv] = m;
    }
  }
}

template <int L, typename I>
__global__ void upsample_nhwc_kernel(const __half* x, int xld, __half* y, int yld, int CV, int H, int W, int fh, int fw,
                                     I total) {
  pdl_wait();
  pdl_trigger();
  const int OH = H * fh, OW = W * fw;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total; i += static_cast<I>(gridDim.x) * blockDim.x) {
    const int cv = static_cast<int>(i % CV);
    I t = i / CV;
    const int ow = static_cast<int>(t % OW);
    t /= OW;
    const int oh = static_cast<int>(t % OH);
    const I n = t / OH;
    alignas(16) __half2 v[L];
    load_h2<L>(x + ((n * H + oh / fh) * W + ow / fw) * xld + cv * 2 * L, v);
    store_h2<L>(y + ((n * OH + oh) * OW + ow) * yld + cv * 2 * L, v);
  }
}

template <int L, typename I>
__global__ void copy_channels_kernel(const __half* x, int xld, __half* y, int yld, int CV, I total) {
  pdl_wait();
  pdl_trigger();
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total; i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I pix = i / CV;
    const int cv = static_cast<int>(i - pix * CV);
    alignas(16) __half2 v[L];
    load_h2<L>(x + pix * xld + cv * 2 * L, v);
    store_h2<L>(y + pix * yld + cv * 2 * L, v);
  }
}

// Launches kernel<L, I> (which calls pdl_wait) over `total` threads of 2L channels: L = 4 when `wide`, I = uint32_t
// when it fits.
#define QD_LAUNCH_NHWC(kernel, wide, elements, s, ...)                                                     \
  do {                                                                                                     \
    const int64_t qd_total_ = (elements) / ((wide) ? 8 : 2);                                               \
    const dim3 qd_grid_(static_cast<unsigned>(blocks_for(qd_total_)));                                     \
    const bool qd_small_ = (elements) < (int64_t{1} << 31);                                                \
    if ((wide) && qd_small_) {                                                                             \
      launch_pdl(kernel<4, uint32_t>, qd_grid_, kThreads, 0, s, __VA_ARGS__, static_cast<uint32_t>(qd_total_)); \
    } else if (wide) {                                                                                     \
      launch_pdl(kernel<4, int64_t>, qd_grid_, kThreads, 0, s, __VA_ARGS__, qd_total_);                    \
    } else if (qd_small_) {                                                                                \
      launch_pdl(kernel<1, uint32_t>, qd_grid_, kThreads, 0, s, __VA_ARGS__, static_cast<uint32_t>(qd_total_)); \
    } else {                                                                                               \
      launch_pdl(kernel<1, int64_t>, qd_grid_, kThreads, 0, s, __VA_ARGS__, qd_total_);                    \
    }                                                                                                      \
  } while (0)

__device__ __forceinline__ int8_t quantize_i8(float v, float scale) { return static_cast<int8_t>(quantize_int8(v, scale)); }

__global__ void quantize_from_nhwc_kernel(const __half* x, int xld, int8_t* q, int qld, __half* dq, int dqld, int C,
                                          float scale, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t pix = i / qld;
    const int c = static_cast<int>(i - pix * qld);
    if (c >= C) {
      q[i] = 0;
      continue;
    }
    const int8_t v = quantize_i8(__half2float(x[pix * xld + c]), scale);
    q[i] = v;
    if (dq) dq[pix * dqld + c] = __float2half_rn(__fmul_rn(static_cast<float>(v), scale));
  }
}

// 16 channels per thread (C a multiple of 16; 16-byte loads and stores), 32-bit indices.
__global__ void quantize_from_nhwc16_kernel(const __half* x, int xld, int8_t* q, int qld, __half* dq, int dqld, int C,
                                            float scale, uint32_t total) {
  const int G = qld / 16;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t pix = i / G;
    const int c0 = static_cast<int>(i - pix * G) * 16;
    alignas(16) int8_t v[16] = {};
    if (c0 < C) {
      alignas(16) __half h[16];
      *reinterpret_cast<uint4*>(h) = *reinterpret_cast<const uint4*>(x + pix * xld + c0);
      *reinterpret_cast<uint4*>(h + 8) = *reinterpret_cast<const uint4*>(x + pix * xld + c0 + 8);
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = quantize_i8(__half2float(h[j]), scale);
      if (dq) {
#pragma unroll
        for (int j = 0; j < 16; ++j) h[j] = __float2half_rn(__fmul_rn(static_cast<float>(v[j]), scale));
        *reinterpret_cast<uint4*>(dq + pix * dqld + c0) = *reinterpret_cast<const uint4*>(h);
        *reinterpret_cast<uint4*>(dq + pix * dqld + c0 + 8) = *reinterpret_cast<const uint4*>(h + 8);
      }
    }
    *reinterpret_cast<int4*>(q + pix * qld + c0) = *reinterpret_cast<const int4*>(v);
  }
}

__global__ void quantize_from_nchw_kernel(const float* x, int8_t* q, int qld, float* dq, int C, int HW, float scale,
                                          int64_t pixels) {
  for (int64_t pix = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; pix < pixels;
       pix += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = pix / HW, hw = pix - n * HW;
    // 16 channels per 16-byte store (qld is a multiple of 16); reads are coalesced across the threads of a plane.
    for (int c0 = 0; c0 < qld; c0 += 16) {
      alignas(16) int8_t v[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int c = c0 + j;
        v[j] = 0;
        if (c < C) {
          const int64_t idx = (n * C + c) * HW + hw;
          v[j] = quantize_i8(x[idx], scale);
          if (dq) dq[idx] = __fmul_rn(static_cast<float>(v[j]), scale);
        }
      }
      *reinterpret_cast<int4*>(q + pix * qld + c0) = *reinterpret_cast<const int4*>(v);
    }
  }
}

// A value of x as fp32: int8 dequantized with `scale`.
template <typename T>
__device__ __forceinline__ float load_f(T v, float scale) {
  if constexpr (sizeof(T) == 1) {
    return __fmul_rn(static_cast<float>(v), scale);
  } else {
    return to_f(v);
  }
}
// A value in y's dtype: int8 quantized with `scale`.
template <typename Y>
__device__ __forceinline__ Y store_f(float v, float scale) {
  if constexpr (sizeof(Y) == 1) {
    return quantize_i8(v, scale);
  } else if constexpr (sizeof(Y) == 2) {
    return __float2half_rn(v);
  } else {
    return v;
  }
}

// One thread per output pixel, 16-byte stores (8 fp16 or 16 int8 channels). x: NCHW, or NHWC (kNhwc) with xld
// values per pixel (the caller's input binding); int8 x to int8 y copies (same scale). kC: the channel count when
// known at compile time (3, images), which turns every element's channel and source offset into a constant (with a
// runtime C, the per-element division and 64-bit index products made this pass instruction-bound).
template <int kC, bool kNhwc, typename T, typename Y>
__global__ void nchw_to_s2d_kernel(const T* x, int xld, float x_scale, Y* y, int ld_, int C_, int H, int W,
                                   float scale, int64_t pixels) {
  pdl_wait();
  pdl_trigger();
  constexpr int kVec = 16 / sizeof(Y);
  const int C = kC ? kC : C_;
  const int ld = kC ? (4 * kC + kVec - 1) / kVec * kVec : ld_;
  const int OH = H / 2, OW = W / 2;
  const int64_t plane = static_cast<int64_t>(H) * W;
  for (int64_t pix = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; pix < pixels;
       pix += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = pix / (static_cast<int64_t>(OH) * OW);
    const int rem = static_cast<int>(pix - n * OH * OW), oy = rem / OW, ox = rem - oy * OW;
    // The 2x2 block's top-left value of channel 0.
    const T* src = x + (kNhwc ? (n * plane + static_cast<int64_t>(2 * oy) * W + 2 * ox) * xld
                              : n * C * plane + static_cast<int64_t>(2 * oy) * W + 2 * ox);
#pragma unroll
    for (int c0 = 0; c0 < ld; c0 += kVec) {
      alignas(16) Y v[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const int k = c0 + j, blk = k / C, c = k - blk * C;
        v[j] = Y(0.f);
        if (blk < 4) {
          const int dy = blk >> 1, dx = blk & 1;
          const T t = src[kNhwc ? (static_cast<int64_t>(dy) * W + dx) * xld + c : c * plane + dy * W + dx];
          if constexpr (sizeof(T) == 1 && sizeof(Y) == 1) {
            v[j] = t;
          } else {
            v[j] = store_f<Y>(load_f(t, x_scale), scale);
          }
        }
      }
      *reinterpret_cast<uint4*>(y + pix * ld + c0) = *reinterpret_cast<const uint4*>(v);
    }
  }
}

// One thread per element of y (an NHWC y's padding channels included, written zero).
template <typename X, typename Y>
__global__ void convert_kernel(TensorView x, TensorView y, int C, int HW, int64_t total) {
  const X* xp = static_cast<const X*>(x.data);
  Y* yp = static_cast<Y*>(y.data);
  const int yc = y.nhwc ? y.ld : C;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t n, p;
    int c;
    if (y.nhwc) {
      c = static_cast<int>(i % yc);
      p = i / yc % HW;
      n = i / yc / HW;
    } else {
      p = i % HW;
      c = static_cast<int>(i / HW % C);
      n = i / HW / C;
    }
    if (c >= C) {
      yp[i] = Y(0.f);
      continue;
    }
    const X v = xp[x.nhwc ? (n * HW + p) * x.ld + x.coff + c : (n * C + c) * HW + p];
    if constexpr (sizeof(X) == 1 && sizeof(Y) == 1) {
      yp[i] = x.scale == y.scale ? v : quantize_i8(load_f(v, x.scale), y.scale);
    } else {
      yp[i] = store_f<Y>(load_f(v, x.scale), y.scale);
    }
  }
}

template <typename X>
Status launch_convert(const TensorView& x, const TensorView& y, int C, int HW, int64_t total, cudaStream_t s) {
  switch (y.dtype) {
    case DType::kFloat32: convert_kernel<X, float><<<blocks_for(total), kThreads, 0, s>>>(x, y, C, HW, total); break;
    case DType::kFloat16: convert_kernel<X, __half><<<blocks_for(total), kThreads, 0, s>>>(x, y, C, HW, total); break;
    case DType::kInt8: convert_kernel<X, int8_t><<<blocks_for(total), kThreads, 0, s>>>(x, y, C, HW, total); break;
    default: return internal("convert_tensor: the output must be float32, float16 or int8");
  }
  return Status::ok();
}

Status even(const char* what, int C, const NhwcView& a, const NhwcView& b) {
  if (C % 2 || a.ld % 2 || a.coff % 2 || b.ld % 2 || b.coff % 2) {
    return internal(std::string(what) + ": NHWC channel counts and offsets must be even");
  }
  return Status::ok();
}

// 16-byte accesses: channels, strides and offsets in multiples of 8 halves (the base pointers are 256-aligned).
bool wide(int C, const NhwcView& a, const NhwcView& b) {
  return C % 8 == 0 && a.ld % 8 == 0 && a.coff % 8 == 0 && b.ld % 8 == 0 && b.coff % 8 == 0 &&
         reinterpret_cast<uintptr_t>(a.data) % 16 == 0 && reinterpret_cast<uintptr_t>(b.data) % 16 == 0;
}
// The same for int8 tensors (16 channels per 16 bytes).
bool wide_i8(int C, const NhwcView& a, const NhwcView& b) {
  return C % 16 == 0 && a.ld % 16 == 0 && a.coff % 16 == 0 && b.ld % 16 == 0 && b.coff % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.data) % 16 == 0 && reinterpret_cast<uintptr_t>(b.data) % 16 == 0;
}

}  // namespace

Status nchw_to_nhwc(const void* x, DType x_type, NhwcView y, int N, int C, int H, int W, cudaStream_t s) {
  if (y.coff != 0 || y.ld < C || y.ld % 8) {
    return internal("nchw_to_nhwc: writes whole tensors (coff 0, ld >= C, ld a multiple of 8)");
  }
  const int64_t total = static_cast<int64_t>(N) * H * W;
  if (total == 0) return Status::ok();
  auto* out = static_cast<__half*>(y.data);
  if (x_type == DType::kFloat32) {
    nchw_to_nhwc_kernel<<<blocks_for(total * (y.ld / 8)), kThreads, 0, s>>>(static_cast<const float*>(x), out, y.ld,
                                                                              C, H * W, total);
  } else if (x_type == DType::kFloat16) {
    nchw_to_nhwc_kernel<<<blocks_for(total * (y.ld / 8)), kThreads, 0, s>>>(static_cast<const __half*>(x), out, y.ld,
                                                                              C, H * W, total);
  } else {
    return internal("nchw_to_nhwc: input must be float32 or float16");
  }
  return cuda_status(cudaGetLastError(), "nchw_to_nhwc");
}

Status nchw_to_s2d(const TensorView& x, NhwcView y, DType y_type, float scale, int N, int C, int H, int W,
                   cudaStream_t s) {
  const int vec = y_type == DType::kInt8 ? 16 : 8;
  if (y.coff != 0 || y.ld < 4 * C || y.ld % vec || H % 2 || W % 2 || C < 1 || (x.nhwc && (x.coff || x.ld < C))) {
    return internal("nchw_to_s2d: whole tensors, even H and W, ld >= 4C and a multiple of the 16-byte vector");
  }
  const int64_t pixels = static_cast<int64_t>(N) * (H / 2) * (W / 2);
  if (pixels == 0) return Status::ok();
  auto run = [&](auto kernel, auto* xp, auto* yp, float sc) {
    kernel<<<blocks_for(pixels), kThreads, 0, s>>>(xp, x.ld, x.scale, yp, y.ld, C, H, W, sc, pixels);
  };
  auto launch = [&](auto* xp) -> Status {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(xp)>>;
    auto to = [&](auto* yp, float sc) {
      using Y = std::remove_pointer_t<decltype(yp)>;
      constexpr int kVec = 16 / sizeof(Y);
      const bool images = C == 3 && y.ld == (12 + kVec - 1) / kVec * kVec;  // the channel loop unrolled
      const auto kernel = images ? (x.nhwc ? nchw_to_s2d_kernel<3, true, T, Y> : nchw_to_s2d_kernel<3, false, T, Y>)
                                 : (x.nhwc ? nchw_to_s2d_kernel<0, true, T, Y> : nchw_to_s2d_kernel<0, false, T, Y>);
      run(kernel, xp, yp, sc);
    };
    if (y_type == DType::kInt8) {
      to(static_cast<int8_t*>(y.data), scale);
    } else if (y_type == DType::kFloat16) {
      to(static_cast<__half*>(y.data), 0.f);
    } else {
      return internal("nchw_to_s2d: the output must be float16 or int8");
    }
    return cuda_status(cudaGetLastError(), "nchw_to_s2d");
  };
  switch (x.dtype) {
    case DType::kFloat32: return launch(static_cast<const float*>(x.data));
    case DType::kFloat16: return launch(static_cast<const __half*>(x.data));
    case DType::kInt8:
      if (y_type == DType::kInt8 && x.scale != scale) return internal("nchw_to_s2d: int8 to int8 keeps the scale");
      return launch(static_cast<const int8_t*>(x.data));
    default: return internal("nchw_to_s2d: the input must be float32, float16 or int8");
  }
}

Status convert_tensor(const TensorView& x, const TensorView& y, int N, int C, int HW, cudaStream_t s) {
  if (y.nhwc && (y.coff != 0 || y.ld < C)) return internal("convert_tensor: an NHWC output is a whole tensor");
  const int64_t total = static_cast<int64_t>(N) * HW * (y.nhwc ? y.ld : C);
  if (total == 0) return Status::ok();
  Status st;
  switch (x.dtype) {
    case DType::kFloat32: st = launch_convert<float>(x, y, C, HW, total, s); break;
    case DType::kFloat16: st = launch_convert<__half>(x, y, C, HW, total, s); break;
    case DType::kInt8: st = launch_convert<int8_t>(x, y, C, HW, total, s); break;
    default: return internal("convert_tensor: the input must be float32, float16 or int8");
  }
  QD_RETURN_IF_ERROR(st);
  return cuda_status(cudaGetLastError(), "convert_tensor");
}

Status nhwc_to_nchw(NhwcView x, void* y, DType y_type, int N, int C, int H, int W, cudaStream_t s) {
  const int64_t total = static_cast<int64_t>(N) * C * H * W;
  if (total == 0) return Status::ok();
  const auto* in = static_cast<const __half*>(x.data);
  if (y_type == DType::kFloat32) {
    nhwc_to_nchw_kernel<<<blocks_for(total), kThreads, 0, s>>>(in, x.ld, x.coff, static_cast<float*>(y), C, H * W,
                                                                 total);
  } else if (y_type == DType::kFloat16) {
    nhwc_to_nchw_kernel<<<blocks_for(total), kThreads, 0, s>>>(in, x.ld, x.coff, static_cast<__half*>(y), C,
                                                                 H * W, total);
  } else {
    return internal("nhwc_to_nchw: output must be float32 or float16");
  }
  return cuda_status(cudaGetLastError(), "nhwc_to_nchw");
}

Status maxpool_nhwc(NhwcView x, NhwcView y, const PoolParams& p, cudaStream_t s) {
  QD_RETURN_IF_ERROR(even("maxpool_nhwc", p.C, x, y));
  const int64_t elements = static_cast<int64_t>(p.N) * p.OH * p.OW * p.C;
  if (elements == 0) return Status::ok();
  QD_LAUNCH_NHWC(maxpool_nhwc_kernel, wide(p.C, x, y), elements, s, static_cast<const __half*>(x.data) + x.coff, x.ld,
                 static_cast<__half*>(y.data) + y.coff, y.ld, p);
  return cuda_status(cudaGetLastError(), "maxpool_nhwc");
}

// maxpool_chain_nhwc_kernel's shared memory: the plane and the row pass's result, 16 bytes of channels per pixel.
static size_t pool_chain_smem(int H, int W) { return 2 * static_cast<size_t>(H) * W * sizeof(uint4); }

bool maxpool_chain_fits(int C, int H, int W) { return C % 16 == 0 && pool_chain_smem(H, W) <= 48 * 1024; }

Status maxpool_chain_nhwc(NhwcView x, const NhwcView* outs, int count, int N, int C, int H, int W, int kh, int kw,
                          bool int8, cudaStream_t s) {
  bool ok = maxpool_chain_fits(C, H, W) && kh % 2 && kw % 2 && count > 0 && count <= kMaxPoolChain;
  const int elem = int8 ? 1 : 2;
  PoolChainOuts y{};
  for (int k = 0; k < count && ok; ++k) {
    ok = int8 ? wide_i8(C, x, outs[k]) : wide(C, x, outs[k]);
    y.p[k] = static_cast<char*>(outs[k].data) + static_cast<int64_t>(outs[k].coff) * elem;
    y.ld[k] = outs[k].ld * elem;
  }
  if (!ok) return internal("maxpool_chain_nhwc: unsupported shape, window or layout");
  const int groups = C * elem / 16;
  const int64_t blocks = static_cast<int64_t>(N) * groups;
  if (blocks == 0 || H * W == 0) return Status::ok();
  if (blocks > INT32_MAX) return internal("maxpool_chain_nhwc: too many images x channels");
  launch_pdl(int8 ? maxpool_chain_nhwc_kernel<true> : maxpool_chain_nhwc_kernel<false>,
             dim3(static_cast<unsigned>(blocks)), static_cast<unsigned>(std::clamp((H * W + 31) / 32 * 32, 128, 1024)),
             pool_chain_smem(H, W), s,
             static_cast<const char*>(x.data) + static_cast<int64_t>(x.coff) * elem, x.ld * elem, y, count, groups,
             H, W, kh / 2, kw / 2);
  return cuda_status(cudaGetLastError(), "maxpool_chain_nhwc");
}

Status maxpool_nhwc_i8(NhwcView x, NhwcView y, const PoolParams& p, cudaStream_t s) {
  const bool wide = wide_i8(p.C, x, y);
  const int64_t total = static_cast<int64_t>(p.N) * p.OH * p.OW * (wide ? p.C / 16 : p.C);
  if (total == 0) return Status::ok();
  const auto* in = static_cast<const int8_t*>(x.data) + x.coff;
  auto* out = static_cast<int8_t*>(y.data) + y.coff;
  if (wide) {
    launch_pdl(maxpool_nhwc_i8_kernel<true>, blocks_for(total), kThreads, 0, s, in, x.ld, out, y.ld, p, total);
  } else {
    launch_pdl(maxpool_nhwc_i8_kernel<false>, blocks_for(total), kThreads, 0, s, in, x.ld, out, y.ld, p, total);
  }
  return cuda_status(cudaGetLastError(), "maxpool_nhwc_i8");
}

Status upsample_nearest_nhwc(NhwcView x, NhwcView y, int N, int C, int H, int W, int fh, int fw, cudaStream_t s) {
  QD_RETURN_IF_ERROR(even("upsample_nearest_nhwc", C, x, y));
  const int64_t elements = static_cast<int64_t>(N) * H * fh * W * fw * C;
  if (elements == 0) return Status::ok();
  const bool w8 = wide(C, x, y);
  QD_LAUNCH_NHWC(upsample_nhwc_kernel, w8, elements, s, static_cast<const __half*>(x.data) + x.coff, x.ld,
                 static_cast<__half*>(y.data) + y.coff, y.ld, C / (w8 ? 8 : 2), H, W, fh, fw);
  return cuda_status(cudaGetLastError(), "upsample_nearest_nhwc");
}

Status upsample_nearest_nhwc_i8(NhwcView x, NhwcView y, int N, int C, int H, int W, int fh, int fw, cudaStream_t s) {
  if (C % 2 || x.ld % 2 || x.coff % 2 || y.ld % 2 || y.coff % 2) {
    return internal("upsample_nearest_nhwc_i8: channel count, strides and offsets must be even");
  }
  // Pairs of int8 channels move as the fp16 kernel's 2-byte elements.
  return upsample_nearest_nhwc({x.data, x.ld / 2, x.coff / 2}, {y.data, y.ld / 2, y.coff / 2}, N, C / 2, H, W, fh, fw,
                               s);
}

Status quantize_nhwc_i8(const void* x, bool x_nhwc, NhwcView x_view, NhwcView q, void* dq, NhwcView dq_view, int N,
                        int C, int H, int W, float scale, cudaStream_t s) {
  if (q.coff != 0 || q.ld < C || q.ld % 16) return internal("quantize_nhwc_i8: q must be whole, ld a multiple of 16");
  const int64_t pixels = static_cast<int64_t>(N) * H * W;
  if (pixels == 0) return Status::ok();
  auto* qp = static_cast<int8_t*>(q.data);
  const auto* xh = static_cast<const __half*>(x_view.data) + x_view.coff;
  auto* dqh = static_cast<__half*>(dq_view.data) + dq_view.coff;
  const bool x16 = x_nhwc && C % 16 == 0 && x_view.ld % 8 == 0 && reinterpret_cast<uintptr_t>(xh) % 16 == 0 &&
                   (dq == nullptr || (dq_view.ld % 8 == 0 && reinterpret_cast<uintptr_t>(dqh) % 16 == 0)) &&
                   pixels * q.ld < (int64_t{1} << 31);
  if (x16) {
    const int64_t total = pixels * (q.ld / 16);
    quantize_from_nhwc16_kernel<<<blocks_for(total), kThreads, 0, s>>>(xh, x_view.ld, qp, q.ld, dq ? dqh : nullptr,
                                                                        dq_view.ld, C, scale,
                                                                        static_cast<uint32_t>(total));
  } else if (x_nhwc) {
    const int64_t total = pixels * q.ld;
    quantize_from_nhwc_kernel<<<blocks_for(total), kThreads, 0, s>>>(
        static_cast<const __half*>(x_view.data) + x_view.coff, x_view.ld, qp, q.ld,
        static_cast<__half*>(dq_view.data) + dq_view.coff, dq_view.ld, C, scale, total);
  } else {
    quantize_from_nchw_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(static_cast<const float*>(x), qp, q.ld,
                                                                       static_cast<float*>(dq), C, H * W, scale,
                                                                       pixels);
  }
  return cuda_status(cudaGetLastError(), "quantize_nhwc_i8");
}

Status copy_channels_nhwc(NhwcView x, NhwcView y, int N, int C, int H, int W, cudaStream_t s) {
  QD_RETURN_IF_ERROR(even("copy_channels_nhwc", C, x, y));
  const int64_t elements = static_cast<int64_t>(N) * H * W * C;
  if (elements == 0) return Status::ok();
  const bool w8 = wide(C, x, y);
  QD_LAUNCH_NHWC(copy_channels_kernel, w8, elements, s, static_cast<const __half*>(x.data) + x.coff, x.ld,
                 static_cast<__half*>(y.data) + y.coff, y.ld, C / (w8 ? 8 : 2));
  return cuda_status(cudaGetLastError(), "copy_channels_nhwc");
}

}  // namespace qd::cuda
