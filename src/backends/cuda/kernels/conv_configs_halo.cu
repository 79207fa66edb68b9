// Convolution configurations: conv_warp_halo_kernel's: the thin 3x3 layers and the image stems.
// Their kernels are instantiated in a translation unit apart from the other kinds' so that they compile in parallel;
// conv_igemm.cu numbers all units' entries in one list (plans and timing caches record a choice by its name).
#include "backends/cuda/kernels/conv_igemm_kernels.cuh"

namespace qd::cuda {
namespace {

// A warp's accumulators at their start: kAccBias in the lean copies (AccForm::kAccBiased), else zero.
template <bool kLean, typename Acc, int kMT, int kNT>
__device__ __forceinline__ void start_acc(Acc (&acc)[kMT][kNT][4]) {
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = kLean ? kAccBias : 0;
}

// The lean copies of the warp kernels stage their weight rows permuted within each 32 outputs: MMA column 8 j + 2 t + e
// (n-tile j of four, lane t of a quad, e = 0, 1) computes output channel quad_channel(8 j + 2 t + e) = 8 t + 2 j + e,
// so that a lane's four n-tiles hold 8 consecutive channels of each of its pixels, which it stores with one 8-byte
// store (direct8). The quad epilogue transposes the fragments across the quad's lanes instead (two shuffles and
// their byte permutes, about an eighth of its instructions per value), and the stems and the C3 3x3
// stored 2-byte pairs, four stores where one does. The map swaps bits 1-2 and 3-4 of the index: its own inverse.
__host__ __device__ constexpr int quad_channel(int n) {
  return (n & ~31) | (n >> 1 & 3) << 3 | (n >> 3 & 3) << 1 | (n & 1);
}
static_assert(quad_channel(2) == 8 && quad_channel(8) == 2 && quad_channel(31) == 31 && quad_channel(45) == 51,
              "quad_channel");

// The block's weights into shared memory, rows of w_row bytes: row k holds the first `used` bytes of row k of the
// packed weights (row_bytes apart; lean copies: of row quad_channel(k)) where that is below K, zeros elsewhere. The
// 128 threads of a warp kernel's block, before the input's wait (the weights are constants). kLean (INT8 SiLU, K a
// multiple of 8): each even row's last 16 bytes (the padding against bank conflicts, which ldmatrix never reads)
// hold channels k and k + 1's SiLU constants, halved (HalfPair), which the lean epilogues read there.
struct HalfPair {
  float s0, s1, b0, b1;  // alpha / 2 and bias / 2 of a channel pair: SiLU's h = x / 2 in one FMA (ChannelPair)
};
template <bool kLean>
__device__ __forceinline__ void stage_weights(unsigned char* ws, const ConvParams& p, const ConvArgs& a,
                                              int64_t row_bytes, int rows, int w_row, int used) {
  for (int i = threadIdx.x; i < rows * w_row / 16; i += 128) {
    const int k = i / (w_row / 16), off = i % (w_row / 16) * 16, src = kLean ? quad_channel(k) : k;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (src < p.K && off < used) {
      v = *reinterpret_cast<const uint4*>(static_cast<const char*>(a.w) + src * row_bytes + off);
    } else if (kLean && off == w_row - 16 && k % 2 == 0 && k < p.K) {
      const HalfPair c{0.5f * a.alpha[k], 0.5f * a.alpha[k + 1], 0.5f * a.bias[k], 0.5f * a.bias[k + 1]};
      v = *reinterpret_cast<const uint4*>(&c);
    }
    *reinterpret_cast<uint4*>(ws + k * w_row + off) = v;
  }
}
// Channels c, c + 1's constants (c even, below K) from the staged weights' padding.
__device__ __forceinline__ HalfPair pair_constants(const unsigned char* ws, int w_row, int c) {
  const float4 v = *reinterpret_cast<const float4*>(ws + c * w_row + w_row - 16);
  return {v.x, v.y, v.z, v.w};
}

// The direct epilogue's 8 bytes of one pixel: rows h of the fragments f[j0 .. j0 + 3] (this lane's channels k ..
// k + 7 of the pixel, their constants ch[j] those of k + 2 j, k + 2 j + 1), SiLU from the biased accumulators (the
// lean copies' kAccBiased), plus the residual's 8 values at `res` (kRes: 0 none, 1 fp16, 2 int8; aligned: staging's
// conditions), quantized with r255 (int8_rcp255). The quad epilogue's values, so its integers.
template <int kRes, int kNT>
__device__ __forceinline__ uint2 direct8(const ConvParams& p, const int (&f)[kNT][4], int j0, int h,
                                         const HalfPair (&ch)[4], float r255, const void* res) {
  float v[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = silu_tanh_half(fmaf(acc_float<kAccBiased>(f[j0 + j][2 * h]), ch[j].s0, ch[j].b0));
    v[2 * j + 1] = silu_tanh_half(fmaf(acc_float<kAccBiased>(f[j0 + j][2 * h + 1]), ch[j].s1, ch[j].b1));
  }
  if constexpr (kRes == 1) {
    const uint4 r = *static_cast<const uint4*>(res);
    const __half2* r2 = reinterpret_cast<const __half2*>(&r);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[2 * j] += __low2float(r2[j]), v[2 * j + 1] += __high2float(r2[j]);
  } else if constexpr (kRes == 2) {
    const uint2 r = *static_cast<const uint2*>(res);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      v[e] += __fmul_rn(int8_float(r.x, e), p.res_scale);
      v[4 + e] += __fmul_rn(int8_float(r.y, e), p.res_scale);
    }
  }
  float q[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) q[e] = quantize_int8_biased(v[e], r255);
  return make_uint2(pack_int8_biased(q[0], q[1], q[2], q[3]), pack_int8_biased(q[4], q[5], q[6], q[7]));
}

// A lean copy's int8_rcp255 for this lane's channels of each four n-tiles (out_split a multiple of 8), once per warp.
template <int kGroups>
__device__ __forceinline__ void direct_r255(const ConvParams& p, int lane, float (&r255)[kGroups]) {
  const float lo = int8_rcp255(p.out_scale), hi = int8_rcp255(p.out_scale_hi);
#pragma unroll
  for (int g = 0; g < kGroups; ++g) r255[g] = g * 32 + (lane & 3) * 8 < p.out_split ? lo : hi;
}

// The lean copies' epilogue over permuted weights (quad_channel) for a warp's tile of kMT x 16 pixels from m0 and
// kNT x 8 outputs from channel 0: each lane stores its 8 channels (k = 8 t of each 32) of each of its pixels, their
// constants from the staged weights (ws, rows of w_row bytes).
template <int kRes, int kMT, int kNT>
__device__ __forceinline__ void direct_epilogue_res(const ConvParams& p, const ConvArgs& a, int M, int m0, int lane,
                                                    const int (&acc)[kMT][kNT][4], const unsigned char* ws,
                                                    int w_row, const float (&r255)[kNT / 4]) {
  static_assert(kNT % 4 == 0, "four n-tiles per lane's 8 channels");
  int8_t* const y = static_cast<int8_t*>(a.y) + p.out_coff;
#pragma unroll
  for (int jg = 0; jg < kNT; jg += 4) {
    const int k = jg * 8 + (lane & 3) * 8;
    if (k >= p.K) continue;  // K a multiple of 8: the lane's 8 channels are in or out
    HalfPair ch[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) ch[j] = pair_constants(ws, w_row, k + 2 * j);
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + i * 16 + (lane >> 2) + h * 8;
        if (m >= M) continue;
        const int64_t r = static_cast<int64_t>(m) * p.res_ld + k;
        const void* rp = nullptr;
        if constexpr (kRes == 1) rp = a.residual + r;
        if constexpr (kRes == 2) rp = a.residual_i8 + r;
        *reinterpret_cast<uint2*>(y + static_cast<int64_t>(m) * p.out_ld + k) =
            direct8<kRes>(p, acc[i], jg, h, ch, r255[jg / 4], rp);
      }
  }
}
template <int kMT, int kNT>
__device__ __forceinline__ void direct_epilogue(const ConvParams& p, const ConvArgs& a, int M, int m0, int lane,
                                                const int (&acc)[kMT][kNT][4], const unsigned char* ws, int w_row,
                                                const float (&r255)[kNT / 4]) {
  if (a.residual) {
    direct_epilogue_res<1>(p, a, M, m0, lane, acc, ws, w_row, r255);
  } else if (a.residual_i8) {
    direct_epilogue_res<2>(p, a, M, m0, lane, acc, ws, w_row, r255);
  } else {
    direct_epilogue_res<0>(p, a, M, m0, lane, acc, ws, w_row, r255);
  }
}

// A 3x3 stride-1 pad-1 convolution with at most 32 outputs over 16 or 32 input channels, by warps that each work alone
// (no barrier after the weights' load): a warp takes 32 output columns of a strip of rows and sweeps down it a row at
// a time, its input rows (34 pixels with the halo) in a ring of 4 in its own shared memory, filled a row ahead, and
// its tensor-core fragments read from there (pixels' 16-byte chunks XOR-swizzled, so that ldmatrix's 8 rows fall in
// distinct banks). The MMAs of a step share their weight fragments (ldmatrix from the block's copy, rows padded by
// 16 bytes against bank conflicts). Two sources:
// - kActs: a thin layer's NHWC activations (32 channels, pixels 16-byte aligned), copied into the ring by cp.async;
//   the implicit GEMM's im2col re-reads each input pixel 9 times through L2 and, for these layers (YOLOv5's C3
//   bottleneck 3x3 at 160 x 160), had tiles of 32 outputs. Timing picks it for INT8 there; in fp16 the implicit
//   GEMM stays faster.
// - the stem's image (3 channels), with the space-to-depth pass (and for INT8 the quantization) folded in: the conv
//   is the 3x3 one over the space-to-depth input, whose pixel (i, j) holds the image's 2 x 2 pixels (2i + dy, 2j + dx)
//   as channels (dy * 2 + dx) * 3 + c (12 of 16; lower.cpp's space_to_depth_weights orders the weights so). Each lane
//   loads the image values of its space-to-depth pixel (lanes 0 and 1 a second, the halo's) into registers a row
//   before it converts (fp16) or quantizes (INT8, the contract's exact rule) them and writes the pixel whole. An
//   int8 image (kImageI8Nhwc, an int8:nhwc input binding) is copied: the pixel's two rows of 6 bytes, then zeros.
//   conv_stem_halo_kernel, which this replaces where the input is the image, took a block-wide barrier per row (three
//   with its epilogue's), four warps working on each row together, and a separate pass for the space-to-depth (Nsight
//   Compute: SM 40%, DRAM 17% of peak at batch 32).
// The usual epilogue (NHWC fp16 or int8 output, SiLU, a residual or not; not bit-exact) stores from the registers with
// the channels' constants loaded once; the others go through the warp's own tile (the stem: tile_epilogue with 32
// threads) or igemm_epilogue (kActs: not a staged configuration, so bit-exact SiLU layers do not take it).
// Registers are capped for 4 blocks per SM: a first version, two output rows per step, took 206 registers, 8 warps
// per SM, and was bound by latency (Nsight Compute: 4.3 cycles per issued instruction). kI8: m16n8k32 (the stem on two
// taps per step, a tenth of zero weights), else m16n8k16.
// kLean (INT8, where halo_lean_fits): the usual epilogue alone, with accumulators converted without I2F (lean_fits'
// reasons; the image stem spills at its 128-register cap with the others compiled in). kMinBlocks: the blocks per SM
// the registers are capped for (some lean copies also come with 5 or 6: more warps to hide latency, fewer registers).
template <bool kI8, int kSrc, bool kLean = false, int kMinBlocks = 4>
__global__ void __launch_bounds__(128, kMinBlocks) conv_warp_halo_kernel(const ConvParams p, const ConvArgs a) {
  using Acc = std::conditional_t<kI8, int, float>;
  constexpr bool kImage = kSrc != kActs;
  constexpr bool kNchw = kSrc == kImageF16Nchw || kSrc == kImageF32Nchw;
  constexpr bool kBytes = kSrc == kImageI8Nhwc;  // the image's int8 values, copied as they are
  static_assert(kI8 || !kBytes, "an int8 image feeds INT8 stems only");
  static_assert(kI8 || !kLean, "lean copies are INT8's");
  using TX = std::conditional_t<kSrc == kImageF32Nhwc || kSrc == kImageF32Nchw, float,
                                std::conditional_t<kBytes, int8_t, __half>>;  // the image's
  using Raw = std::conditional_t<std::is_same_v<TX, float>, float2, uint32_t>;  // two neighbouring image values
  constexpr WarpHaloLayout kL(kI8, kImage);
  constexpr int kWarps = kL.warps, kCols = kL.cols, kBN = kL.bn, kCin = 3;
  constexpr int kPix = kCols + 2;                // pixels in a ring row, with the halo
  constexpr int kPixBytes = kL.pix_bytes;
  constexpr int kChunks = kPixBytes / 16;
  constexpr int kSlot = kL.slot;                 // a ring row
  constexpr int kRing = kL.ring_rows;            // rows oh - 1 .. oh + 1 for output row oh, and oh + 2 loading
  constexpr bool kTapPairs = kI8 && kImage;      // m16n8k32 over two 16-channel taps
  constexpr int kWRow = kL.w_row;                // + 16: the 8 rows an ldmatrix phase reads in distinct banks
  constexpr int kSteps = kTapPairs ? 5 : 9 * kPixBytes / 32;
  constexpr int kPairs = 2 * kCin;               // image value pairs per space-to-depth pixel
  // fp16 from an fp16 NHWC image: pair q is channels 2q, 2q + 1 as they are in memory, copied without conversion.
  constexpr bool kCopy = !kI8 && kSrc == kImageF16Nhwc;
  extern __shared__ __align__(16) unsigned char halo_smem[];
  unsigned char* ws = halo_smem;                                             // [kBN][kWRow]
  unsigned char* ring = ws + kL.weights + (threadIdx.x >> 5) * kRing * kSlot;  // this warp's [kRing][kSlot]
  // The warp's staged-epilogue tile (the stem's only: bit-exact plans need its exact path, the lowering having chosen
  // the image kernels before timing; the kActs ones, without it, fit 4 blocks per SM instead of 3 in fp16).
  float* tile = reinterpret_cast<float*>(ws + kL.weights + kL.rings) + (threadIdx.x >> 5) * kCols * kBN;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Chunk c of pixel px in a ring row.
  const auto chunk_at = [](int px, int c) { return px * kPixBytes + ((c ^ (px / (8 / kChunks) % kChunks)) << 4); };
  static_assert(kWarps * 32 == 128, "stage_weights' threads");
  stage_weights<kLean>(ws, p, a, int64_t{p.Kp} * (kI8 ? 1 : 2), kBN, kWRow, 9 * kPixBytes);
  __syncthreads();
  // This warp's task: image n, output columns c0 .. c0 + 31, rows oh0 .. oh1 - 1 (a strip; the grid's y extent).
  const int groups = p.OW / kCols;
  const int task = blockIdx.x * kWarps + warp;
  const int rows = (p.OH + gridDim.y - 1) / gridDim.y;
  const int n = task / groups, c0 = task % groups * kCols;
  const int oh0 = blockIdx.y * rows, oh1 = min(p.OH, oh0 + rows);
  if (n >= p.N || oh0 >= oh1) return;

  // kActs: input row ih (zeros outside the image and past the strip's last row oh1) into its slot, one commit group.
  const auto load_row = [&](int ih) {
    const bool row_ok = ih >= 0 && ih < p.H && ih <= oh1;
    const char* src_row = static_cast<const char*>(a.x) + (static_cast<int64_t>(n) * p.H + ih) * p.W * p.in_ld *
                                                                (kI8 ? 1 : 2);
    unsigned char* slot = ring + (ih & (kRing - 1)) * kSlot;
    for (int i = lane; i < kPix * kChunks; i += 32) {
      const int px = i / kChunks, c = i % kChunks, iw = c0 - 1 + px;
      const bool ok = row_ok && iw >= 0 && iw < p.W;
      cp_async16(smem_addr(slot + chunk_at(px, c)), ok ? src_row + (iw * p.in_ld * (kI8 ? 1 : 2) + c * 16) : a.x,
                 ok ? 16 : 0);
    }
    cp_async_commit();
  };

  // The stem: this lane's space-to-depth pixels, lane and (lanes 0 and 1) the halo's 32 and 33 (columns c0 - 1 + px).
  const int IH = 2 * p.H, IW = 2 * p.W;
  const TX* img = static_cast<const TX*>(a.x) + static_cast<int64_t>(n) * kCin * IH * IW;
  const float rcp = __frcp_rn(p.in_scale);
  Raw raw[2][kPairs];
  // Where a pixel's values are converted (not copied), the halo's two pixels (ring columns 32 and 33) go a value per
  // lane: lane l < 24 has channel l % 12 of pixel 32 + l / 12, lanes 24-31 write their channels 12-15 (zeros). Lanes
  // 0 and 1 converting them whole made the warp issue a second pixel's conversion per row for two lanes.
  constexpr bool kSplitHalo = !kCopy && !kBytes;
  TX halo_raw{};
  const int halo_px = lane < 24 ? 32 + lane / 12 : 32 + (lane - 24) / 4;
  const int halo_ch = lane < 24 ? lane % 12 : 12 + (lane - 24) % 4;
  // Space-to-depth row ih into registers; zeros outside the image and past the strip's last row oh1.
  const auto fetch = [&](int ih) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if constexpr (kSplitHalo) {
        if (k == 1) {  // channel e = (dy * 2 + dx) * 3 + c: image row 2 ih + dy, column 2 iw + dx
          const int e = halo_ch, iw = c0 - 1 + halo_px, c = e % kCin, dy = e / (2 * kCin), dx = e / kCin % 2;
          const bool ok = lane < 24 && ih >= 0 && ih < p.H && ih <= oh1 && iw < p.W;
          const TX* src = img + (kNchw ? (c * IH + 2 * ih + dy) * IW + 2 * iw + dx
                                       : ((2 * ih + dy) * IW + 2 * iw + dx) * kCin + c);
          halo_raw = ok ? __ldg(src) : TX{};
          break;
        }
      }
      const int iw = c0 - 1 + lane + 32 * k;
      const bool ok = (k == 0 || lane < 2) && ih >= 0 && ih < p.H && ih <= oh1 && iw >= 0 && iw < p.W;
      // Pair q's first value: NCHW plane c = q % 3, image row 2 ih + dy (dy = q / 3), columns 2 iw, 2 iw + 1; NHWC
      // image row 2 ih + dy, values 2 (q % 3), + 1 of pixels 2 iw, 2 iw + 1.
      const TX* at = img + (kNchw ? (2 * ih) * IW + 2 * iw : ((2 * ih) * IW + 2 * iw) * kCin);
#pragma unroll
      for (int q = 0; q < kPairs; ++q) {
        const TX* src = at + (kNchw ? ((q % kCin) * IH + q / kCin) * IW : (q / kCin) * IW * kCin + 2 * (q % kCin));
        if constexpr (std::is_same_v<TX, float>) {
          raw[k][q] = ok ? __ldg(reinterpret_cast<const float2*>(src)) : make_float2(0.f, 0.f);
        } else if constexpr (kBytes) {
          raw[k][q] = ok ? __ldg(reinterpret_cast<const unsigned short*>(src)) : 0u;
        } else {
          raw[k][q] = ok ? __ldg(reinterpret_cast<const unsigned int*>(src)) : 0u;
        }
      }
    }
  };
  const auto value = [](const Raw& r, int hi) -> float {
    if constexpr (std::is_same_v<TX, float>) {
      return hi ? r.y : r.x;
    } else {
      return __half2float(__ushort_as_half(static_cast<unsigned short>(hi ? r >> 16 : r & 0xffffu)));
    }
  };
  // The registers' pixels written into row ih's ring slot.
  const auto store = [&](int ih) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int px = lane + 32 * k;
      unsigned char* slot = ring + (ih & (kRing - 1)) * kSlot;
      if constexpr (kSplitHalo) {
        if (k == 1) {  // the halo's pixels, a value per lane (the zero channels from lanes 24-31)
          float v = 0.f;
          if constexpr (std::is_same_v<TX, float>) {
            v = lane < 24 ? halo_raw : 0.f;
          } else {
            v = lane < 24 ? __half2float(halo_raw) : 0.f;
          }
          if constexpr (kI8) {
            slot[chunk_at(halo_px, 0) + halo_ch] = static_cast<unsigned char>(quantize_int8(v, p.in_scale));
          } else {
            *reinterpret_cast<__half*>(slot + chunk_at(halo_px, halo_ch / 8) + halo_ch % 8 * 2) = __float2half_rn(v);
          }
          break;
        }
      }
      if (k == 1 && lane >= 2) break;
      if constexpr (kCopy) {
        *reinterpret_cast<uint4*>(slot + chunk_at(px, 0)) = make_uint4(raw[k][0], raw[k][1], raw[k][2], raw[k][3]);
        *reinterpret_cast<uint4*>(slot + chunk_at(px, 1)) = make_uint4(raw[k][4], raw[k][5], 0u, 0u);
        continue;
      }
      if constexpr (kBytes) {  // channels 2q, 2q + 1 are pair q's two bytes
        *reinterpret_cast<uint4*>(slot + chunk_at(px, 0)) =
            make_uint4(raw[k][0] | raw[k][1] << 16, raw[k][2] | raw[k][3] << 16, raw[k][4] | raw[k][5] << 16, 0u);
        continue;
      }
      float v[16] = {};  // the pixel's channels
#pragma unroll
      for (int q = 0; q < kPairs; ++q)
#pragma unroll
        for (int e = 0; e < 2; ++e) {  // NHWC: channels 2q, 2q + 1; NCHW: (dy * 2 + e) * 3 + c for q = dy * 3 + c
          v[kNchw ? (q / kCin * 2 + e) * kCin + q % kCin : 2 * q + e] = value(raw[k][q], e);
        }
      if constexpr (kI8) {
        // The INT8 passes' rounding (quantize_int8, exact), without its per-value branch: the reciprocal's rounding
        // (biased, as quantize_int8_biased) and the exact remainder of v * rcp, which says whether the division could
        // round otherwise (within 1e-4 of a half-integer; NaN, infinities); those, rare, are redone by quantize_int8.
        // Beyond +-256 both saturate alike.
        float b[16];
        bool doubt = false;
#pragma unroll
        for (int c = 0; c < 4 * kCin; ++c) {
          const float t = fmaf(v[c], rcp, kRoundMagic);
          doubt |= !(fabsf(fmaf(v[c], rcp, kRoundMagic - t)) < 0.4999f);
          b[c] = fminf(fmaxf(t, kRoundMagic - 128.f), kRoundMagic + 127.f);
        }
        if (doubt) {
#pragma unroll
          for (int c = 0; c < 4 * kCin; ++c) b[c] = kRoundMagic + static_cast<float>(quantize_int8(v[c], p.in_scale));
        }
#pragma unroll
        for (int c = 4 * kCin; c < 16; ++c) b[c] = kRoundMagic;
        *reinterpret_cast<uint4*>(slot + chunk_at(px, 0)) = make_uint4(
            pack_int8_biased(b[0], b[1], b[2], b[3]), pack_int8_biased(b[4], b[5], b[6], b[7]),
            pack_int8_biased(b[8], b[9], b[10], b[11]), pack_int8_biased(b[12], b[13], b[14], b[15]));
      } else {
        float lo[8], hi[8];
#pragma unroll
        for (int c = 0; c < 8; ++c) lo[c] = v[c], hi[c] = v[8 + c];
        *reinterpret_cast<uint4*>(slot + chunk_at(px, 0)) = pack_half8(lo);
        *reinterpret_cast<uint4*>(slot + chunk_at(px, 1)) = pack_half8(hi);
      }
    }
  };

  // ldmatrix.x4 addressing: A's four 8x8 matrices are (rows 0-7 | 8-15) x (first | second 16-byte k chunk), B's
  // (n-tile j | j + 1) x (first | second k chunk).
  const int a_row = (lane & 7) + (lane >> 3 & 1) * 8, a_half = lane >> 4;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_half = lane >> 3 & 1;
  const uint32_t b_base = smem_addr(ws + b_row * kWRow + b_half * 16);  // step s's K chunk at + 32 s
  const uint32_t ring_base = smem_addr(ring);
  // kActs: m-tile i's A fragments of tap column s and K half c (16-byte chunks 2 c, 2 c + 1) at the same place in
  // every ring row, computed once (as conv_warp_halo_s2_kernel's: each tap's address arithmetic, recomputed, took a
  // quarter of that kernel's instructions). The stems' taps go in pairs a lane apart, so theirs stay per step.
  constexpr int kHalves = kTapPairs ? 1 : kPixBytes / 32;
  int a_off[3][2][kHalves];
#pragma unroll
  for (int s = 0; s < 3; ++s)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int c = 0; c < kHalves; ++c) a_off[s][i][c] = chunk_at(i * 16 + a_row + s, 2 * c + a_half);
  const Staging st = staging(p, a);
  const int M = p.N * p.OH * p.OW;
  // The register epilogue's cases, its channels' constants loaded once (faster than the staged epilogue for the stem,
  // which writes the largest activation of the network). Only for an output in the kernel's
  // own precision: at a mixed plan's precision boundary (an fp16 stem writing int8 for INT8 layers, or the reverse)
  // the staged epilogue converts (this one wrote half2 pairs into the int8 tensor, past its end).
  const OutFormat own = kI8 ? OutFormat::kNhwcI8 : OutFormat::kNhwcF16;
  const bool lean = kLean || halo_lean(p, a, own);
  const int kq = (lane & 3) * 2;  // this lane's first channel of each n tile (lean copies: 4 kq, its 8's first)
  ChannelPair<kI8, static_cast<int>(Act::kSilu)> ch[4];
  HalfPair lean_ch[4];  // kLean: the constants of channels 4 kq + 2 j, + 1 (from the staged weights' padding)
  const float out_r255 = kI8 ? int8_rcp255(p.out_scale) : 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (kLean) {
      lean_ch[j] = pair_constants(ws, kWRow, 4 * kq + 2 * j);
    } else {
      ch[j] = {p, a, 8 * j + kq};
    }
  }
  pdl_wait();
  if constexpr (kImage) {
    fetch(oh0 - 1);
    store(oh0 - 1);
    fetch(oh0);
    store(oh0);
    fetch(oh0 + 1);
  } else {
    load_row(oh0 - 1);
    load_row(oh0);
    load_row(oh0 + 1);
  }
  for (int oh = oh0; oh < oh1; ++oh) {
    __syncwarp();  // the warp is done with the slot the next row takes
    if constexpr (kImage) {
      store(oh + 1);
      if (oh + 1 < oh1) fetch(oh + 2);  // the next row's, in flight while this one computes
    } else {
      load_row(oh + 2);
      cp_async_wait<1>();  // rows oh - 1 .. oh + 1
    }
    __syncwarp();
    Acc acc[2][4][4];  // [m tile][n tile]
    start_acc<kLean>(acc);
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      uint32_t b[2][4];
#pragma unroll
      for (int jp = 0; jp < 2; ++jp) {
        ldmatrix_x4(b_base + jp * 16 * kWRow + step * 32, b[jp][0], b[jp][1], b[jp][2], b[jp][3]);
      }
      // A's tap and 16-byte chunk (two taps for the INT8 stem: the tenth reads the ninth's pixel, against zero
      // weights).
      const int tap = kTapPairs ? min(2 * step + a_half, 8) : step / kHalves;
      const uint32_t row = ring_base + ((oh - 1 + tap / 3) & (kRing - 1)) * kSlot;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        uint32_t af[4];
        const int at = kTapPairs ? chunk_at(i * 16 + a_row + tap % 3, 0) : a_off[tap % 3][i][step % kHalves];
        ldmatrix_x4(row + at, af[0], af[1], af[2], af[3]);
#pragma unroll
        for (int jp = 0; jp < 2; ++jp) {
          if constexpr (kI8) {
            mma_16832_s8(acc[i][2 * jp], af, b[jp][0], b[jp][1]);
            mma_16832_s8(acc[i][2 * jp + 1], af, b[jp][2], b[jp][3]);
          } else {
            mma_16816(acc[i][2 * jp], af, b[jp][0], b[jp][1]);
            mma_16816(acc[i][2 * jp + 1], af, b[jp][2], b[jp][3]);
          }
        }
      }
    }
    if (oh + 1 == oh1) pdl_trigger();
    const int m0 = (n * p.OH + oh) * p.OW + c0;
    if constexpr (!kLean) {
      if (!lean) {
        if constexpr (kImage) {
          tile_epilogue<kCols, kBN, kCols, kBN, 32, kI8>(p, a, st, M, m0, 0, 0, 0, lane, acc, tile);
        } else {
          igemm_epilogue<kCols, kBN, kCols, kBN, kI8>(p, a, M, m0, 0, 0, 0, lane, acc);
        }
        continue;
      }
    }
    // From the registers: each lane's 2 channels of 4 n tiles for 4 pixels, stored as pairs (half2, or 2 int8). The
    // residual's kind (none, fp16, int8: kRes 0, 1, 2) picked once per row, not per value: the compiler predicates
    // short branches, and the INT8 stem issued the residual loads and conversions it never used (a tenth of its
    // instructions). Addresses from this lane's first pixel's (a pointer per row) and the uniform distances of its
    // others (m tile i, row h: 16 i + 8 h pixels), n tile j's channels an immediate offset: each value's own 64-bit
    // index arithmetic had taken a third of the INT8 stem's epilogue (SASS).
    const auto store_row = [&](auto res, auto form) {
      constexpr int kRes = decltype(res)::value;
      constexpr int kForm = decltype(form)::value;  // the accumulators' (acc_float)
      using Out = std::conditional_t<kI8, int8_t, __half>;
      const int m_lane = m0 + (lane >> 2);
      if constexpr (kLean) {  // permuted weights (quad_channel): this lane's 8 channels from 4 kq, one store each
        if (4 * kq >= p.K) return;
        int8_t* const y8 = static_cast<int8_t*>(a.y) + (static_cast<int64_t>(m_lane) * p.out_ld + p.out_coff + 4 * kq);
        const int64_t r8 = static_cast<int64_t>(m_lane) * p.res_ld + 4 * kq;
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int dm = i * 16 + 8 * h;  // pixels after this lane's first
            const void* rp = nullptr;
            if constexpr (kRes == 1) rp = a.residual + r8 + dm * p.res_ld;
            if constexpr (kRes == 2) rp = a.residual_i8 + r8 + dm * p.res_ld;
            *reinterpret_cast<uint2*>(y8 + dm * p.out_ld) = direct8<kRes>(p, acc[i], 0, h, lean_ch, out_r255, rp);
          }
        return;
      }
      Out* const y_lane = static_cast<Out*>(a.y) + (static_cast<int64_t>(m_lane) * p.out_ld + p.out_coff + kq);
      const int64_t r_lane = static_cast<int64_t>(m_lane) * p.res_ld + kq;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (8 * j >= p.K) break;  // K is a multiple of 8 (staging)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float2 v = ch[j].template activate<kForm>(p, acc[i][j], h);
            const int dm = i * 16 + 8 * h;  // pixels after this lane's first
            if constexpr (kRes == 1) {
              const __half2 r =
                  *reinterpret_cast<const __half2*>(a.residual + r_lane + dm * p.res_ld + 8 * j);
              v.x += __low2float(r);
              v.y += __high2float(r);
            } else if constexpr (kRes == 2) {
              const uint32_t r = *reinterpret_cast<const uint16_t*>(a.residual_i8 + r_lane + dm * p.res_ld + 8 * j);
              v.x += __fmul_rn(int8_float(r, 0), p.res_scale);
              v.y += __fmul_rn(int8_float(r, 1), p.res_scale);
            }
            Out* const at = y_lane + dm * p.out_ld + 8 * j;
            if constexpr (kI8) {
              const uint32_t q = __byte_perm(__float_as_uint(quantize_int8_biased(v.x, out_r255)),
                                             __float_as_uint(quantize_int8_biased(v.y, out_r255)), 0x0040);
              *reinterpret_cast<uint16_t*>(at) = static_cast<uint16_t>(q);
            } else {
              *reinterpret_cast<__half2*>(at) = __floats2half2_rn(v.x, v.y);
            }
          }
      }
    };
    const auto with_res = [&](auto form) {
      if (a.residual) {
        store_row(std::integral_constant<int, 1>(), form);
      } else if (kI8 && a.residual_i8) {
        store_row(std::integral_constant<int, 2>(), form);
      } else {
        store_row(std::integral_constant<int, 0>(), form);
      }
    };
    if constexpr (kLean) {
      with_res(std::integral_constant<int, kAccBiased>());
    } else if (kI8 && p.small_acc) {
      with_res(std::integral_constant<int, kAccSmall>());
    } else {
      with_res(std::integral_constant<int, kAccI2F>());
    }
  }
  if constexpr (!kImage) cp_async_wait<0>();  // the strip's last loads (rows past it, zeros) land before the exit
}

// conv_warp_halo_kernel's: INT8 only.
template <bool kI8, int kSrc, int kMinBlocks = 4>
constexpr ConvKernel lean_halo_kernel() {
  if constexpr (kI8) {
    return conv_warp_halo_kernel<true, kSrc, true, kMinBlocks>;
  } else {
    return nullptr;
  }
}

// YOLOv5's second layer (3x3 stride 2 pad 1, 32 -> 64 int8 channels at 320 -> 160), as conv_warp_halo_kernel does
// the thin stride-1 ones: a warp takes 32 output columns of a strip of rows and sweeps down it, its input rows (the
// 65 pixels of the columns' windows) in a ring of 4 in its own shared memory, loaded by cp.async, and its A fragments
// read from there by ldmatrix (a tap's 16 output columns read every other pixel: the ring row keeps the even and the
// odd columns apart, so that they are 16 consecutive pixels, their 16-byte chunks XOR-swizzled against bank
// conflicts). An output row takes input rows 2 oh - 1 .. 2 oh + 1: row 2 oh + 2 is loaded as the row starts, 2 oh + 3
// as soon as its first tap row is done (into that row's slot), each about a row ahead of its use. The implicit GEMM
// (igemm_i8_128x64_w64x32_s4) issued 60 M warp instructions for this layer at batch 32, about 45% of them integer
// work, most of it the im2col loads' address arithmetic and bounds checks (Nsight Compute), which this kernel's
// row ring avoids. Epilogues: the lean copy's direct_epilogue over permuted weights
// (kLean, where lean_fits and staging's alignment hold), else igemm_epilogue, both from the registers (not a staged
// configuration).
template <bool kLean>
__global__ void __launch_bounds__(128, 4) conv_warp_halo_s2_kernel(const ConvParams p, const ConvArgs a) {
  using L = WarpHaloS2Layout;
  constexpr int kRing = L::ring_rows, kSlot = L::slot, kWRow = L::w_row, kOdd = L::cols + 1;  // odd columns' first
  extern __shared__ __align__(16) unsigned char halo_smem[];
  unsigned char* ws = halo_smem;                                              // [bn][w_row]
  unsigned char* ring = ws + L::weights + (threadIdx.x >> 5) * kRing * kSlot;  // this warp's [kRing][kSlot]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Chunk c of ring pixel px (its 8 consecutive pixels in distinct banks: chunks swapped in every other 4).
  const auto chunk_at = [](int px, int c) { return px * L::pix_bytes + ((c ^ (px >> 2 & 1)) << 4); };
  stage_weights<kLean>(ws, p, a, p.Kp, L::bn, kWRow, 9 * L::pix_bytes);
  __syncthreads();
  // This warp's task: image n, output columns c0 .. c0 + 31, rows oh0 .. oh1 - 1 (a strip; the grid's y extent).
  const int groups = p.OW / L::cols;
  const int task = blockIdx.x * L::warps + warp;
  const int rows = (p.OH + gridDim.y - 1) / gridDim.y;
  const int n = task / groups, c0 = task % groups * L::cols;
  const int oh0 = blockIdx.y * rows, oh1 = min(p.OH, oh0 + rows);
  if (n >= p.N || oh0 >= oh1) return;
  // Input row ih into its slot (zeros outside the image and past the strip's last window), one commit group. Ring
  // pixel q / 2 holds input column 2 c0 - 1 + q for even q, kOdd + q / 2 for odd q. Lane l copies chunk l % 2 of
  // columns 2 c0 - 1 + l / 2 + 16 k (k = 0..3, and 4 for lanes 0 and 1: the 65th column): ring pixels 8 k apart, the
  // same swizzle, so that a row's addresses are the lane's first ones plus constants (the first version derived each
  // chunk's pixel, column and swizzle from its index, and with the taps' A addresses likewise recomputed, about 400
  // of its 1,600 instructions per warp and output row went to addresses, Nsight Compute).
  const char* const img = static_cast<const char*>(a.x) + static_cast<int64_t>(n) * p.H * p.W * p.in_ld;
  const int lq = lane >> 1, lc = lane & 1, iw0 = 2 * c0 - 1 + lq;
  const int ring_off = chunk_at((lq & 1 ? kOdd : 0) + (lq >> 1), lc);
  const int64_t col_step = int64_t{16} * p.in_ld;
  const auto load_row = [&](int ih) {
    const bool row_ok = ih >= 0 && ih < p.H && ih < 2 * oh1;
    const char* src = img + (static_cast<int64_t>(ih) * p.W + iw0) * p.in_ld + lc * 16;
    unsigned char* dst = ring + (ih & (kRing - 1)) * kSlot + ring_off;
#pragma unroll
    for (int k = 0; k < 5; ++k) {
      if (k == 4 && lane >= 2) break;
      const int iw = iw0 + 16 * k;
      const bool ok = row_ok && iw >= 0 && iw < p.W;
      cp_async16(smem_addr(dst + 8 * k * L::pix_bytes), ok ? src + k * col_step : a.x, ok ? 16 : 0);
    }
    cp_async_commit();
  };
  // ldmatrix.x4 addressing: A's four 8x8 matrices are (rows 0-7 | 8-15) x (first | second 16-byte chunk), B's
  // (n-tile j | j + 1) x (first | second chunk). Output column i * 16 + a_row reads input column 2 (c0 + i * 16 +
  // a_row) - 1 + s: ring pixel q = 2 (i * 16 + a_row) + s, at the same place in every ring row (a_off[s][i]).
  const int a_row = (lane & 7) + (lane >> 3 & 1) * 8, a_half = lane >> 4;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_half = lane >> 3 & 1;
  int a_off[3][2];
#pragma unroll
  for (int s = 0; s < 3; ++s)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      a_off[s][i] = chunk_at(s == 1 ? kOdd + i * 16 + a_row : i * 16 + a_row + s / 2, a_half);
    }
  const uint32_t b_base = smem_addr(ws + b_row * kWRow + b_half * 16);
  const int M = p.N * p.OH * p.OW;
  float r255[L::bn / 32];
  if constexpr (kLean) direct_r255(p, lane, r255);
  pdl_wait();
  load_row(2 * oh0 - 1);
  load_row(2 * oh0);
  load_row(2 * oh0 + 1);
  for (int oh = oh0; oh < oh1; ++oh) {
    __syncwarp();      // the warp is done with row 2 oh - 2, whose slot row 2 oh + 2 takes
    load_row(2 * oh + 2);
    cp_async_wait<1>();  // rows 2 oh - 1 .. 2 oh + 1
    __syncwarp();
    int acc[2][8][4];  // [m tile][n tile]
    start_acc<kLean>(acc);
#pragma unroll
    for (int tap = 0; tap < 9; ++tap) {
      const int r = tap / 3, s = tap % 3;
      if (tap == 3) {  // row 2 oh - 1 is done: row 2 oh + 3 into its slot
        __syncwarp();
        load_row(2 * oh + 3);
      }
      uint32_t b[4][4];
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {
        ldmatrix_x4(b_base + jp * 16 * kWRow + tap * L::pix_bytes, b[jp][0], b[jp][1], b[jp][2], b[jp][3]);
      }
      const uint32_t row = smem_addr(ring + ((2 * oh - 1 + r) & (kRing - 1)) * kSlot);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        uint32_t af[4];
        ldmatrix_x4(row + a_off[s][i], af[0], af[1], af[2], af[3]);
#pragma unroll
        for (int jp = 0; jp < 4; ++jp) {
          mma_16832_s8(acc[i][2 * jp], af, b[jp][0], b[jp][1]);
          mma_16832_s8(acc[i][2 * jp + 1], af, b[jp][2], b[jp][3]);
        }
      }
    }
    if (oh + 1 == oh1) pdl_trigger();
    const int m0 = (n * p.OH + oh) * p.OW + c0;
    if constexpr (kLean) {
      direct_epilogue(p, a, M, m0, lane, acc, ws, kWRow, r255);
    } else {
      igemm_epilogue<L::cols, L::bn, L::cols, L::bn, true>(p, a, M, m0, 0, 0, 0, lane, acc);
    }
  }
  cp_async_wait<0>();  // the strip's last loads (rows past it, zeros) land before the exit
}

// Pointwise (1x1) INT8 convs over kC input channels into at most kBN outputs, by warps that each stream a run of
// pixel tiles (16 x 128 / kBN consecutive pixels: the accumulators are 64 registers either way): the tiles' rows go
// through a ring of 4 slots in the warp's own shared memory, loaded by cp.async three tiles ahead, the weights stay
// in the block's shared memory, and each tile ends in the lean copy's direct_epilogue over permuted weights (kLean,
// where lean_fits and staging's alignment hold) or igemm_epilogue, from the registers. For the thin pointwise layers,
// whose tiles have one or two K steps, the implicit GEMM's blocks spent as many instructions on their set-up and
// im2col addressing as on the MMAs and the epilogue, and waited on each tile's loads (YOLOv5s at batch 32 ran the
// 64 -> 64 ones at 80 x 80 in about three times the time their memory traffic takes).
template <int kC, int kBN, bool kLean>
__global__ void __launch_bounds__(128, 4) conv_warp_pw_kernel(const ConvParams p, const ConvArgs a) {
  constexpr WarpPwLayout L(kC, kBN);
  constexpr int kMT = 128 / kBN, kNT = kBN / 8, kPix = L.pixels, kChunks = kC / 16, kSlots = WarpPwLayout::slots;
  static_assert(kMT * kNT * 4 == 64 && kPix == 16 * kMT, "64 accumulators per lane");
  extern __shared__ __align__(16) unsigned char pw_smem[];
  unsigned char* ws = pw_smem;                                                      // [kBN][w_row]
  unsigned char* ring = ws + L.weights + (threadIdx.x >> 5) * kSlots * L.slot;  // this warp's [kSlots][slot]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Chunk c of tile row (pixel) px: an ldmatrix phase's 8 rows in distinct banks.
  const auto chunk_at = [](int px, int c) { return px * kC + ((c ^ (px / (8 / kChunks) % kChunks)) << 4); };
  stage_weights<kLean>(ws, p, a, p.Kp, kBN, L.w_row, kC);
  __syncthreads();
  // This warp's tiles: t0 .. t1 - 1.
  const int M = p.N * p.OH * p.OW;
  const int tiles = (M + kPix - 1) / kPix;
  const int warps = gridDim.x * WarpPwLayout::warps;
  const int run = (tiles + warps - 1) / warps;
  const int t0 = (blockIdx.x * WarpPwLayout::warps + warp) * run, t1 = min(tiles, t0 + run);
  if (t0 >= t1) return;
  // Tile t into slot t % kSlots (rows past M zeros; nothing past the run), one commit group either way. Lane l copies
  // chunk l % kChunks of pixels l / kChunks + k * 32 / kChunks.
  const int lp = lane / kChunks, lc = lane % kChunks;
  const auto load_tile = [&](int t) {
    if (t < t1) {
      unsigned char* slot = ring + (t % kSlots) * L.slot;
#pragma unroll
      for (int k = 0; k < kPix * kChunks / 32; ++k) {
        const int px = lp + k * (32 / kChunks), m = t * kPix + px;
        const bool ok = m < M;
        cp_async16(smem_addr(slot + chunk_at(px, lc)),
                   ok ? static_cast<const char*>(a.x) + (static_cast<int64_t>(m) * p.in_ld + lc * 16) : a.x,
                   ok ? 16 : 0);
      }
    }
    cp_async_commit();
  };
  // ldmatrix.x4 addressing: A's four 8x8 matrices are (rows 0-7 | 8-15) x (first | second 16-byte chunk of a K step),
  // B's (n-tile j | j + 1) x (first | second chunk).
  const int a_row = (lane & 7) + (lane >> 3 & 1) * 8, a_half = lane >> 4;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_half = lane >> 3 & 1;
  const uint32_t b_base = smem_addr(ws + b_row * L.w_row + b_half * 16);
  float r255[kBN / 32];
  if constexpr (kLean) direct_r255(p, lane, r255);
  pdl_wait();
  load_tile(t0);
  load_tile(t0 + 1);
  load_tile(t0 + 2);
  for (int t = t0; t < t1; ++t) {
    __syncwarp();  // the warp is done with tile t - 1, whose slot tile t + 3 takes
    load_tile(t + 3);
    cp_async_wait<3>();  // tile t
    __syncwarp();
    int acc[kMT][kNT][4];
    start_acc<kLean>(acc);
    const unsigned char* slot = ring + (t % kSlots) * L.slot;
#pragma unroll
    for (int ks = 0; ks < kC / 32; ++ks) {
      uint32_t af[kMT][4];
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
        ldmatrix_x4(smem_addr(slot + chunk_at(i * 16 + a_row, 2 * ks + a_half)), af[i][0], af[i][1], af[i][2],
                    af[i][3]);
      }
#pragma unroll
      for (int jp = 0; jp < kNT / 2; ++jp) {
        uint32_t b[4];
        ldmatrix_x4(b_base + jp * 16 * L.w_row + ks * 32, b[0], b[1], b[2], b[3]);
#pragma unroll
        for (int i = 0; i < kMT; ++i) {
          mma_16832_s8(acc[i][2 * jp], af[i], b[0], b[1]);
          mma_16832_s8(acc[i][2 * jp + 1], af[i], b[2], b[3]);
        }
      }
    }
    if (t + 1 == t1) pdl_trigger();
    if constexpr (kLean) {
      direct_epilogue(p, a, M, t * kPix, lane, acc, ws, L.w_row, r255);
    } else {
      igemm_epilogue<kPix, kBN, kPix, kBN, true>(p, a, M, t * kPix, 0, 0, 0, lane, acc);
    }
  }
  cp_async_wait<0>();
}

// name: block tile x warp tile, pipeline stages. Timing picks per layer.
const Config kConfigs[] = {
    // Warps alone on 32 columns of a strip of rows (conv_warp_halo_kernel): the thin 3x3 layers over 32 channels, and
    // the stem reading the image itself (the space-to-depth pass folded in; fp16 or fp32, NCHW or NHWC; INT8 also
    // int8 NHWC).
#define QD_WARP_HALO(NAME, I8, SRC, IN, NCHW)                                                                     \
  {NAME, 32, 32, 128, 0, conv_warp_halo_kernel<I8, SRC>, I8, false, true, false, 64, IN, NCHW, true, nullptr, \
   lean_halo_kernel<I8, SRC>()}
    QD_WARP_HALO("halo3x3_f16_c32", false, kActs, InFormat::kNhwc, false),
    QD_WARP_HALO("halo3x3_i8_c32", true, kActs, InFormat::kNhwc, false),
    QD_WARP_HALO("stem_image_f16_nchw16", false, kImageF16Nchw, InFormat::kImageF16, true),
    QD_WARP_HALO("stem_image_f16_nhwc16", false, kImageF16Nhwc, InFormat::kImageF16, false),
    QD_WARP_HALO("stem_image_f16_nchw32", false, kImageF32Nchw, InFormat::kImageF32, true),
    QD_WARP_HALO("stem_image_f16_nhwc32", false, kImageF32Nhwc, InFormat::kImageF32, false),
    QD_WARP_HALO("stem_image_i8_nchw16", true, kImageF16Nchw, InFormat::kImageF16, true),
    QD_WARP_HALO("stem_image_i8_nhwc16", true, kImageF16Nhwc, InFormat::kImageF16, false),
    QD_WARP_HALO("stem_image_i8_nchw32", true, kImageF32Nchw, InFormat::kImageF32, true),
    QD_WARP_HALO("stem_image_i8_nhwc32", true, kImageF32Nhwc, InFormat::kImageF32, false),
    QD_WARP_HALO("stem_image_i8_nhwc8", true, kImageI8Nhwc, InFormat::kImageI8, false),
#undef QD_WARP_HALO
    // The INT8 lean copies capped for more blocks per SM (the full kernel as above, where the lean one does not fit),
    // for the layers YOLOv5 puts on them: the C3 3x3 and the stems on an fp16 or int8 NHWC image (at 6 blocks, 80
    // registers, the stems spill 70-110 bytes; at 5, 96 registers, 0-4).
#define QD_WARP_HALO_B(NAME, SRC, IN, B)                                                                     \
  {NAME, 32, 32, 128, 0, conv_warp_halo_kernel<true, SRC>, true, false, true, false, 64, IN, false, true, nullptr, \
   lean_halo_kernel<true, SRC, B>()}
    QD_WARP_HALO_B("halo3x3_i8_c32_b5", kActs, InFormat::kNhwc, 5),
    QD_WARP_HALO_B("halo3x3_i8_c32_b6", kActs, InFormat::kNhwc, 6),
    QD_WARP_HALO_B("stem_image_i8_nhwc16_b5", kImageF16Nhwc, InFormat::kImageF16, 5),
    QD_WARP_HALO_B("stem_image_i8_nhwc8_b5", kImageI8Nhwc, InFormat::kImageI8, 5),
#undef QD_WARP_HALO_B
    // YOLOv5's second layer (3x3 stride 2 over 32 int8 channels, at most 64 outputs).
    {"halo3x3s2_i8_c32", 32, 64, 128, 0, conv_warp_halo_s2_kernel<false>, true, false, true, false, 64,
     InFormat::kNhwc, false, true, nullptr, conv_warp_halo_s2_kernel<true>, nullptr, nullptr, nullptr, kWarpHaloS2},
    // Pointwise INT8 convs over 32, 64 or 128 channels into at most 32, 64 or 128 outputs.
#define QD_WARP_PW(NAME, C, BN)                                                                                  \
  {NAME, 16 * 128 / BN, BN, 128, 0, conv_warp_pw_kernel<C, BN, false>, true, false, true, false, 64, InFormat::kNhwc, \
   false, true, nullptr, conv_warp_pw_kernel<C, BN, true>, nullptr, nullptr, nullptr, kWarpPw, C}
    QD_WARP_PW("pw_i8_c32_n32", 32, 32),
    QD_WARP_PW("pw_i8_c64_n64", 64, 64),
    QD_WARP_PW("pw_i8_c64_n128", 64, 128),
    QD_WARP_PW("pw_i8_c128_n128", 128, 128),
#undef QD_WARP_PW
};

}  // namespace

ConfigList conv_configs_halo() { return {kConfigs, static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]))}; }

}  // namespace qd::cuda
