// Convolution configurations: mma.sync kernels (fp16, INT8, persistent) and the block stems.
// Their kernels are instantiated in a translation unit apart from the other kinds' so that they compile in parallel;
// conv_igemm.cu numbers all units' entries in one list (plans and timing caches record a choice by its name).
#include "backends/cuda/kernels/conv_igemm_kernels.cuh"

namespace qd::cuda {
namespace {

// The stem on its space-to-depth input (3x3, stride 1, pad 1, 16 input channels, up to 32 outputs; the output width a
// multiple of 64), where a pass made that input (conv_warp_halo_kernel reads YOLOv5's image itself): a block computes 64 consecutive output pixels, all output channels, of a run of consecutive rows
// (rows blockIdx.y * rows_per_block, ...; rows_per_block from the grid), sweeping down the image. The input rows
// (66 pixels with the halo) go through a ring of 8 in shared memory, each loaded once by cp.async five output rows
// ahead of its first use, and the weights once per block; the tensor-core fragments of each of the 9 taps are read
// from there. (A ring of 4, one row ahead, was as fast: per row the block waits on its barriers and on nine
// dependent MMAs per accumulator more than on its loads; Nsight Compute: SM 40%, DRAM 17% of peak at batch 32.)
// The implicit GEMM's im2col gather reads every input pixel 9 times through L2 (Nsight Compute: 70% of L2
// throughput, 8% of DRAM's); one block per output row read 3 input rows and 9 KiB of weights for 2,048 outputs, which
// left it bound by its set-up. The implicit GEMM's epilogue. kI8: m16n8k32 on two taps per step (a zero tenth), else
// m16n8k16 on one.
template <bool kI8>
__global__ void __launch_bounds__(128) conv_stem_halo_kernel(const ConvParams p, const ConvArgs a) {
  using Acc = std::conditional_t<kI8, int, float>;
  constexpr int kBM = 64, kBN = 32, kC = 16, kElem = kI8 ? 1 : 2;
  constexpr int kPixBytes = kC * kElem;       // one pixel's channels, one tap of a weight row
  constexpr int kPix = kBM + 2;               // pixels in a halo row
  constexpr int kRowBytes = kPix * kPixBytes;
  constexpr int kRing = 8;                    // input rows in shared memory: the three read, five loading
  constexpr int kTaps = kI8 ? 10 : 9;         // per weight row in shared memory (int8: a zero tenth)
  constexpr int kWRow = kTaps * kPixBytes;
  constexpr int kZero = kRing * kRowBytes;    // a zero pixel after the ring (int8's tenth tap)
  __shared__ __align__(16) unsigned char xs[kZero + 16];
  __shared__ __align__(16) unsigned char ws[kBN * kWRow];
  __shared__ __align__(16) float tile[kBM * kBN];  // tile_epilogue's
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ow0 = blockIdx.x * kBM, n = blockIdx.z;
  const int rows = (p.OH + gridDim.y - 1) / gridDim.y;
  const int oh0 = blockIdx.y * rows, oh1 = min(p.OH, oh0 + rows);
  // The weights are constants: loaded before waiting for the kernel that writes the input.
  for (int i = tid; i < kBN * kWRow / 16; i += 128) {
    const int k = i / (kWRow / 16), off = i % (kWRow / 16) * 16;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (k < p.K && off < 9 * kPixBytes) {
      v = *reinterpret_cast<const uint4*>(static_cast<const char*>(a.w) + static_cast<int64_t>(k) * p.Kp * kElem + off);
    }
    *reinterpret_cast<uint4*>(ws + k * kWRow + off) = v;
  }
  if (tid == 0) *reinterpret_cast<uint4*>(xs + kZero) = make_uint4(0, 0, 0, 0);
  // Input row ih (zeros outside the image) into its ring slot where `needed`, one commit group either way.
  const auto load_row = [&](int ih, bool needed) {
    const uint32_t slot = smem_addr(xs + (ih & (kRing - 1)) * kRowBytes);
    for (int i = tid; needed && i < kRowBytes / 16; i += 128) {
      const int px = i / (kPixBytes / 16), chunk = i % (kPixBytes / 16);
      const int iw = ow0 - 1 + px;
      const bool ok = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
      const char* src = static_cast<const char*>(a.x) +
                        (ok ? ((static_cast<int64_t>(n) * p.H + ih) * p.W + iw) * p.in_ld * kElem + chunk * 16 : 0);
      cp_async16(slot + i * 16, src, ok ? 16 : 0);
    }
    cp_async_commit();
  };
  pdl_wait();
#pragma unroll
  for (int r = -1; r <= kRing - 3; ++r) load_row(oh0 + r, oh0 + r <= oh1);  // the strip's rows reach oh1

  // ldmatrix.x4 addressing: A's four 8x8 matrices are (rows 0-7 | 8-15) x (first | second k half), B's (n-tile j |
  // j + 1) x (first | second k half); for int8 a k half is one tap.
  const int a_row = warp * 16 + (lane & 7) + (lane >> 3 & 1) * 8, a_half = lane >> 4;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_half = lane >> 3 & 1;
  const Staging st = staging(p, a);
  for (int oh = oh0; oh < oh1; ++oh) {
    __syncthreads();  // every warp is done with the slot the next load refills (row oh - 2's)
    load_row(oh + kRing - 2, oh + kRing - 2 <= oh1);
    cp_async_wait<kRing - 3>();  // rows oh - 1 .. oh + 1; the later ones may be in flight
    __syncthreads();
    const auto pixel = [&](int tap) {  // this lane's A row for `tap`: its input pixel in the ring
      if (tap >= 9) return smem_addr(xs + kZero);
      return smem_addr(xs + ((oh - 1 + tap / 3) & (kRing - 1)) * kRowBytes + (a_row + tap % 3) * kPixBytes);
    };
    Acc acc[1][4][4] = {};
    constexpr int kSteps = kI8 ? 5 : 9;
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      uint32_t af[4];
      if constexpr (kI8) {
        ldmatrix_x4(pixel(2 * step + a_half), af[0], af[1], af[2], af[3]);
      } else {
        ldmatrix_x4(pixel(step) + a_half * 16, af[0], af[1], af[2], af[3]);
      }
#pragma unroll
      for (int jp = 0; jp < 2; ++jp) {
        uint32_t b[4];
        const int off = kI8 ? (2 * step + b_half) * kPixBytes : step * kPixBytes + b_half * 16;
        ldmatrix_x4(smem_addr(ws + (jp * 16 + b_row) * kWRow + off), b[0], b[1], b[2], b[3]);
        if constexpr (kI8) {
          mma_16832_s8(acc[0][2 * jp], af, b[0], b[1]);
          mma_16832_s8(acc[0][2 * jp + 1], af, b[2], b[3]);
        } else {
          mma_16816(acc[0][2 * jp], af, b[0], b[1]);
          mma_16816(acc[0][2 * jp + 1], af, b[2], b[3]);
        }
      }
    }
    if (oh + 1 == oh1) pdl_trigger();
    tile_epilogue<kBM, kBN, 16, 32, 128, kI8>(p, a, st, p.N * p.OH * p.OW, (n * p.OH + oh) * p.OW + ow0, 0, warp, 0,
                                              lane, acc, tile);
  }
}

// The INT8 mma.sync configurations (not persistent).
#define QD_I8_CONFIG(BM, BN, WM, WN, S, NAME)                                                                  \
  {NAME, BM, BN, (BM / WM) * (BN / WN) * 32, S, conv_igemm_kernel<BM, BN, WM, WN, S, true, false>, true, false, \
   false, false, 64, InFormat::kNhwc, false, false, nullptr, lean_kernel<BM, BN, WM, WN, S, true, false, 64>(),   \
   nullptr, staged_kernel<kEpiHead, BM, BN, WM, WN, S, true, false, 64>(),                                         \
   staged_kernel<kEpiStaged, BM, BN, WM, WN, S, true, false, 64>()}

// name: block tile x warp tile, pipeline stages. Timing picks per layer.
const Config kConfigs[] = {
    {"igemm_f16_128x128_w64x32_s3", 128, 128, 256, 3, conv_igemm_kernel<128, 128, 64, 32, 3, false, false>, false, false},
    {"igemm_f16_128x64_w64x32_s3", 128, 64, 128, 3, conv_igemm_kernel<128, 64, 64, 32, 3, false, false>, false, false},
    {"igemm_f16_64x128_w32x64_s3", 64, 128, 128, 3, conv_igemm_kernel<64, 128, 32, 64, 3, false, false>, false, false},
    {"igemm_f16_64x64_w32x32_s3", 64, 64, 128, 3, conv_igemm_kernel<64, 64, 32, 32, 3, false, false>, false, false},
    {"igemm_f16_32x64_w32x16_s3", 32, 64, 128, 3, conv_igemm_kernel<32, 64, 32, 16, 3, false, false>, false, false},
    // Narrow N tiles for layers with few output channels (32 in YOLO stems and C3 inner convs).
    {"igemm_f16_128x32_w32x32_s3", 128, 32, 128, 3, conv_igemm_kernel<128, 32, 32, 32, 3, false, false>, false, false},
    {"igemm_f16_64x32_w32x32_s3", 64, 32, 64, 3, conv_igemm_kernel<64, 32, 32, 32, 3, false, false>, false, false},
    {"igemm_f16_256x64_w64x32_s3", 256, 64, 256, 3, conv_igemm_kernel<256, 64, 64, 32, 3, false, false>, false, false},
    {"igemm_f16_128x256_w64x64_s3", 128, 256, 256, 3, conv_igemm_kernel<128, 256, 64, 64, 3, false, false>, false, false},
    // Deeper pipelines for the large layers (more loads in flight per SM).
    {"igemm_f16_128x128_w64x32_s4", 128, 128, 256, 4, conv_igemm_kernel<128, 128, 64, 32, 4, false, false>, false, false},
    {"igemm_f16_128x64_w64x32_s4", 128, 64, 128, 4, conv_igemm_kernel<128, 64, 64, 32, 4, false, false>, false, false},
    {"igemm_f16_64x128_w32x64_s4", 64, 128, 128, 4, conv_igemm_kernel<64, 128, 32, 64, 4, false, false>, false, false},
    {"igemm_f16_128x256_w64x64_s4", 128, 256, 256, 4, conv_igemm_kernel<128, 256, 64, 64, 4, false, false>, false, false},
    // INT8 (tensor cores, int32 accumulation), fused per-channel rescale.
    QD_I8_CONFIG(128, 128, 64, 32, 3, "igemm_i8_128x128_w64x32_s3"),
    QD_I8_CONFIG(128, 64, 64, 32, 4, "igemm_i8_128x64_w64x32_s4"),
    QD_I8_CONFIG(64, 64, 32, 32, 3, "igemm_i8_64x64_w32x32_s3"),
    QD_I8_CONFIG(128, 32, 32, 32, 3, "igemm_i8_128x32_w32x32_s3"),
    // Small tiles for batch-1 layers (more blocks on the SMs), and the wide / deep ones the fp16 side has.
    QD_I8_CONFIG(32, 64, 32, 16, 3, "igemm_i8_32x64_w32x16_s3"),
    QD_I8_CONFIG(64, 32, 32, 32, 3, "igemm_i8_64x32_w32x32_s3"),
    QD_I8_CONFIG(64, 128, 32, 64, 3, "igemm_i8_64x128_w32x64_s3"),
    QD_I8_CONFIG(128, 128, 64, 32, 4, "igemm_i8_128x128_w64x32_s4"),
    // Persistent (blocks loop over M tiles, a grid of one wave), for thin layers with few K steps.
    {"igemm_f16_128x32_w32x32_s3_persist", 128, 32, 128, 3, conv_igemm_kernel<128, 32, 32, 32, 3, false, true>, false, true},
    {"igemm_f16_64x64_w32x32_s3_persist", 64, 64, 128, 3, conv_igemm_kernel<64, 64, 32, 32, 3, false, true>, false, true},
    {"igemm_f16_64x32_w32x32_s3_persist", 64, 32, 64, 3, conv_igemm_kernel<64, 32, 32, 32, 3, false, true>, false, true},
    {"igemm_f16_128x64_w64x32_s3_persist", 128, 64, 128, 3, conv_igemm_kernel<128, 64, 64, 32, 3, false, true>, false, true},
    {"igemm_i8_128x32_w32x32_s3_persist", 128, 32, 128, 3, conv_igemm_kernel<128, 32, 32, 32, 3, true, true>, true, true},
    {"igemm_i8_64x64_w32x32_s3_persist", 64, 64, 128, 3, conv_igemm_kernel<64, 64, 32, 32, 3, true, true>, true, true},
    {"igemm_i8_64x32_w32x32_s3_persist", 64, 32, 64, 3, conv_igemm_kernel<64, 32, 32, 32, 3, true, true>, true, true},
    {"igemm_i8_128x64_w64x32_s4_persist", 128, 64, 128, 4, conv_igemm_kernel<128, 64, 64, 32, 4, true, true>, true, true},
    // The space-to-depth stem with its input rows in shared memory.
    {"stem_halo_f16", 64, 32, 128, 0, conv_stem_halo_kernel<false>, false, false, true},
    {"stem_halo_i8", 64, 32, 128, 0, conv_stem_halo_kernel<true>, true, false, true},
};

}  // namespace

ConfigList conv_configs_igemm() { return {kConfigs, static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]))}; }

}  // namespace qd::cuda
