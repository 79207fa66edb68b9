// Fused letterbox + pad + normalize + channel order + layout + dtype: each thread computes a few output pixels of a row.
//
// The kernel executes the host's LetterboxPlan with the formulas of tasks/preprocess.h, bit for bit: every
// floating-point operation that the CPU rounds separately is written with an explicit _rn intrinsic, because nvcc
// would otherwise contract a * b + c into one fused multiply-add (a different rounding) — the CPU build (plain x86-64,
// no FMA) never does. Integer steps (the fixed-point taps) are exact anyway. Each output pixel is computed straight
// from the source image, so the two-stage YOLOv5 val letterbox (load_image's resize, then the letterbox resize) needs
// no intermediate image: the second stage samples the first on the fly.
#include "tasks/cuda/kernels/preprocess.h"

#include <cstddef>

#include "backends/cuda/cuda_util.h"

namespace qd::cuda {

namespace {

// ---------------------------------------------------------------- scalar helpers (the CPU's std:: semantics)

__device__ __forceinline__ int clamp_u8(int v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }
// std::min / std::max on doubles, NaN behaviour included: min(a, b) = (b < a) ? b : a.
__device__ __forceinline__ double std_min(double a, double b) { return (b < a) ? b : a; }
// (dx + 0.5) * scale - 0.5 in double, then to float: the source coordinate of an output pixel (resize_linear).
__device__ __forceinline__ float src_coord(int d, double scale) {
  return __double2float_rn(__dsub_rn(__dmul_rn(__dadd_rn(static_cast<double>(d), 0.5), scale), 0.5));
}
// round_half_even((1 - a) * 2048) and round_half_even(a * 2048) in float (the products are exact).
__device__ __forceinline__ int coef0(float a) { return __float2int_rn(__fmul_rn(__fsub_rn(1.f, a), 2048.f)); }
__device__ __forceinline__ int coef1(float a) { return __float2int_rn(__fmul_rn(a, 2048.f)); }

// ---------------------------------------------------------------- pixel sources

// The source image: w x h, HWC RGB bytes.
struct RawSource {
  const uint8_t* p;
  int w, h;
  __device__ __forceinline__ void px(int x, int y, int v[3]) const {
    const uint8_t* q = p + (static_cast<size_t>(y) * w + x) * 3;
    v[0] = q[0], v[1] = q[1], v[2] = q[2];
  }
};

template <class Src>
__device__ void sample(const ResampleStep& st, const Src& src, int x, int y, int v[3]);

// The output of one resampling step over another source, computed pixel by pixel on demand.
template <class Src>
struct StepSource {
  const ResampleStep* st;
  Src src;
  __device__ __forceinline__ void px(int x, int y, int v[3]) const { sample(*st, src, x, y, v); }
};

// ---------------------------------------------------------------- resampling steps (one output pixel each)

// INTER_LINEAR (tasks/preprocess.h, resize_linear): 11-bit fixed-point weights, the horizontal pass per source row,
// OpenCV's vertical rounding.
template <class Src>
__device__ void sample_linear(const ResampleStep& st, const Src& src, int dx, int dy, int v[3]) {
  const int sw = st.src_w, sh = st.src_h;
  float fx = src_coord(dx, st.scale_x);
  int sx = static_cast<int>(floorf(fx));
  fx = __fsub_rn(fx, static_cast<float>(sx));
  if (sx < 0) fx = 0.f, sx = 0;
  const bool edge = sx + 1 >= sw;
  if (sx >= sw - 1) fx = 0.f, sx = sw - 1;
  const int xw0 = coef0(fx), xw1 = coef1(fx);

  float fy = src_coord(dy, st.scale_y);
  const int sy = static_cast<int>(floorf(fy));
  fy = __fsub_rn(fy, static_cast<float>(sy));
  const int b0 = coef0(fy), b1 = coef1(fy);
  const int r0 = min(max(sy, 0), sh - 1), r1 = min(max(sy + 1, 0), sh - 1);

  int a[3], b[3], h0[3], h1[3];
  src.px(sx, r0, a);
  if (edge) {
    for (int c = 0; c < 3; ++c) h0[c] = a[c] * 2048;
  } else {
    src.px(sx + 1, r0, b);
    for (int c = 0; c < 3; ++c) h0[c] = a[c] * xw0 + b[c] * xw1;
  }
  src.px(sx, r1, a);
  if (edge) {
    for (int c = 0; c < 3; ++c) h1[c] = a[c] * 2048;
  } else {
    src.px(sx + 1, r1, b);
    for (int c = 0; c < 3; ++c) h1[c] = a[c] * xw0 + b[c] * xw1;
  }
  for (int c = 0; c < 3; ++c) {
    const int s = (((h0[c] >> 4) * b0) >> 16) + (((h1[c] >> 4) * b1) >> 16);
    v[c] = clamp_u8((s + 2) >> 2);
  }
}

// Integer kx x ky box average (resizeAreaFast).
template <class Src>
__device__ void sample_area_fast(const ResampleStep& st, const Src& src, int dx, int dy, int v[3]) {
  int sum[3] = {0, 0, 0}, p[3];
  for (int j = 0; j < st.ky; ++j) {
    for (int i = 0; i < st.kx; ++i) {
      src.px(dx * st.kx + i, dy * st.ky + j, p);
      for (int c = 0; c < 3; ++c) sum[c] += p[c];
    }
  }
  if (st.kx == 2 && st.ky == 2) {
    for (int c = 0; c < 3; ++c) v[c] = (sum[c] + 2) >> 2;
  } else {
    const float inv_area = __fdiv_rn(1.f, static_cast<float>(st.kx * st.ky));
    for (int c = 0; c < 3; ++c) v[c] = clamp_u8(__float2int_rn(__fmul_rn(static_cast<float>(sum[c]), inv_area)));
  }
}

// The taps of one output coordinate along one axis of INTER_AREA (OpenCV's computeResizeAreaTab, in its order): an
// optional partial first pixel, whole pixels [mid_begin, mid_end), an optional partial last pixel.
struct AreaTaps {
  int first = -1, mid_begin = 0, mid_end = 0, last = -1;
  float w_first = 0, w_mid = 0, w_last = 0;
};

__device__ AreaTaps area_taps(int d, int ssize, double scale) {
  AreaTaps t;
  const double fs1 = __dmul_rn(static_cast<double>(d), scale);
  const double fs2 = __dadd_rn(fs1, scale);
  const double cell = std_min(scale, __dsub_rn(static_cast<double>(ssize), fs1));
  int s1 = static_cast<int>(ceil(fs1)), s2 = static_cast<int>(floor(fs2));
  s2 = min(s2, ssize - 1);
  s1 = min(s1, s2);
  const double lead = __dsub_rn(static_cast<double>(s1), fs1);
  if (lead > 1e-3) {
    t.first = s1 - 1;
    t.w_first = __double2float_rn(__ddiv_rn(lead, cell));
  }
  t.mid_begin = s1;
  t.mid_end = s2;
  t.w_mid = __double2float_rn(__ddiv_rn(1.0, cell));
  const double tail = __dsub_rn(fs2, static_cast<double>(s2));
  if (tail > 1e-3) {
    t.last = s2;
    t.w_last = __double2float_rn(__ddiv_rn(std_min(std_min(tail, 1.0), cell), cell));
  }
  return t;
}

// One source row's contribution: buf += pixel * weight over the x taps, in tap order (float, as resize_area).
template <class Src>
__device__ __forceinline__ void area_row(const Src& src, const AreaTaps& tx, int sy, float buf[3]) {
  int p[3];
  auto add = [&](int sx, float w) {
    src.px(sx, sy, p);
    for (int c = 0; c < 3; ++c) buf[c] = __fadd_rn(buf[c], __fmul_rn(static_cast<float>(p[c]), w));
  };
  if (tx.first >= 0) add(tx.first, tx.w_first);
  for (int sx = tx.mid_begin; sx < tx.mid_end; ++sx) add(sx, tx.w_mid);
  if (tx.last >= 0) add(tx.last, tx.w_last);
}

// INTER_AREA with fractional factors: sum over rows of w_y * (sum over columns of pixel * w_x), float, tap order.
template <class Src>
__device__ void sample_area(const ResampleStep& st, const Src& src, int dx, int dy, int v[3]) {
  const AreaTaps tx = area_taps(dx, st.src_w, st.scale_x);
  const AreaTaps ty = area_taps(dy, st.src_h, st.scale_y);
  float sum[3] = {0.f, 0.f, 0.f};
  auto add_row = [&](int sy, float wy) {
    float buf[3] = {0.f, 0.f, 0.f};
    area_row(src, tx, sy, buf);
    for (int c = 0; c < 3; ++c) sum[c] = __fadd_rn(sum[c], __fmul_rn(wy, buf[c]));
  };
  if (ty.first >= 0) add_row(ty.first, ty.w_first);
  for (int sy = ty.mid_begin; sy < ty.mid_end; ++sy) add_row(sy, ty.w_mid);
  if (ty.last >= 0) add_row(ty.last, ty.w_last);
  for (int c = 0; c < 3; ++c) v[c] = clamp_u8(__float2int_rn(sum[c]));
}

template <class Src>
__device__ void sample(const ResampleStep& st, const Src& src, int x, int y, int v[3]) {
  switch (st.method) {
    case ResampleMethod::kCopy: src.px(x, y, v); return;
    case ResampleMethod::kLinear: sample_linear(st, src, x, y, v); return;
    case ResampleMethod::kAreaFast: sample_area_fast(st, src, x, y, v); return;
    case ResampleMethod::kArea: sample_area(st, src, x, y, v); return;
  }
}

// cv::warpAffine, INTER_LINEAR, constant border (LetterboxStyle::kCuDLA): 1/32-pixel fixed-point source positions.
__device__ void sample_warp(const LetterboxPlan& p, const RawSource& src, int x, int y, int v[3]) {
  const double* m = p.inv_map;
  const int x0 = __double2int_rn(__dmul_rn(__dadd_rn(__dmul_rn(m[1], y), m[2]), 1024.0)) + 16;
  const int y0 = __double2int_rn(__dmul_rn(__dadd_rn(__dmul_rn(m[4], y), m[5]), 1024.0)) + 16;
  const int adelta = __double2int_rn(__dmul_rn(__dmul_rn(m[0], x), 1024.0));
  const int bdelta = __double2int_rn(__dmul_rn(__dmul_rn(m[3], x), 1024.0));
  const int X = (x0 + adelta) >> 5, Y = (y0 + bdelta) >> 5;
  const int sx = X >> 5, sy = Y >> 5, fx = X & 31, fy = Y & 31;
  const int w[4] = {(32 - fy) * (32 - fx) * 32, (32 - fy) * fx * 32, fy * (32 - fx) * 32, fy * fx * 32};
  const bool in_x0 = sx >= 0 && sx < src.w, in_x1 = sx + 1 >= 0 && sx + 1 < src.w;
  const bool in_y0 = sy >= 0 && sy < src.h, in_y1 = sy + 1 >= 0 && sy + 1 < src.h;
  const int pad = p.pad_value;
  int t0[3] = {pad, pad, pad}, t1[3] = {pad, pad, pad}, t2[3] = {pad, pad, pad}, t3[3] = {pad, pad, pad};
  if (in_x0 && in_y0) src.px(sx, sy, t0);
  if (in_x1 && in_y0) src.px(sx + 1, sy, t1);
  if (in_x0 && in_y1) src.px(sx, sy + 1, t2);
  if (in_x1 && in_y1) src.px(sx + 1, sy + 1, t3);
  for (int c = 0; c < 3; ++c) {
    v[c] = clamp_u8((t0[c] * w[0] + t1[c] * w[1] + t2[c] * w[2] + t3[c] * w[3] + (1 << 14)) >> 15);
  }
}

// ---------------------------------------------------------------- the kernel

constexpr int kPixelsX = 4;  // output pixels per thread along a row

template <typename T, bool kNchw>
__device__ __forceinline__ void letterbox_pixel(const LetterboxJob& job, const uint8_t* __restrict__ staging,
                                                int out_w, int out_h, const T* __restrict__ table, int c0, int c1,
                                                int c2, T* __restrict__ out, int n, int x, int y) {
  const LetterboxPlan& p = job.plan;
  const RawSource raw{staging + job.src_offset, p.info.orig_w, p.info.orig_h};
  int v[3] = {p.pad_value, p.pad_value, p.pad_value};
  if (p.style == LetterboxStyle::kCuDLA) {
    sample_warp(p, raw, x, y, v);
  } else {
    const int cx = x - p.left, cy = y - p.top;
    if (cx >= 0 && cy >= 0 && cx < p.steps[1].dst_w && cy < p.steps[1].dst_h) {
      if (p.steps[0].method == ResampleMethod::kCopy) {
        sample(p.steps[1], raw, cx, cy, v);
      } else if (p.steps[1].method == ResampleMethod::kCopy) {
        sample(p.steps[0], raw, cx, cy, v);
      } else {
        sample(p.steps[1], StepSource<RawSource>{&p.steps[0], raw}, cx, cy, v);
      }
    }
  }
  // Output channel c takes RGB channel c0/c1/c2 and the table row of c (its mean / stddev).
  const T o0 = table[v[c0]], o1 = table[256 + v[c1]], o2 = table[512 + v[c2]];
  const size_t plane = static_cast<size_t>(out_w) * out_h;
  const size_t pix = static_cast<size_t>(y) * out_w + x;
  if (kNchw) {
    T* base = out + static_cast<size_t>(n) * 3 * plane + pix;
    base[0] = o0;
    base[plane] = o1;
    base[2 * plane] = o2;
  } else {
    T* base = out + (static_cast<size_t>(n) * plane + pix) * 3;
    base[0] = o0;
    base[1] = o1;
    base[2] = o2;
  }
}

template <typename T, bool kNchw>
__global__ void __launch_bounds__(256) letterbox_pack_kernel(const uint8_t* __restrict__ staging, int out_w, int out_h,
                                                             const T* __restrict__ table, int c0, int c1, int c2,
                                                             T* __restrict__ out) {
  // The job (~200 bytes) is read once per block into shared memory rather than by every thread.
  // (Raw words: a __shared__ variable cannot have LetterboxJob's default member initializers.)
  constexpr int kWords = sizeof(LetterboxJob) / 4;
  static_assert(sizeof(LetterboxJob) % 4 == 0 && alignof(LetterboxJob) <= 8, "copied as 32-bit words");
  __shared__ alignas(8) uint32_t job_words[kWords];
  const int n = blockIdx.z;
  {
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const uint32_t* src = reinterpret_cast<const uint32_t*>(staging + static_cast<size_t>(n) * sizeof(LetterboxJob));
    for (int i = tid; i < kWords; i += blockDim.x * blockDim.y) job_words[i] = src[i];
  }
  __syncthreads();
  const LetterboxJob& job = *reinterpret_cast<const LetterboxJob*>(job_words);
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (y >= out_h) return;
  // kPixelsX pixels per thread along the row, blockDim.x apart (stores stay coalesced): fewer blocks, each loading
  // the job once for more pixels.
  const int x_end = min(out_w, static_cast<int>((blockIdx.x + 1) * blockDim.x * kPixelsX));
  for (int x = blockIdx.x * blockDim.x * kPixelsX + threadIdx.x; x < x_end; x += blockDim.x) {
    letterbox_pixel<T, kNchw>(job, staging, out_w, out_h, table, c0, c1, c2, out, n, x, y);
  }
}

template <typename T>
Status launch_typed(const PackLaunch& p, const T* table, cudaStream_t stream) {
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.out_w, block.x * kPixelsX)),
                  static_cast<unsigned>(ceil_div(p.out_h, block.y)), static_cast<unsigned>(p.n));
  T* out = static_cast<T*>(p.out);
  const int* sc = p.src_channel;
  if (p.layout == TensorLayout::kNCHW) {
    letterbox_pack_kernel<T, true><<<grid, block, 0, stream>>>(p.staging, p.out_w, p.out_h, table, sc[0], sc[1], sc[2],
                                                               out);
  } else {
    letterbox_pack_kernel<T, false><<<grid, block, 0, stream>>>(p.staging, p.out_w, p.out_h, table, sc[0], sc[1],
                                                                sc[2], out);
  }
  QD_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace

Status launch_letterbox_pack(const PackLaunch& p, cudaStream_t stream) {
  if (p.n < 1 || p.n > 65535) return invalid("GPU preprocessing: a batch holds 1..65535 images");
  if (p.out_w < 1 || p.out_h < 1 || p.out_w > kMaxImageSide || p.out_h > kMaxImageSide) {
    return invalid("GPU preprocessing: bad output size");
  }
  for (int c : p.src_channel) {
    if (c < 0 || c > 2) return invalid("GPU preprocessing: bad channel order");
  }
  // p.table is a device pointer: the columns are found by offset, never dereferenced here.
  const char* t = reinterpret_cast<const char*>(p.table);
  switch (p.dtype) {
    case DType::kFloat32:
      return launch_typed(p, reinterpret_cast<const float*>(t + offsetof(TensorValueTable, f32)), stream);
    case DType::kFloat16:
      return launch_typed(p, reinterpret_cast<const uint16_t*>(t + offsetof(TensorValueTable, f16)), stream);
    case DType::kInt8:
      return launch_typed(p, reinterpret_cast<const int8_t*>(t + offsetof(TensorValueTable, i8)), stream);
    default: return unsupported(std::string("GPU preprocessing: output type ") + dtype_name(p.dtype));
  }
}

}  // namespace qd::cuda
