// The implicit-GEMM convolutions' shared device code: helpers, epilogues, conv_igemm_kernel (the mma.sync and wgmma
// kernels), what the launcher needs of the other kernels (layouts, fits), and the Config record. Included by
// conv_igemm.cu (the launcher) and the conv_configs_*.cu tables, which hold the other kernels and instantiate every
// configuration, split across translation units so that they compile in parallel (one unit had taken 19 of a clean
// CI build's 20 minutes).
// conv_igemm_kernel: implicit-GEMM convolution on tensor cores (mma.sync m16n8k16, fp16 x fp16 -> fp32; INT8
// m16n8k32; wgmma on sm_90a) with a fused epilogue.
// GEMM view: M = N*OH*OW output pixels, N = K output channels, K = R*S*C (the weight row, padded to 32).
// Tiles of A (im2col rows gathered on the fly) and B (weights) stream through a 3-stage cp.async pipeline; padding
// pixels and rows past the end are zero-filled by cp.async's src-size operand, so no branch reaches the inner loop.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <cooperative_groups.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernels/activation.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/conv.h"
#include "backends/cuda/kernels/requantize.cuh"
#include "backends/cuda/kernels/wgmma.cuh"

namespace qd::cuda {

// The TMA kernels' tensor maps (conv_configs_tma.cu).
struct TmaMaps {
  CUtensorMap a, b;
};

namespace {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes 0 writes zeros (padding, out-of-range rows).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_16832_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offset of 16-byte chunk `c` (0..3) of tile row `r`: rows are 64 bytes; the XOR spreads the 8 rows one
// ldmatrix phase reads over all 32 banks.
__device__ __forceinline__ uint32_t tile_offset(int r, int c) { return r * 64 + ((c ^ ((r >> 1) & 3)) << 4); }
// The same for rows of kRow bytes: 64 as above, or 128 with the 128-byte swizzle (chunk c of row r at c ^ (r & 7)),
// the layouts wgmma's descriptors name (wgmma.cuh).
template <int kRow>
__device__ __forceinline__ uint32_t tile_offset(int r, int c) {
  if constexpr (kRow == 64) return tile_offset(r, c);
  return r * 128 + ((c ^ (r & 7)) << 4);
}

// The INT8 contract's requantization: round half to even, saturate. The exact division here: requantize.cuh's
// reciprocal with a tie check made the register epilogue 3% slower at batch 32 (more instructions and a branch per
// element). The staged epilogue (pack_int8x8), which quantizes 8 values with one scale, takes the reciprocal: there
// one reciprocal serves 8 values, so it comes out ahead.
__device__ __forceinline__ int requantize(float v, float scale) {
  return max(-128, min(127, __float2int_rn(__fdiv_rn(v, scale))));
}

__host__ __device__ __forceinline__ bool has_residual(const ConvArgs& a) { return a.residual || a.residual_i8; }

// The int8 output's scale for channel k (ConvParams::out_split: merged sibling convs keep each one's scale).
__device__ __forceinline__ float out_scale_at(const ConvParams& p, int k) {
  return k < p.out_split ? p.out_scale : p.out_scale_hi;
}

// Integers to float without I2F, which runs at 16 per clock per SM (the rate of SiLU's exp2 and reciprocal, which
// the same epilogues issue: the conversions made a third to a half of an INT8 SiLU epilogue's work on that pipe).
// The magic float 1.5 * 2^23 + i has i in its low mantissa bits for i in [-2^22, 2^22): an integer add puts it
// there and a float subtract takes it out, both at full rate, exact. An accumulator's form (kForm):
// - kAccI2F: any int32, by I2F;
// - kAccSmall: ConvParams::small_acc holds, by the add and the subtract;
// - kAccBiased: small_acc holds and the MMAs started from kAccBias instead of 0 (the lean copies, whose only
//   epilogue converts this way), so the accumulator is the magic float's bits already: the subtract alone, an
//   instruction fewer per value. (Folding the subtract into SiLU's FMA as an addend b - M s saves another, but the
//   addend's rounding, up to 0.375 s, moved x by most of an accumulator unit: lean copies then differed from the full
//   kernels, and fewer of YOLOv5n's INT8 elements stayed within 1 LSB of the reference end to end.)
enum AccForm : int { kAccI2F = 0, kAccSmall, kAccBiased };
constexpr int kAccBias = 0x4B400000;  // the bits of kRoundMagic
template <int kForm>
__device__ __forceinline__ float acc_float(int v) {
  if constexpr (kForm == kAccBiased) return __fsub_rn(__int_as_float(v), kRoundMagic);
  if constexpr (kForm == kAccSmall) return __fsub_rn(__int_as_float(v + kAccBias), kRoundMagic);
  return static_cast<float>(v);
}
// Byte b of `word` (int8 values) as a float: the byte, biased to q + 128 (XOR 0x80), moved into the magic float's low
// byte by one byte permute.
__device__ __forceinline__ float int8_float(uint32_t word, int b) {
  return __fsub_rn(__uint_as_float(__byte_perm(word ^ 0x80808080u, kAccBias, 0x7650 | b)), kRoundMagic + 128.f);
}

// The residual's value at (pixel m, channel k): fp16, or an int8 tensor's dequantized value in fp32.
__device__ __forceinline__ float residual_at(const ConvParams& p, const ConvArgs& a, int m, int k) {
  const int64_t at = static_cast<int64_t>(m) * p.res_ld + k;
  return a.residual_i8 ? __fmul_rn(int8_float(static_cast<uint8_t>(a.residual_i8[at]), 0), p.res_scale)
                       : __half2float(a.residual[at]);
}

// Channels k and k + 1 (k even, res_ld even) with one load.
__device__ __forceinline__ void add_residual2(const ConvParams& p, const ConvArgs& a, int m, int k, float& v0,
                                              float& v1) {
  const int64_t at = static_cast<int64_t>(m) * p.res_ld + k;
  if (a.residual_i8) {
    const uint32_t r = *reinterpret_cast<const uint16_t*>(a.residual_i8 + at);
    v0 += __fmul_rn(int8_float(r, 0), p.res_scale);
    v1 += __fmul_rn(int8_float(r, 1), p.res_scale);
  } else {
    const __half2 r = *reinterpret_cast<const __half2*>(a.residual + at);
    v0 += __low2float(r);
    v1 += __high2float(r);
  }
}

// The second output's value u at (pixel m, channel k).
__device__ __forceinline__ void store_out2(const ConvParams& p, const ConvArgs& a, int m, int k, float u) {
  const int64_t at = static_cast<int64_t>(m) * p.out2_ld + p.out2_coff + k;
  if (p.out2_format == Out2Format::kI8) {
    static_cast<int8_t*>(a.y2)[at] = static_cast<int8_t>(requantize(u, p.out2_scale));
  } else {
    static_cast<__half*>(a.y2)[at] = __float2half_rn(u);
  }
}

// Channels k and k + 1 (k, out2_ld and out2_coff even).
__device__ __forceinline__ void store_out2_pair(const ConvParams& p, const ConvArgs& a, int m, int k, float u0,
                                                float u1) {
  const int64_t at = static_cast<int64_t>(m) * p.out2_ld + p.out2_coff + k;
  if (p.out2_format == Out2Format::kI8) {
    *reinterpret_cast<char2*>(static_cast<int8_t*>(a.y2) + at) =
        make_char2(static_cast<signed char>(requantize(u0, p.out2_scale)),
                   static_cast<signed char>(requantize(u1, p.out2_scale)));
  } else {
    *reinterpret_cast<__half2*>(static_cast<__half*>(a.y2) + at) = __floats2half2_rn(u0, u1);
  }
}

// One output element. kI8 (INT8 convs): any second output (ConvParams::out2_*); otherwise (fp16 convs) only the
// dequantized fp16 copy beside an int8 output, the one kind the Lowerer gives them, so their code stays short.
template <bool kI8>
__device__ __forceinline__ void store_out(const ConvParams& p, const ConvArgs& a, int m, int k, float v) {
  float u = v;  // what y2 gets
  if (p.out_format == OutFormat::kNhwcI8) {
    const float s = out_scale_at(p, k);
    const int q = requantize(v, s);
    static_cast<int8_t*>(a.y)[static_cast<int64_t>(m) * p.out_ld + p.out_coff + k] = static_cast<int8_t>(q);
    if (!kI8 || p.out2_of_q) u = __fmul_rn(static_cast<float>(q), s);
    if (!kI8) {
      if (a.y2) static_cast<__half*>(a.y2)[static_cast<int64_t>(m) * p.out2_ld + p.out2_coff + k] = __float2half_rn(u);
      return;
    }
  } else if (p.out_format == OutFormat::kNhwcF16) {
    static_cast<__half*>(a.y)[static_cast<int64_t>(m) * p.out_ld + p.out_coff + k] = __float2half_rn(v);
  } else {
    const int hw = p.OH * p.OW;
    const int n = m / hw, pix = m - n * hw;
    const int64_t idx = (static_cast<int64_t>(n) * p.K + k) * hw + pix;
    if (p.out_format == OutFormat::kNchwF16) {
      static_cast<__half*>(a.y)[idx] = __float2half_rn(v);
    } else {
      static_cast<float*>(a.y)[idx] = v;
    }
  }
  if (kI8 && a.y2) store_out2(p, a, m, k, u);
}

// The residual's value for element (m, k), when there is one: any kind for INT8 convs, fp16 for the others (see
// store_out; an fp16 kernel given only an int8 residual adds nothing rather than reading through a null pointer).
template <bool kI8>
__device__ __forceinline__ float residual_value(const ConvParams& p, const ConvArgs& a, int m, int k) {
  if constexpr (kI8) return residual_at(p, a, m, k);
  return a.residual ? __half2float(a.residual[static_cast<int64_t>(m) * p.res_ld + k]) : 0.f;
}

// The epilogues' activation: kAct >= 0 compiles that one alone (the epilogues are instantiated for the layers' usual
// one, SiLU, and the heads' Sigmoid), -1 apply_act's switch on p.act, which per element cost YOLOv5s 16-20% of its
// time at every batch size when the staged epilogues had only that.
template <int kAct, bool kI8>
__device__ __forceinline__ float epi_act(const ConvParams& p, float v) {
  return apply_act<true, !kI8>(v, kAct >= 0 ? static_cast<Act>(kAct) : p.act, p.act_a, p.act_b);
}

// A fragment's channel pair k0, k0 + 1 in the epilogues: its bias and INT8 rescale s_x * s_w[k] (zero and one past
// K), and the activated values y = act(acc * s + bias), rounded like the reference's Mul then Add (no FMA; the fp16
// kernels' scale 1 leaves the fp32 accumulator as it is). The fast SiLU's (kAct SiLU) is the exception: silu_tanh
// wants h = x / 2, which one FMA makes from the accumulator with the constants halved (exact scalings), so that an
// INT8 SiLU value takes two FP32 instructions fewer than the Mul, Add and halving apart (the usual INT8 layer's
// epilogue is bound by instruction issue). fp16: the same bits (a single rounding of (acc + b) / 2); INT8: x rounded
// once instead of twice, within an ulp of the reference's, far inside the tanh's error.
template <bool kI8, int kAct>
struct ChannelPair {
  float b0, b1, s0, s1;
  ChannelPair() = default;
  __device__ __forceinline__ ChannelPair(float2 b, float2 s) : b0(b.x), b1(b.y), s0(s.x), s1(s.y) {}
  __device__ __forceinline__ ChannelPair(const ConvParams& p, const ConvArgs& a, int k0)
      : b0(k0 < p.K ? a.bias[k0] : 0.f),
        b1(k0 + 1 < p.K ? a.bias[k0 + 1] : 0.f),
        s0(kI8 && k0 < p.K ? a.alpha[k0] : 1.f),
        s1(kI8 && k0 + 1 < p.K ? a.alpha[k0 + 1] : 1.f) {}
  // Rows h = 0 (g) and 1 (g + 8) of an m16n8 accumulator fragment, before the activation; kForm: the accumulator's
  // (acc_float).
  template <int kForm = kAccI2F, typename Acc>
  __device__ __forceinline__ float2 affine(const Acc (&f)[4], int h) const {
    if constexpr (!kI8) {
      return make_float2(__fadd_rn(f[2 * h], b0), __fadd_rn(f[2 * h + 1], b1));  // s = 1
    } else {
      return make_float2(__fadd_rn(__fmul_rn(acc_float<kForm>(f[2 * h]), s0), b0),
                         __fadd_rn(__fmul_rn(acc_float<kForm>(f[2 * h + 1]), s1), b1));
    }
  }
  template <int kForm = kAccI2F, typename Acc>
  __device__ __forceinline__ float2 activate(const ConvParams& p, const Acc (&f)[4], int h) const {
    if constexpr (kAct == static_cast<int>(Act::kSilu)) {
      if constexpr (kI8) {
        return make_float2(silu_tanh_half(fmaf(acc_float<kForm>(f[2 * h]), 0.5f * s0, 0.5f * b0)),
                           silu_tanh_half(fmaf(acc_float<kForm>(f[2 * h + 1]), 0.5f * s1, 0.5f * b1)));
      } else {
        return make_float2(silu_tanh_half(fmaf(f[2 * h], 0.5f, 0.5f * b0)),
                           silu_tanh_half(fmaf(f[2 * h + 1], 0.5f, 0.5f * b1)));
      }
    } else {
      const float2 x = affine<kForm>(f, h);
      return make_float2(epi_act<kAct, kI8>(p, x.x), epi_act<kAct, kI8>(p, x.y));
    }
  }
};

// 8 floats of a staged tile, from the two 16-byte chunks at lo and hi.
__device__ __forceinline__ void load8(const float* lo, const float* hi, float (&v)[8]) {
  const float4 l = *reinterpret_cast<const float4*>(lo), h = *reinterpret_cast<const float4*>(hi);
  v[0] = l.x, v[1] = l.y, v[2] = l.z, v[3] = l.w, v[4] = h.x, v[5] = h.y, v[6] = h.z, v[7] = h.w;
}

// ConvParams::exact_silu: the reciprocals of the scales of an INT8 SiLU layer's int8 outputs (y, and y2 when it is
// quantized from the value rather than from y's integers; 0 where there is none), and whether any is there.
struct SiluTies {
  float r1 = 0.f, r2 = 0.f;
  bool on = false;
  __device__ __forceinline__ SiluTies(const ConvParams& p, const ConvArgs& a) {
    if (!p.exact_silu || p.act != Act::kSilu) return;
    if (p.out_format == OutFormat::kNhwcI8) r1 = __frcp_rn(p.out_scale);
    if (a.y2 && p.out2_format == Out2Format::kI8 && !p.out2_of_q) r2 = __frcp_rn(p.out2_scale);
    on = r1 != 0.f || r2 != 0.f;
  }
  // Whether v = f + r (f the fast SiLU's value, within `err` of the reference's, r the residual or 0), d = v * rcp,
  // may quantize to another integer than the reference's silu_exact(x) + r: a half-integer within err * rcp of d,
  // plus 3e-7 |d| + 1e-6 for the sum's rounding (one ulp of v between the two) and the reciprocal's (2^-23 |d|).
  // |d| >= 129 saturates either way.
  __device__ static __forceinline__ bool near(float d, float err, float rcp) {
    return fabsf(d) < 129.f && fabsf(d - floorf(d) - 0.5f) < fmaf(err, rcp, fmaf(fabsf(d), 3e-7f, 1e-6f));
  }
  __device__ __forceinline__ bool risky(float err, float v) const {
    return (r1 != 0.f && near(v * r1, err, r1)) || (r2 != 0.f && near(v * r2, err, r2));
  }
  // The activation of x where the ties may be checked: the SiLU whose error silu_fast_error bounds (silu_sigmoid,
  // not the epilogues' usual silu_tanh, whose larger error would send many more values down the exact path).
  // kGelu: fp16 callers (GELU is an fp16 linear layer's epilogue only).
  template <bool kGelu = false>
  __device__ __forceinline__ float act(const ConvParams& p, float x) const {
    return on ? silu_sigmoid(x) : apply_act<true, kGelu>(x, p.act, p.act_a, p.act_b);
  }
};

// The fused epilogue of conv_igemm_kernel for one BM x BN tile (or split-K's partial sums).
template <int BM, int BN, int WM, int WN, bool kI8, int kAct, typename Acc, int kMT, int kNT>
__device__ __forceinline__ void igemm_epilogue_act(const ConvParams& p, const ConvArgs& a, int M, int block_m,
                                                   int block_n, int warp_m, int warp_n, int lane,
                                                   const Acc (&acc)[kMT][kNT][4]) {
  if (p.splits > 1 && !p.split_in_cluster) {  // partial sums (int32 for INT8: their sum is the exact accumulator);
                                              // conv_splitk_epilogue finishes
    Acc* ws = reinterpret_cast<Acc*>(a.workspace) + static_cast<int64_t>(blockIdx.z) * M * p.K;
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        const int k0 = block_n + warp_n * WN + j * 8 + (lane & 3) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = block_m + warp_m * WM + i * 16 + (lane >> 2) + h * 8;
          if (m >= M) continue;
          if (k0 < p.K) ws[static_cast<int64_t>(m) * p.K + k0] = acc[i][j][2 * h];
          if (k0 + 1 < p.K) ws[static_cast<int64_t>(m) * p.K + k0 + 1] = acc[i][j][2 * h + 1];
        }
      }
    return;
  }

  // Epilogue: bias, activation, residual, store. Each thread holds rows g and g+8, columns 2t and 2t+1 of each tile.
  // Two channels per store (half2, or two int8 and the dequantized half2) when every address is even.
  const bool i8 = p.out_format == OutFormat::kNhwcI8;
  const bool paired = (p.out_format == OutFormat::kNhwcF16 || i8) && (p.out_ld % 2 == 0) && (p.out_coff % 2 == 0) &&
                      (p.K % 2 == 0) && (!has_residual(a) || p.res_ld % 2 == 0) &&
                      (a.y2 == nullptr || (p.out2_ld % 2 == 0 && p.out2_coff % 2 == 0));
#pragma unroll
  for (int i = 0; i < kMT; ++i) {
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      const int k0 = block_n + warp_n * WN + j * 8 + (lane & 3) * 2;
      if (k0 >= p.K) continue;
      const ChannelPair<kI8, kAct> ch(p, a, k0);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = block_m + warp_m * WM + i * 16 + (lane >> 2) + h * 8;
        if (m >= M) continue;
        const float2 v = ch.activate(p, acc[i][j], h);
        float v0 = v.x, v1 = v.y;
        if (paired) {
          // The fp16 kernels (fp16 convs) see only fp16 residuals and, beside an int8 output, its dequantized fp16
          // copy (Lowerer): kept to that, their epilogue stays as short as it was before int8 residuals and second
          // outputs of other formats, which only INT8 convs get.
          if constexpr (kI8) {
            if (has_residual(a)) add_residual2(p, a, m, k0, v0, v1);
          } else if (a.residual) {
            const __half2 r = *reinterpret_cast<const __half2*>(a.residual + static_cast<int64_t>(m) * p.res_ld + k0);
            v0 += __low2float(r);
            v1 += __high2float(r);
          }
          const int64_t at = static_cast<int64_t>(m) * p.out_ld + p.out_coff + k0;
          float u0 = v0, u1 = v1;  // what y2 gets
          if (i8) {
            const float s = out_scale_at(p, k0);  // k0 even, out_split a multiple of 8: the pair's
            const int q0 = requantize(v0, s), q1 = requantize(v1, s);
            *reinterpret_cast<char2*>(static_cast<int8_t*>(a.y) + at) =
                make_char2(static_cast<signed char>(q0), static_cast<signed char>(q1));
            if (!kI8 || p.out2_of_q) {
              u0 = __fmul_rn(static_cast<float>(q0), s);
              u1 = __fmul_rn(static_cast<float>(q1), s);
            }
            if (!kI8 && a.y2) {
              *reinterpret_cast<__half2*>(static_cast<__half*>(a.y2) + static_cast<int64_t>(m) * p.out2_ld +
                                          p.out2_coff + k0) = __floats2half2_rn(u0, u1);
            }
          } else {
            *reinterpret_cast<__half2*>(static_cast<__half*>(a.y) + at) = __floats2half2_rn(v0, v1);
          }
          if (kI8 && a.y2) store_out2_pair(p, a, m, k0, u0, u1);
          continue;
        }
        if (has_residual(a)) v0 += residual_value<kI8>(p, a, m, k0);
        store_out<kI8>(p, a, m, k0, v0);
        if (k0 + 1 < p.K) {
          if (has_residual(a)) v1 += residual_value<kI8>(p, a, m, k0 + 1);
          store_out<kI8>(p, a, m, k0 + 1, v1);
        }
      }
    }
  }
}

// The INT8 epilogue of NHWC int8 outputs without a second output, outside the bit-exact mode (ConvParams::exact_silu),
// from the registers: each thread quantizes its fragments' values as the staged epilogue does (the same activated
// value, residual and reciprocal rounding, so the same integers), packs each channel pair into 16 bits, and the four
// lanes of a quad, which hold the pairs of 8 consecutive channels of a row for each n-tile, transpose them four n-tiles
// at a time (two shuffles), so that each lane stores 8 consecutive channels with one 8-byte store; no shared memory,
// no barrier. The staged epilogue's second pass (each value reloaded as fp32, requantized and packed 8 at a time,
// with its runtime checks) took 10 of the 35 instructions per output value of a 1x1 64 -> 64 conv at batch 32
// (Nsight Compute). KernelPolicy::quad_epilogue off turns it off (A/B runs).
// Whether ptr is a multiple of `bytes` (null is): what the epilogues' vector accesses need.
__host__ __device__ __forceinline__ bool aligned(const void* ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

__host__ __device__ __forceinline__ bool quad_fits(const ConvParams& p, const ConvArgs& a) {
  return !p.no_quad_epilogue && p.out_format == OutFormat::kNhwcI8 && !a.y2 && !p.exact_silu &&
         (p.splits == 1 || p.split_in_cluster) && p.K % 8 == 0 && p.out_ld % 8 == 0 && p.out_coff % 8 == 0 &&
         aligned(a.y, 8) && (!has_residual(a) || p.res_ld % 2 == 0) && aligned(a.residual, 4) &&
         aligned(a.residual_i8, 2) && aligned(a.bias, 8) && aligned(a.alpha, 8);
}

// kRes: the layer has a residual (compiled apart: tested per value, its loads and adds were issued, predicated off,
// in every layer's epilogue). Each lane's channel constants come as float2 pairs (K % 8 == 0: a pair is in or out
// whole), the out_split reciprocal once per n-tile.
template <int WM, int WN, int kAct, int kForm, bool kRes, typename Acc, int kMT, int kNT>
__device__ __forceinline__ void quad_epilogue_i8(const ConvParams& p, const ConvArgs& a, int M, int block_m,
                                                 int block_n, int warp_m, int warp_n, int lane,
                                                 const Acc (&acc)[kMT][kNT][4]) {
  static_assert(kNT % 4 == 0, "four n-tiles per transpose");
  const int t = lane & 3;
  const bool odd = t & 1, upper = t & 2;
  const float r255_lo = int8_rcp255(p.out_scale), r255_hi = int8_rcp255(p.out_scale_hi);
  int8_t* const y = static_cast<int8_t*>(a.y) + p.out_coff;
#pragma unroll
  for (int jg = 0; jg < kNT; jg += 4) {
    const int kq = block_n + warp_n * WN + jg * 8;  // the first channel of these four n-tiles
    using Pair = ChannelPair<true, kAct>;
    Pair ch[4];
    float r255[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int k0 = kq + j * 8 + t * 2;
      const bool in = k0 < p.K;
      const float2 b = in ? *reinterpret_cast<const float2*>(a.bias + k0) : make_float2(0.f, 0.f);
      const float2 s = in ? *reinterpret_cast<const float2*>(a.alpha + k0) : make_float2(1.f, 1.f);
      ch[j] = Pair(b, s);
      r255[j] = kq + j * 8 < p.out_split ? r255_lo : r255_hi;  // out_split a multiple of 8: the n-tile's
    }
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = block_m + warp_m * WM + i * 16 + (lane >> 2) + h * 8;
        uint32_t w[4];  // n-tile jg + j: this lane's channel pair, quantized
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int k0 = kq + j * 8 + t * 2;
          const float2 v = ch[j].template activate<kForm>(p, acc[i][jg + j], h);
          float v0 = v.x, v1 = v.y;
          if constexpr (kRes) {
            if (m < M && k0 < p.K) add_residual2(p, a, m, k0, v0, v1);
          }
          w[j] = __byte_perm(__float_as_uint(quantize_int8_biased(v0, r255[j])),
                             __float_as_uint(quantize_int8_biased(v1, r255[j])), 0x0040);
        }
        // The quad's 4 x 4 matrix of pairs (lane t, n-tile j) transposed: lane t ends with n-tile jg + t's 4 pairs.
        uint32_t A = __byte_perm(w[0], w[1], 0x5410), B = __byte_perm(w[2], w[3], 0x5410);
        const uint32_t x = __shfl_xor_sync(0xffffffffu, upper ? A : B, 2);  // 2 x 2 blocks across lanes t, t ^ 2
        if (upper) {
          A = x;
        } else {
          B = x;
        }
        // Within each 2 x 2 block, across lanes t, t ^ 1.
        const uint32_t r = __shfl_xor_sync(0xffffffffu, __byte_perm(A, B, odd ? 0x5410 : 0x7632), 1);
        const uint2 out = make_uint2(__byte_perm(A, r, odd ? 0x3254 : 0x5410), __byte_perm(B, r, odd ? 0x3276 : 0x7610));
        const int k = kq + t * 8;
        if (m < M && k < p.K) *reinterpret_cast<uint2*>(y + static_cast<int64_t>(m) * p.out_ld + k) = out;
      }
  }
}

// quad_epilogue_i8 where it fits (kI8, at least four n-tiles per warp); whether it ran.
template <int WM, int WN, bool kI8, typename Acc, int kMT, int kNT>
__device__ __forceinline__ bool try_quad_epilogue(const ConvParams& p, const ConvArgs& a, int M, int block_m,
                                                  int block_n, int warp_m, int warp_n, int lane,
                                                  const Acc (&acc)[kMT][kNT][4]) {
  if constexpr (!kI8 || kNT % 4 != 0) {
    return false;
  } else {
    if (!quad_fits(p, a)) return false;
    const auto run = [&](auto res) {
      constexpr bool kRes = decltype(res)::value;
      constexpr int kSilu = static_cast<int>(Act::kSilu);
      if (p.act == Act::kSilu && p.small_acc) {  // the usual INT8 layer: its own code without I2F
        quad_epilogue_i8<WM, WN, kSilu, kAccSmall, kRes>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
      } else if (p.act == Act::kSilu) {
        quad_epilogue_i8<WM, WN, kSilu, kAccI2F, kRes>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
      } else {
        quad_epilogue_i8<WM, WN, -1, kAccI2F, kRes>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
      }
    };
    if (has_residual(a)) {
      run(std::true_type());
    } else {
      run(std::false_type());
    }
    return true;
  }
}

// The usual INT8 layer (lean_fits: SiLU, small accumulators, the quad epilogue's int8 output) compiled alone into
// kernels of their own (their kLean instantiations, picked at launch), without the other epilogues' code, which costs
// a kernel even where it never runs (the register-capped wgmma kernels spill; an epilogue added inline slowed layers
// that never took it by 5-14%).
__host__ __device__ __forceinline__ bool lean_fits(const ConvParams& p, const ConvArgs& a) {
  return quad_fits(p, a) && p.act == Act::kSilu && p.small_acc;
}
template <int WM, int WN, typename Acc, int kMT, int kNT>
__device__ __forceinline__ void lean_epilogue(const ConvParams& p, const ConvArgs& a, int M, int block_m, int block_n,
                                              int warp_m, int warp_n, int lane, const Acc (&acc)[kMT][kNT][4]) {
  constexpr int kSilu = static_cast<int>(Act::kSilu);
  if (has_residual(a)) {
    quad_epilogue_i8<WM, WN, kSilu, kAccBiased, true>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
  } else {
    quad_epilogue_i8<WM, WN, kSilu, kAccBiased, false>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
  }
}

template <int BM, int BN, int WM, int WN, bool kI8, typename Acc, int kMT, int kNT>
__device__ __forceinline__ void igemm_epilogue(const ConvParams& p, const ConvArgs& a, int M, int block_m, int block_n,
                                               int warp_m, int warp_n, int lane, const Acc (&acc)[kMT][kNT][4]) {
  if (try_quad_epilogue<WM, WN, kI8>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc)) return;
  if (p.act == Act::kSilu) {
    igemm_epilogue_act<BM, BN, WM, WN, kI8, static_cast<int>(Act::kSilu)>(p, a, M, block_m, block_n, warp_m, warp_n,
                                                                          lane, acc);
  } else {
    igemm_epilogue_act<BM, BN, WM, WN, kI8, -1>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
  }
}

// How staged_epilogue can write this layer: kNhwc (NHWC fp16 or int8 output, every tensor it touches in whole groups
// of 8 channels, 16 bytes of fp16 or 8 of int8, at aligned addresses), kNchw (NCHW fp16 or fp32 output in groups of
// 8 pixels of a channel: OH * OW a multiple of 8; no second output), or not at all.
enum class Staging { kNone, kNhwc, kNchw };
__host__ __device__ __forceinline__ Staging staging(const ConvParams& p, const ConvArgs& a) {
  if ((p.splits != 1 && !p.split_in_cluster) || p.direct_epilogue) return Staging::kNone;
  if (p.out_format == OutFormat::kNchwF16 || p.out_format == OutFormat::kNchwF32) {
    return (p.OH * p.OW) % 8 == 0 && !a.y2 && aligned(a.y, 16) ? Staging::kNchw : Staging::kNone;
  }
  const bool i8 = p.out_format == OutFormat::kNhwcI8;
  return p.K % 8 == 0 && p.out_ld % 8 == 0 && p.out_coff % 8 == 0 && aligned(a.y, i8 ? 8 : 16) &&
                 (!has_residual(a) || p.res_ld % 8 == 0) && aligned(a.residual, 16) && aligned(a.residual_i8, 8) &&
                 (!a.y2 || (p.out2_ld % 8 == 0 && p.out2_coff % 8 == 0 && aligned(a.y2, 16)))
             ? Staging::kNhwc
             : Staging::kNone;
}

__device__ __forceinline__ uint4 pack_half8(const float (&v)[8]) {
  uint4 raw;
  __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
  return raw;
}

// 8 channels quantized with one scale (r255: its int8_rcp255), q gets the integers: exactly as the INT8 contract's
// division (quantize_int8: the division only near a rounding tie; ConvParams::exact_silu, bit-exact plans), or
// branch-free with the reciprocal alone (quantize_int8_biased, within +-1 LSB): the thin layers' epilogues are bound
// by instruction issue, and the tie checks were a third of an INT8 SiLU epilogue's instructions (Nsight Compute).
__device__ __forceinline__ uint2 pack_int8x8(const float (&v)[8], float scale, float r255, bool exact, float (&q)[8]) {
  if (exact) {
    uint2 raw;
    int8_t* b = reinterpret_cast<int8_t*>(&raw);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = quantize_int8(v[j], scale);
      b[j] = static_cast<int8_t>(i);
      q[j] = static_cast<float>(i);
    }
    return raw;
  }
  float t[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    t[j] = quantize_int8_biased(v[j], r255);
    q[j] = int8_value(t[j]);
  }
  return make_uint2(pack_int8_biased(t[0], t[1], t[2], t[3]), pack_int8_biased(t[4], t[5], t[6], t[7]));
}

// staged_epilogue's int8 output for SiLU layers with ConvParams::exact_silu: the 8 values v quantized with the
// reciprocal alone (ties.r1), bit `j` of `near` set for each value that SiluTies::near leaves in doubt (rare; err:
// the fast SiLU's error bounds), to be recomputed by exact_silu_fix.
__device__ __forceinline__ uint2 pack_int8x8_flagged(const float (&v)[8], const float (&err)[8], const SiluTies& ties,
                                                    float (&q)[8], unsigned& near) {
  uint2 raw;
  int8_t* b = reinterpret_cast<int8_t*>(&raw);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float d = v[j] * ties.r1;
    if (SiluTies::near(d, err[j], ties.r1)) near |= 1u << j;
    const int i = max(-128, min(127, __float2int_rn(d)));
    b[j] = static_cast<int8_t>(i);
    q[j] = static_cast<float>(i);
  }
  return raw;
}

// The values of pixel m, channels k0.. flagged in `near` (not 0) recomputed as the reference does: silu_exact of
// their value before the activation (the tile's entries lo[0..3], hi[0..3]) plus the residual, in one loop so that
// the double-precision code is there once; written back to the tile and to v.
__device__ __forceinline__ void exact_silu_fix(const ConvParams& p, const ConvArgs& a, unsigned near, float* lo,
                                               float* hi, int m, int k0, float (&v)[8]) {
  for (unsigned left = near; left != 0; left &= left - 1) {
    const int j = __ffs(left) - 1;
    float* t = (j < 4 ? lo : hi) + (j & 3);
    *t = silu_exact(*t) + (has_residual(a) ? residual_at(p, a, m, k0 + j) : 0.f);
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (near >> j & 1) v[j] = (j < 4 ? lo : hi)[j & 3];
  }
}

// ConvParams::exact_silu for one value (split-K's epilogue, the grouped kernel): x before the activation, f =
// ties.act(p, x), v the value with the residual; the reference's value where v is in doubt (SiluTies::risky), else v.
__device__ __forceinline__ float exact_silu_near_tie(const ConvParams& p, const ConvArgs& a, const SiluTies& ties,
                                                    int m, int k, float x, float f, float v) {
  if (!ties.on || !ties.risky(silu_fast_error(x, f), v)) return v;
  const float e = silu_exact(x);
  return has_residual(a) ? e + residual_at(p, a, m, k) : e;
}

// The staged epilogues' barrier and first thread index: a tile shared by the block's kThreads threads, or (kThreads =
// 32) a warp's own tile (conv_warp_halo_kernel), which needs only the warp's.
template <int kThreads>
__device__ __forceinline__ void tile_sync() {
  if constexpr (kThreads == 32) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}
template <int kThreads>
__device__ __forceinline__ int tile_thread() {
  return kThreads == 32 ? static_cast<int>(threadIdx.x & 31) : static_cast<int>(threadIdx.x);
}

// The epilogue of igemm_epilogue's paired path, for NHWC outputs (stageable), through shared memory: the warps write
// their fragments' activated values (fp32, the rounding of the register path) into the tile in `smem`, then each
// thread takes 8 consecutive channels of a pixel and adds the residual, converts and stores them with 16-byte (fp16) or
// 8-byte (int8) accesses, a warp covering whole pixel rows: the fragments' own 4-byte (fp16) or 2-byte (int8) stores
// spread over 8 pixels per instruction. The tile's rows are BN floats, their 16-byte chunks XOR-swizzled by the row so
// that both phases are free of bank conflicts. The caller has finished with the pipeline's shared memory.
template <int BM, int BN, int WM, int WN, int kThreads, bool kI8, int kAct, bool kExact, typename Acc, int kMT, int kNT>
__device__ __forceinline__ void staged_epilogue(const ConvParams& p, const ConvArgs& a, int M, int block_m, int block_n,
                                                int warp_m, int warp_n, int lane, const Acc (&acc)[kMT][kNT][4],
                                                float* tile) {
  static_assert(BN % 32 == 0, "at least 8 chunks per row");
  const auto at = [](int r, int c) {  // float index of column c (a multiple of 2) in row r
    return r * BN + ((((c >> 2) ^ (r & 7)) << 2) | (c & 3));
  };
  // kExact (ConvParams::exact_silu, INT8 SiLU layers; its own instantiation, so that the usual one runs none of its
  // code: a runtime switch cost INT8 YOLOv5s' SiLU layers 5-10%): the tile holds the values before the activation,
  // which the second phase applies, keeping each value's error bound.
  static_assert(!kExact || (kI8 && kAct == static_cast<int>(Act::kSilu)), "exact SiLU: INT8 SiLU epilogues only");
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
    const int c = warp_n * WN + j * 8 + (lane & 3) * 2;
    const ChannelPair<kI8, kAct> ch(p, a, block_n + c);
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp_m * WM + i * 16 + (lane >> 2) + h * 8;
        *reinterpret_cast<float2*>(tile + at(r, c)) = kExact ? ch.affine(acc[i][j], h) : ch.activate(p, acc[i][j], h);
      }
  }
  tile_sync<kThreads>();
  const bool i8 = p.out_format == OutFormat::kNhwcI8;
  const SiluTies ties(p, a);
  // Bit-exact plans (exact_silu) round every int8 output as the reference's division; the others with a reciprocal.
  const bool exact = kExact || p.exact_silu;
  // Each thread keeps its 8 channels (so their constants and, where the row step is a multiple of 8, the tile's
  // swizzle) and steps down the rows: the index arithmetic per row was most of a thin layer's epilogue (Nsight Compute:
  // IMAD, ISETP, LOP3 and SHF ahead of the floating-point work).
  constexpr int kGroups = BN / 8;  // per tile row
  static_assert(kThreads % kGroups == 0, "a thread's channels stay the same from row to row");
  constexpr int kRowStep = kThreads / kGroups;
  const int g0 = tile_thread<kThreads>();
  const int c = g0 % kGroups * 8, k0 = block_n + c;
  if (k0 >= p.K) return;
  const bool lo = k0 < p.out_split;  // the 8 channels' int8 scale (out_split a multiple of 8)
  const float out_scale = lo ? p.out_scale : p.out_scale_hi, r255 = int8_rcp255(out_scale);
#pragma unroll 1
  for (int step = 0; step < (BM + kRowStep - 1) / kRowStep; ++step) {
    const int r = g0 / kGroups + step * kRowStep;
    const int m = block_m + r;
    if (r >= BM || m >= M) break;
    float* const t_lo = kRowStep % 8 == 0 ? tile + at(g0 / kGroups, c) + step * kRowStep * BN : tile + at(r, c);
    float* const t_hi = kRowStep % 8 == 0 ? tile + at(g0 / kGroups, c + 4) + step * kRowStep * BN : tile + at(r, c + 4);
    float v[8], err[8];  // err: the fast SiLU's error bounds (kExact)
    load8(t_lo, t_hi, v);
    if constexpr (kExact) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float x = v[j];
        v[j] = silu_sigmoid(x);
        err[j] = silu_fast_error(x, v[j]);
      }
    }
    const int64_t res_at = static_cast<int64_t>(m) * p.res_ld + k0;
    if (a.residual) {
      const uint4 raw = *reinterpret_cast<const uint4*>(a.residual + res_at);
      const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[2 * j] += __low2float(h[j]);
        v[2 * j + 1] += __high2float(h[j]);
      }
    } else if (kI8 && a.residual_i8) {
      const uint2 raw = *reinterpret_cast<const uint2*>(a.residual_i8 + res_at);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] += __fmul_rn(int8_float(j < 4 ? raw.x : raw.y, j & 3), p.res_scale);
    }
    float q[8];
    uint2 raw = {};  // y's int8 values
    bool packed = false;
    if constexpr (kExact) {
      if (ties.on) {  // quantized with the reciprocal; the rare values in doubt recomputed as the reference does
        unsigned near = 0;
        if (i8) raw = pack_int8x8_flagged(v, err, ties, q, near);
        if (ties.r2 != 0.f) {
#pragma unroll
          for (int j = 0; j < 8; ++j) near |= SiluTies::near(v[j] * ties.r2, err[j], ties.r2) ? 1u << j : 0u;
        }
        if (near) {
          exact_silu_fix(p, a, near, t_lo, t_hi, m, k0, v);
          if (i8) raw = pack_int8x8(v, out_scale, r255, true, q);
        }
        packed = true;
      }
    }
    const int64_t out_at = static_cast<int64_t>(m) * p.out_ld + p.out_coff + k0;
    float u[8];  // what y2 gets
#pragma unroll
    for (int j = 0; j < 8; ++j) u[j] = v[j];
    if (i8) {
      if (!packed) raw = pack_int8x8(v, out_scale, r255, exact, q);
      *reinterpret_cast<uint2*>(static_cast<int8_t*>(a.y) + out_at) = raw;
      if (!kI8 || p.out2_of_q) {
#pragma unroll
        for (int j = 0; j < 8; ++j) u[j] = __fmul_rn(q[j], out_scale);
      }
    } else {
      *reinterpret_cast<uint4*>(static_cast<__half*>(a.y) + out_at) = pack_half8(v);
    }
    // The fp16 kernels' only second output is the fp16 copy beside an int8 output (see store_out).
    if (!a.y2 || (!kI8 && !i8)) continue;
    const int64_t out2_at = static_cast<int64_t>(m) * p.out2_ld + p.out2_coff + k0;
    if (kI8 && p.out2_format == Out2Format::kI8) {
      float q2[8];
      *reinterpret_cast<uint2*>(static_cast<int8_t*>(a.y2) + out2_at) =
          pack_int8x8(u, p.out2_scale, int8_rcp255(p.out2_scale), exact, q2);
    } else {
      *reinterpret_cast<uint4*>(static_cast<__half*>(a.y2) + out2_at) = pack_half8(u);
    }
  }
}

// staged_epilogue for NCHW outputs (Staging::kNchw; the detection heads, which write NCHW for the decoding): the tile
// is stored channel-major, each thread then takes 8 consecutive pixels of one channel (never two images: OH * OW is a
// multiple of 8) and writes them with 16-byte (fp16) or two 16-byte (fp32) stores, a warp covering runs of pixels of a
// channel plane. 8-float runs XOR-swizzled by the channel pair, so that the fragments' writes are free of conflicts.
template <int BM, int BN, int WM, int WN, int kThreads, bool kI8, int kAct, typename Acc, int kMT, int kNT>
__device__ __forceinline__ void staged_epilogue_nchw(const ConvParams& p, const ConvArgs& a, int M, int block_m,
                                                     int block_n, int warp_m, int warp_n, int lane,
                                                     const Acc (&acc)[kMT][kNT][4], float* tile) {
  static_assert(BM % 32 == 0, "at least 4 runs of 8 pixels per channel");
  const auto at = [](int c, int r) { return c * BM + (r ^ (((c >> 1) & 3) << 3)); };
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
    const int c = warp_n * WN + j * 8 + (lane & 3) * 2;
    const ChannelPair<kI8, kAct> ch(p, a, block_n + c);
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp_m * WM + i * 16 + (lane >> 2) + h * 8;
        const float2 v = ch.activate(p, acc[i][j], h);
        tile[at(c, r)] = v.x;
        tile[at(c + 1, r)] = v.y;
      }
  }
  tile_sync<kThreads>();
  const int hw = p.OH * p.OW;
  constexpr int kRuns = BM / 8;  // per channel
  for (int g = tile_thread<kThreads>(); g < BN * kRuns; g += kThreads) {
    const int c = g / kRuns, r = g % kRuns * 8;
    const int m = block_m + r, k = block_n + c;
    if (m >= M || k >= p.K) continue;
    float v[8];
    load8(tile + at(c, r), tile + at(c, r + 4), v);
    if (has_residual(a)) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] += residual_value<kI8>(p, a, m + j, k);
    }
    const int n = m / hw, pix = m - n * hw;
    const int64_t idx = (static_cast<int64_t>(n) * p.K + k) * hw + pix;
    if (p.out_format == OutFormat::kNchwF16) {
      *reinterpret_cast<uint4*>(static_cast<__half*>(a.y) + idx) = pack_half8(v);
    } else {
      float4* y = reinterpret_cast<float4*>(static_cast<float*>(a.y) + idx);
      y[0] = make_float4(v[0], v[1], v[2], v[3]);
      y[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
  }
}

// Which epilogues a conv_igemm_kernel instantiation has: all of them (the layer's case picked at run time), or one
// alone, in a copy that the launch picks where it fits: the usual INT8 layer's (kEpiLean, lean_fits), an INT8
// detection head's, NCHW fp16 or fp32 through shared memory with Sigmoid (kEpiHead, head_fits: the register-capped
// wgmma kernels the heads take spill with every epilogue compiled in), or the staged NHWC
// SiLU epilogue of INT8 layers the quad one does not fit, those with a second output (kEpiStaged, staged_fits).
enum Epi : int { kEpiAll = 0, kEpiLean, kEpiHead, kEpiStaged };
__host__ __device__ __forceinline__ bool head_fits(const ConvParams& p, const ConvArgs& a) {
  return staging(p, a) == Staging::kNchw && p.act == Act::kSigmoid && !has_residual(a);
}
__host__ __device__ __forceinline__ bool staged_fits(const ConvParams& p, const ConvArgs& a) {
  return staging(p, a) == Staging::kNhwc && p.act == Act::kSilu && !p.exact_silu && !quad_fits(p, a);
}

// The epilogue of a block (or, kThreads = 32, a warp) that computed one M tile (block_m, the N tile at block_n): through
// shared memory (`tile`, the caller done with it, BM x BN floats) where staging() allowed (st), else from the registers.
template <int BM, int BN, int WM, int WN, int kThreads, bool kI8, typename Acc, int kMT, int kNT>
__device__ __forceinline__ void tile_epilogue(const ConvParams& p, const ConvArgs& a, Staging st, int M, int block_m,
                                              int block_n, int warp_m, int warp_n, int lane,
                                              const Acc (&acc)[kMT][kNT][4], float* tile) {
  if (try_quad_epilogue<WM, WN, kI8>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc)) return;
  if (st != Staging::kNone) tile_sync<kThreads>();  // every thread is done with the shared memory `tile` reuses
  constexpr int kSilu = static_cast<int>(Act::kSilu), kSigmoid = static_cast<int>(Act::kSigmoid);
  if (st == Staging::kNhwc && p.act == Act::kSilu) {
    if constexpr (kI8) {
      if (p.exact_silu) {
        staged_epilogue<BM, BN, WM, WN, kThreads, kI8, kSilu, true>(p, a, M, block_m, block_n, warp_m, warp_n, lane,
                                                                    acc, tile);
        return;
      }
    }
    staged_epilogue<BM, BN, WM, WN, kThreads, kI8, kSilu, false>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc,
                                                                 tile);
  } else if (st == Staging::kNhwc) {
    staged_epilogue<BM, BN, WM, WN, kThreads, kI8, -1, false>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc,
                                                              tile);
  } else if (st == Staging::kNchw && p.act == Act::kSigmoid) {
    staged_epilogue_nchw<BM, BN, WM, WN, kThreads, kI8, kSigmoid>(p, a, M, block_m, block_n, warp_m, warp_n, lane,
                                                                  acc, tile);
  } else if (st == Staging::kNchw) {
    staged_epilogue_nchw<BM, BN, WM, WN, kThreads, kI8, -1>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc,
                                                            tile);
  } else {
    igemm_epilogue<BM, BN, WM, WN, kI8>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
  }
}

// kI8: int8 x int8 -> int32 (m16n8k32), 16 channels per 16-byte chunk; otherwise fp16 x fp16 -> fp32 (m16n8k16),
// 8 channels per chunk. The tile layout in bytes, the pipeline and the ldmatrix addressing are the same.
// kPersist: a block takes M tiles blockIdx.x, blockIdx.x + gridDim.x, ... (launch_conv_igemm's grid is about one
// wave), each the K loop then the epilogue, so that its set-up (weight rows, the epilogue's staging check, integer
// divisions) is paid once: for thin pointwise layers of one or two K tiles that set-up had cost as many instructions
// as the MMAs and the epilogue together (Nsight Compute). Only some configurations: the state the loop keeps raises
// the register count, which costs the deep layers occupancy (and the register-capped wgmma kernels spills).
// kWg (sm_90a): each warpgroup multiplies its 64 rows of the A tile by the whole B tile with wgmma (wgmma.cuh), reading
// both from shared memory, instead of each warp loading fragments with ldmatrix for mma.sync: WM = 16 (a warp's rows
// of the result), WN = BN. The loads run kStages - 2 tiles ahead so that one tile's MMAs stay in flight while the
// next tile's are issued (the stage they read is refilled only after the following barrier).
// The wgmma kernels are bound by latency more than by the tensor cores (YOLOv5s at batch 32 lost 15-20% per layer
// when 72 registers instead of 64 let 3 blocks of 128x64 on an SM instead of 4): their register budget is set so that
// as many blocks fit as shared memory allows, while leaving the accumulators (BN / 2 per thread) and 32 more.
constexpr int wg_min_blocks(int threads, int smem_bytes, int bn) {
  int blocks = 2048 / threads;
  if (228 * 1024 / (smem_bytes + 1024) < blocks) blocks = 228 * 1024 / (smem_bytes + 1024);
  while (blocks > 1 && (65536 / (blocks * threads) & ~7) < bn / 2 + 32) --blocks;
  return blocks < 1 ? 1 : blocks;
}

// Split-K in a cluster (ConvParams::split_in_cluster): each block of the cluster (its K range) puts its partial sums
// in its shared memory in the registers' order, and the cluster's first block adds the others' to its registers
// through distributed shared memory. Returns whether this block goes on to the epilogue (the first). The tile must
// fit the shared memory (tile_stages); the caller has waited for its loads and MMAs.
template <int kThreads, typename Acc, int kMT, int kNT>
__device__ __forceinline__ bool cluster_split_reduce(Acc (&acc)[kMT][kNT][4], unsigned char* smem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // No clusters before sm_90: conv_igemm_config_fits offers split_in_cluster only where the wgmma code runs.
  (void)acc;
  (void)smem;
  __trap();
  return false;
#else
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  Acc* mine = reinterpret_cast<Acc*>(smem);
  __syncthreads();  // every warp is done with the pipeline's stages
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) mine[((i * kNT + j) * 4 + e) * kThreads + threadIdx.x] = acc[i][j][e];
  cluster.sync();
  const bool first = cluster.block_rank() == 0;
  if (first) {
    for (unsigned r = 1; r < cluster.num_blocks(); ++r) {
      const Acc* peer = cluster.map_shared_rank(mine, r);
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] += peer[((i * kNT + j) * 4 + e) * kThreads + threadIdx.x];
    }
  }
  cluster.sync();  // the others' shared memory stays until the first has read it
  return first;
#endif
}

// Whether a block's epilogue can stage its BM x BN fp32 tile in the pipeline's shared memory (kStages
// stages of BM + BN rows of kRow bytes): tile_epilogue, else the registers' igemm_epilogue.
__host__ __device__ constexpr bool tile_stages(int bm, int bn, int stages, int row) {
  return bn % 32 == 0 && bm % 32 == 0 && bm * bn * 4 <= stages * (bm + bn) * row;
}

template <int BM, int BN, int WM, int WN, int kStages, bool kI8, bool kPersist, bool kWg = false, int kRow = 64,
          int kEpi = kEpiAll>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32,
                                  kWg ? wg_min_blocks((BM / WM) * (BN / WN) * 32, kStages * (BM + BN) * kRow, BN) : 0)
    conv_igemm_kernel(const ConvParams p, const ConvArgs a) {
  using Acc = std::conditional_t<kI8, int, float>;
  constexpr int kElem = kI8 ? 1 : 2;             // bytes per element
  constexpr int kChunk = 16 / kElem;             // elements per 16-byte chunk
  constexpr int kTileK = kRow / kElem;           // elements per tile row (64 or 128 bytes)
  constexpr int kRowChunks = kRow / 16;          // 16-byte chunks per tile row
  constexpr int kWarpsN = BN / WN;
  constexpr int kThreads = (BM / WM) * kWarpsN * 32;
  constexpr int kMT = WM / 16, kNT = WN / 8;
  constexpr int kAIters = BM * kRowChunks / kThreads, kBIters = BN * kRowChunks / kThreads;
  constexpr int kStageBytes = (BM + BN) * kRow;
  static_assert(kAIters >= 1 && kBIters >= 1 && kNT % 2 == 0, "tile shape");
  static_assert(!kWg || (WM == 16 && WN == BN && BM % 64 == 0 && kStages >= 3), "wgmma tile shape");
  static_assert(kRow == 64 || (kRow == 128 && kWg), "128-byte rows: wgmma only");
  extern __shared__ __align__(1024) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / kWarpsN, warp_n = warp % kWarpsN;
  const int M = p.N * p.OH * p.OW;
  const int block_n = blockIdx.y * BN;
  const int kc = tid % kRowChunks;  // this thread's 16-byte chunk within a tile row

  const uint32_t smem_base = smem_addr(smem);
  // This block's range of K tiles (all of them without split-K).
  const int ktiles_all = (p.Kp + kTileK - 1) / kTileK;  // 128-byte rows: the last may pass the weight row's end
  const int per_split = p.splits == 1 ? ktiles_all : (ktiles_all + p.splits - 1) / p.splits;
  const int kt0 = blockIdx.z * per_split;
  const int ktiles = max(0, min(ktiles_all - kt0, per_split));

  // The loads are issued by every thread for every K tile, so their address arithmetic is kept to additions and
  // compares (Nsight Compute: the kernels issue-bound, ~90 instructions per output element with divisions here).
  // The im2col rows this thread loads, fixed for the K loop of one M tile: each row's input pixel at tap (0, 0), and
  // its top-left input coordinates (a row past M gets coordinates that fail every bounds check). A copy whose bounds
  // check fails reads nothing (cp.async's src-size 0 zero-fills), so its address, which may lie outside the tensor,
  // is passed as it is rather than selected away (two instructions per copy).
  const char* a_src[kAIters];
  int a_ih[kAIters], a_iw[kAIters];
  // This thread's next K element to load and its (filter row, filter column, channel); advanced one tile per load.
  int kn = 0, tr = 0, ts = 0, tc = 0;
  // 1x1, stride 1, no padding: row m reads pixel m, with no integer divisions (tens of instructions each, per row
  // and M tile, which the thin pointwise layers feel).
  const bool pointwise = p.R == 1 && p.S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
  auto set_rows = [&](int block_m) {
#pragma unroll
    for (int i = 0; i < kAIters; ++i) {
      const int m = block_m + tid / kRowChunks + i * (kThreads / kRowChunks);
      if (pointwise) {
        a_ih[i] = m < M ? 0 : INT_MIN / 2;
        a_iw[i] = 0;
        a_src[i] = static_cast<const char*>(a.x) + static_cast<int64_t>(m) * p.in_ld * kElem;
        continue;
      }
      const int n = fast_div(m, p.hw_magic, p.hw_shift), pix = m - n * p.OH * p.OW;
      const int oh = fast_div(pix, p.ow_magic, p.ow_shift), ow = pix - oh * p.OW;
      a_ih[i] = m < M ? oh * p.stride_h - p.pad_h : INT_MIN / 2;
      a_iw[i] = ow * p.stride_w - p.pad_w;
      a_src[i] = static_cast<const char*>(a.x) +
                 ((static_cast<int64_t>(n) * p.H + a_ih[i]) * p.W + a_iw[i]) * p.in_ld * kElem;
    }
    kn = kt0 * kTileK + kc * kChunk;  // the K loop starts over
    if (kn < p.C) {  // the first tap (always, without split-K, where C is at least a tile row)
      tc = kn;
      tr = ts = 0;
      return;
    }
    const int rs = kn / p.C;
    tc = kn - rs * p.C;
    tr = rs / p.S;
    ts = rs - tr * p.S;
  };
  // B's rows for this block: element offsets of this thread's weight rows (weights stay under 2^31 elements).
  int b_off[kBIters];
#pragma unroll
  for (int i = 0; i < kBIters; ++i) {
    const int ko = block_n + tid / kRowChunks + i * (kThreads / kRowChunks);
    b_off[i] = ko < p.K ? ko * p.Kp : -1;
  }

  // The weights of the K tile at element kb into pipeline stage `stage`.
  auto load_b = [&](int stage, int kb) {
    const uint32_t sb = smem_base + stage * kStageBytes + BM * kRow;
#pragma unroll
    for (int i = 0; i < kBIters; ++i) {
      const int row = tid / kRowChunks + i * (kThreads / kRowChunks);
      const bool ok = b_off[i] >= 0 && kb < p.Kp;  // else no read (an address a_src's comment explains)
      cp_async16(sb + tile_offset<kRow>(row, kc), static_cast<const char*>(a.w) + (b_off[i] + kb) * kElem, ok ? 16 : 0);
    }
  };
  // Loads the next K tile of this M tile into pipeline stage `stage` (the K tiles in order, from set_rows); without
  // its weights where the prologue loaded them already (prefetch_b).
  auto load_tile = [&](int stage, bool with_b) {
    const uint32_t sa = smem_base + stage * kStageBytes;
    const int dr = tr * p.dil_h, ds = ts * p.dil_w;
    const int64_t tap = ((static_cast<int64_t>(dr) * p.W + ds) * p.in_ld + tc) * kElem;  // bytes
    const bool k_ok = tr < p.R;  // past the filter: the weight row's zero padding
#pragma unroll
    for (int i = 0; i < kAIters; ++i) {
      const int row = tid / kRowChunks + i * (kThreads / kRowChunks);
      const bool ok = k_ok && static_cast<unsigned>(a_ih[i] + dr) < static_cast<unsigned>(p.H) &&
                      static_cast<unsigned>(a_iw[i] + ds) < static_cast<unsigned>(p.W);
      cp_async16(sa + tile_offset<kRow>(row, kc), a_src[i] + tap, ok ? 16 : 0);
    }
    if (with_b) load_b(stage, kn);
    kn += kTileK;
    tc += kTileK;
    while (tc >= p.C) {
      tc -= p.C;
      if (++ts == p.S) {
        ts = 0;
        ++tr;
      }
    }
  };

  // The lean copy's accumulators start from kAccBias (kAccBiased), in a split-K cluster the first block's alone
  // (cluster_split_reduce adds the others' partial sums to its).
  Acc acc[kMT][kNT][4];
  const Acc acc0 = kEpi == kEpiLean && blockIdx.z == 0 ? kAccBias : 0;
  auto clear = [&] {
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = acc0;
  };
  clear();

  // kWg: the descriptors of stage 0's tiles, whose address field (bits 0-13, the shared-memory address / 16) another
  // stage's offset is added to (shared memory stays under 256 KB: no carry out of the field), rather than building
  // each descriptor anew per K tile.
  [[maybe_unused]] const uint64_t da0 = wgmma_desc<kRow>(smem_base + (warp >> 2) * 64 * kRow),
                                  db0 = wgmma_desc<kRow>(smem_base + BM * kRow);
  // One K tile from pipeline stage `stage`: two k16 (fp16) or k32 (int8) MMA steps per warp. kWg: issued and
  // committed as one group, left in flight.
  auto compute = [&](int stage) {
    if constexpr (kWg) {
      const uint64_t off = static_cast<uint32_t>(stage * kStageBytes) >> 4;
      const uint64_t da = da0 + off, db = db0 + off;
      wgmma_fence_acc(acc);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kRow / 32; ++kk) wgmma_async<BN, kI8>(acc, da + 2 * kk, db + 2 * kk);
      wgmma_commit();
      wgmma_fence_acc(acc);
    } else {
      const uint32_t sa = smem_base + stage * kStageBytes;
      const uint32_t sb = sa + BM * kRow;
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        uint32_t af[kMT][4];
#pragma unroll
        for (int i = 0; i < kMT; ++i) {
          const int row = warp_m * WM + i * 16 + (lane & 15);
          ldmatrix_x4(sa + tile_offset(row, kk * 2 + (lane >> 4)), af[i][0], af[i][1], af[i][2], af[i][3]);
        }
        uint32_t bf[kNT][2];
#pragma unroll
        for (int j = 0; j < kNT; j += 2) {
          const int row = warp_n * WN + j * 8 + ((lane >> 4) << 3) + (lane & 7);
          ldmatrix_x4(sb + tile_offset(row, kk * 2 + ((lane >> 3) & 1)), bf[j][0], bf[j][1], bf[j + 1][0],
                      bf[j + 1][1]);
        }
#pragma unroll
        for (int i = 0; i < kMT; ++i)
#pragma unroll
          for (int j = 0; j < kNT; ++j) {
            if constexpr (kI8) {
              mma_16832_s8(acc[i][j], af[i], bf[j][0], bf[j][1]);
            } else {
              mma_16816(acc[i][j], af[i], bf[j][0], bf[j][1]);
            }
          }
      }
    }
  };

  // The weights are constants: the first `stages` K tiles' (of the first M tile) go out before waiting for the kernel
  // that writes the input (pdl_wait), overlapping its last blocks; in the first commit group, with the first input
  // tile. load_tile leaves them out after.
  auto prefetch_b = [&](int stages) {
#pragma unroll
    for (int s = 0; s < stages; ++s) {
      if (s < ktiles) load_b(s, kn + s * kTileK);
    }
  };

  // The epilogue of a block that computed one M tile: staged through the pipeline's shared memory where the tile
  // fits (tile_epilogue), else from the registers.
  constexpr bool kStaged = tile_stages(BM, BN, kStages, kRow);
  static_assert(kEpi == kEpiAll || kEpi == kEpiLean || kStaged, "epilogues through shared memory");
  const Staging st = kStaged && kEpi == kEpiAll ? staging(p, a) : Staging::kNone;
  auto epilogue = [&](int block_m) {
    if constexpr (kEpi == kEpiLean) {
      lean_epilogue<WM, WN>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
    } else if constexpr (kEpi == kEpiHead) {
      tile_sync<kThreads>();  // as tile_epilogue: every thread is done with the stages the tile reuses
      staged_epilogue_nchw<BM, BN, WM, WN, kThreads, kI8, static_cast<int>(Act::kSigmoid)>(
          p, a, M, block_m, block_n, warp_m, warp_n, lane, acc, reinterpret_cast<float*>(smem));
    } else if constexpr (kEpi == kEpiStaged) {
      tile_sync<kThreads>();
      staged_epilogue<BM, BN, WM, WN, kThreads, kI8, static_cast<int>(Act::kSilu), false>(
          p, a, M, block_m, block_n, warp_m, warp_n, lane, acc, reinterpret_cast<float*>(smem));
    } else if constexpr (kStaged) {
      tile_epilogue<BM, BN, WM, WN, kThreads, kI8>(p, a, st, M, block_m, block_n, warp_m, warp_n, lane, acc,
                                                   reinterpret_cast<float*>(smem));
    } else {
      igemm_epilogue<BM, BN, WM, WN, kI8>(p, a, M, block_m, block_n, warp_m, warp_n, lane, acc);
    }
  };

  // Loads run kAhead tiles ahead; with wgmma one tile's MMAs stay in flight, so the stage refilled is the one
  // multiplied two steps before (its MMAs waited for at the end of the step before).
  constexpr int kAhead = kWg ? kStages - 2 : kStages - 1;
  int block_m = blockIdx.x * BM;
  set_rows(block_m);
  prefetch_b(kAhead);
  pdl_wait();
  for (bool first = true;; first = false) {
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < ktiles) load_tile(s, !first);  // the first tile's weights: prefetch_b
      cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
      cp_async_wait<kAhead - 1>();
      if constexpr (kWg) fence_proxy_async_shared();  // cp.async's writes, before wgmma reads them
      __syncthreads();
      const int next = kt + kAhead;
      if (next < ktiles) load_tile(next % kStages, true);
      cp_async_commit();
      compute(kt % kStages);
      if constexpr (kWg) wgmma_wait<1>();
    }
    if constexpr (kWg) {
      wgmma_wait<0>();
      wgmma_fence_acc(acc);
    }
    cp_async_wait<0>();
    if constexpr (kStaged && !kPersist) {
      if (p.split_in_cluster && !cluster_split_reduce<kThreads>(acc, smem)) break;  // its sums went to the first
    }
    const int next_m = kPersist ? block_m + gridDim.x * BM : M;
    if (next_m >= M) pdl_trigger();
    epilogue(block_m);
    if (next_m >= M) break;
    block_m = next_m;
    __syncthreads();  // every warp is done with the shared memory (staged tile, last stages) the next loads refill
    clear();
    set_rows(block_m);
  }
}

// (conv_splitk_epilogue, conv_epilogue_kernel, conv_grouped_i8_kernel: in conv_igemm.cu, which launches them.)

// (conv_stem_halo_kernel: in conv_configs_igemm.cu, its only user.)

// What the halo kernels (conv_stem_halo_kernel, conv_warp_halo_kernel) compute: a 3x3 stride-1 pad-1 conv that keeps
// the image's size, without split-K.
inline bool same_size_3x3(const ConvParams& p) {
  return p.R == 3 && p.S == 3 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 1 && p.pad_w == 1 &&
         p.dil_h == 1 && p.dil_w == 1 && p.OH == p.H && p.OW == p.W && p.splits == 1;
}

inline bool stem_halo_fits(const ConvParams& p) {
  return same_size_3x3(p) && p.C == 16 && p.in_ld == 16 && p.K <= 32 && p.OW % 64 == 0 && p.Kp >= 9 * 16;
}

// conv_warp_halo_kernel's shared memory, for the kernel and its launch alike: the block's weights (bn rows of w_row
// bytes), each warp's ring (ring_rows rows of cols + 2 pixels) and, for the stem, each warp's cols x bn fp32 tile.
struct WarpHaloLayout {
  static constexpr int warps = 4, cols = 32, ring_rows = 4, bn = 32;  // bn: outputs
  int pix_bytes, w_row, slot, weights, rings, tiles;
  __host__ __device__ constexpr WarpHaloLayout(bool i8, bool image)
      : pix_bytes((image ? 16 : 32) * (i8 ? 1 : 2)),  // one pixel's channels (the space-to-depth's 16), one tap
        w_row((i8 && image ? 10 : 9) * pix_bytes + 16),  // taps (the INT8 stem: a zero tenth) + 16 against conflicts
        slot((cols + 2) * pix_bytes),
        weights(bn * w_row),
        rings(warps * ring_rows * slot),
        tiles(image ? warps * cols * bn * 4 : 0) {}
  __host__ __device__ constexpr int bytes() const { return weights + rings + tiles; }
};

// Whether conv_warp_halo_kernel stores from the registers (its usual epilogue: NHWC output in its own precision,
// SiLU, not bit-exact, no second output), and whether its lean copy (kLean) can: INT8 with small accumulators too.
__host__ __device__ __forceinline__ bool halo_lean(const ConvParams& p, const ConvArgs& a, OutFormat own) {
  return staging(p, a) == Staging::kNhwc && p.act == Act::kSilu && !a.y2 && !p.exact_silu && p.out_format == own;
}
inline bool halo_lean_fits(const ConvParams& p, const ConvArgs& a) {
  return halo_lean(p, a, OutFormat::kNhwcI8) && p.small_acc;
}

// What conv_warp_halo_kernel reads: NHWC activations of 32 channels (kActs), or a stem's 3-channel image, fp16 or
// fp32, NHWC or NCHW, or (INT8) int8 NHWC, quantized already.
enum HaloSrc : int { kActs = 0, kImageF16Nhwc, kImageF16Nchw, kImageF32Nhwc, kImageF32Nchw, kImageI8Nhwc };

// (conv_warp_halo_kernel: in conv_configs_halo.cu.)

inline bool stem_image_fits(const ConvParams& p) {
  return same_size_3x3(p) && p.C == 16 && p.in_channels == 3 && (p.in_nchw || p.in_ld == 3) && p.K <= 32 &&
         p.OW % 32 == 0 && p.Kp >= 9 * 16;
}

// conv_warp_halo_kernel over activations: 3x3 stride-1 pad-1 over 32 channels in 16-byte aligned pixels, at most 32
// outputs, whole groups of 32 output columns.
inline bool warp_halo_fits(const ConvParams& p, bool i8) {
  return same_size_3x3(p) && p.C == 32 && p.in_ld % (i8 ? 16 : 8) == 0 && p.K <= 32 && p.OW % 32 == 0 &&
         p.Kp >= 9 * 32;
}

// conv_warp_halo_s2_kernel (conv_configs_halo.cu): YOLOv5's second layer, 3x3 stride 2 pad 1 over 32 int8 channels,
// at most 64 outputs, whole groups of 32 output columns. Its shared memory: the block's weights (bn rows of w_row
// bytes) and each warp's ring of ring_rows input rows, a row's 65 pixels (the 32 output columns' windows) in two
// halves, even then odd columns, so that a tap's 16 pixels are consecutive there.
struct WarpHaloS2Layout {
  static constexpr int warps = 4, cols = 32, ring_rows = 4, bn = 64, pix_bytes = 32, pixels = 2 * cols + 1;
  static constexpr int w_row = 9 * pix_bytes + 16;  // + 16: an ldmatrix phase's 8 rows in distinct banks
  static constexpr int slot = pixels * pix_bytes, weights = bn * w_row, rings = warps * ring_rows * slot;
  static constexpr int bytes() { return weights + rings; }
};
inline bool warp_halo_s2_fits(const ConvParams& p) {
  return p.R == 3 && p.S == 3 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 1 && p.pad_w == 1 &&
         p.dil_h == 1 && p.dil_w == 1 && p.OH == (p.H - 1) / 2 + 1 && p.OW == (p.W - 1) / 2 + 1 && p.splits == 1 &&
         p.C == 32 && p.in_ld % 16 == 0 && p.K <= WarpHaloS2Layout::bn && p.OW % 32 == 0 && p.Kp >= 9 * 32;
}

// conv_warp_pw_kernel (conv_configs_halo.cu): 1x1 INT8 convs over c channels (a multiple of 32; the configurations
// take 32, 64 and 128) into at most bn (32, 64 or 128) outputs, by warps that each stream runs of pixel tiles
// (16 x 128 / bn pixels). Its shared memory: the block's weights (bn rows of c + 16 bytes) and each warp's ring of
// `slots` tiles (rows of c bytes, XOR-swizzled).
struct WarpPwLayout {
  static constexpr int warps = 4, slots = 4;
  int c, bn, pixels, w_row, slot, weights, rings;
  __host__ __device__ constexpr WarpPwLayout(int c_, int bn_)
      : c(c_), bn(bn_), pixels(16 * 128 / bn_), w_row(c_ + 16), slot(16 * 128 / bn_ * c_), weights(bn_ * (c_ + 16)),
        rings(warps * slots * (16 * 128 / bn_) * c_) {}
  __host__ __device__ constexpr int bytes() const { return weights + rings; }
};
// Input channels exactly c (the padded count), more than half of bn outputs (fewer would idle half the MMAs).
inline bool warp_pw_fits(const ConvParams& p, int c, int bn) {
  return p.R == 1 && p.S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0 &&
         p.OH == p.H && p.OW == p.W && p.splits == 1 && p.C == c && p.in_ld % 16 == 0 && p.K <= bn &&
         2 * p.K > bn && p.Kp >= c;
}

// ---- The TMA kernels (conv_tma_kernel, conv_tma_ip_kernel: in conv_configs_tma.cu) ----
constexpr int kTmaBM = 128, kTmaConsumers = 256, kTmaThreads = kTmaConsumers + 32;
__host__ __device__ constexpr int tma_stage_bytes(int bn, int row) { return (kTmaBM + bn) * row; }

// The im2col map's box of filter-window top-left corners along W and H: from -pad to the last output pixel's,
// as offsets from the tensor's first and last pixel.
struct TmaCorners {
  int lower[2], upper[2];  // W, H
  explicit TmaCorners(const ConvParams& p)
      : lower{-p.pad_w, -p.pad_h},
        upper{(p.OW - 1) * p.stride_w - p.pad_w - (p.W - 1), (p.OH - 1) * p.stride_h - p.pad_h - (p.H - 1)} {}
};

// Whether conv_tma_kernel with kRow-byte K tiles can run p: NHWC int8 activations whose channels are whole K tiles
// (padding and taps inside the im2col map's limits), weight rows exactly R x S x C, no split-K.
inline bool tma_fits(const ConvParams& p, int row) {
  const TmaCorners c(p);
  const auto corner = [](int v) { return v >= -128 && v <= 127; };  // a 4-D map's limits
  return p.in_format == InFormat::kNhwc && p.C % row == 0 && p.in_ld % 16 == 0 && p.Kp == p.R * p.S * p.C &&
         p.splits == 1 && !p.split_in_cluster && corner(c.lower[0]) && corner(c.lower[1]) && corner(c.upper[0]) &&
         corner(c.upper[1]) && p.stride_w <= 8 && p.stride_h <= 8 && (p.S - 1) * p.dil_w < 65536 &&
         (p.R - 1) * p.dil_h < 65536 && p.OH > 0 && p.OW > 0;
}

// conv_igemm_kernel's copies for a configuration: kEpiLean for INT8 with four n-tiles per warp or more, kEpiHead and
// kEpiStaged for INT8 whose tile stages; else none.
using ConvKernel = void (*)(ConvParams, ConvArgs);
template <int BM, int BN, int WM, int WN, int kStages, bool kI8, bool kWg, int kRow>
constexpr ConvKernel lean_kernel() {
  if constexpr (kI8 && (WN / 8) % 4 == 0) {
    return conv_igemm_kernel<BM, BN, WM, WN, kStages, true, false, kWg, kRow, kEpiLean>;
  } else {
    return nullptr;
  }
}
template <int kEpi, int BM, int BN, int WM, int WN, int kStages, bool kI8, bool kWg, int kRow>
constexpr ConvKernel staged_kernel() {
  if constexpr (kI8 && tile_stages(BM, BN, kStages, kRow)) {
    return conv_igemm_kernel<BM, BN, WM, WN, kStages, true, false, kWg, kRow, kEpi>;
  } else {
    return nullptr;
  }
}

}  // namespace

enum WarpKind : int { kWarpHalo = 0, kWarpHaloS2, kWarpPw };

// A tile configuration: its kernel and copies, and what the launcher needs to know of them.
struct Config {
  const char* name;
  int bm, bn, threads, stages;
  void (*kernel)(ConvParams, ConvArgs);
  bool int8, persist;
  bool halo = false;  // a strip of rows per block (or warp): conv_stem_halo_kernel where stem_halo_fits, or
                      // conv_warp_halo_kernel (warp_halo set) where stem_image_fits (in != kNhwc) or warp_halo_fits
  bool wg = false;    // wgmma: only where the loaded binary has sm_90a code (g_wgmma)
  int row = 64;       // bytes per tile row (the K extent of a pipeline stage): 64, or 128 for some wgmma ones
  InFormat in = InFormat::kNhwc;  // the input it reads (ConvParams::in_format)
  bool nchw = false;              // an image's layout (ConvParams::in_nchw)
  bool warp_halo = false;         // conv_warp_halo_kernel: a warp per 32 columns of a strip of rows
  void (*tma)(ConvParams, ConvArgs, TmaMaps) = nullptr;  // conv_tma_kernel (then `kernel` is null): where g_tma
  // The lean copies of `kernel` and `tma` (kEpiLean, kLean), launched instead where lean_fits (halo_lean_fits for the
  // warp halo kernels); none for fp16, where the quad epilogue cannot run (fewer than four n-tiles per warp), nor for
  // the persistent and stem_halo ones. `head`, `staged`: the kEpiHead and kEpiStaged copies (INT8 configurations whose
  // tile stages).
  void (*lean)(ConvParams, ConvArgs) = nullptr;
  void (*tma_lean)(ConvParams, ConvArgs, TmaMaps) = nullptr;
  void (*head)(ConvParams, ConvArgs) = nullptr;
  void (*staged)(ConvParams, ConvArgs) = nullptr;
  // warp_halo's kernel: conv_warp_halo_kernel, conv_warp_halo_s2_kernel (warp_halo_s2_fits) or conv_warp_pw_kernel
  // (warp_pw_fits, over warp_c input channels).
  WarpKind warp_kind = kWarpHalo;
  int warp_c = 0;
};

// A translation unit's share of the configurations, in the order they are numbered (conv_igemm.cu concatenates).
struct ConfigList {
  const Config* data;
  int size;
};
ConfigList conv_configs_igemm();  // mma.sync (fp16, INT8, persistent) and the block stems
ConfigList conv_configs_halo();   // conv_warp_halo_kernel's
ConfigList conv_configs_wgmma();  // sm_90a warpgroup MMA
ConfigList conv_configs_tma();    // sm_90a TMA + wgmma

}  // namespace qd::cuda
