// Convolution configurations: the sm_90a TMA + warpgroup-MMA kernels.
// Their kernels are instantiated in a translation unit apart from the other kinds' so that they compile in parallel;
// conv_igemm.cu numbers all units' entries in one list (plans and timing caches record a choice by its name).
#include "backends/cuda/kernels/conv_igemm_kernels.cuh"

namespace qd::cuda {
namespace {

// ---- Warp-specialized INT8 implicit GEMM with the tensor memory accelerator (sm_90a) ----
// The cp.async kernels issue each K tile's loads from every thread (address arithmetic and bounds checks for each
// 16-byte copy, then a block barrier): in the deep 3x3 layers 79 of ~130 instructions per warp and K tile (Nsight
// Compute), yet without them these layers run only 0-20% faster: those instructions are not what bounds them. Here one thread of a producer warp issues a whole K tile as two TMA copies:
// the A tile through an im2col tensor map (BM consecutive output pixels, one filter tap, kRow channels each; the
// hardware walks the pixels across rows and images, applies the stride, and fills the padding with zeros) and the B
// tile through a tiled map of the weights, into kStages stages in the wgmma swizzle. mbarriers hand the stages over:
// `full` (the copies' bytes arrived) and `empty` (every consumer warp's MMAs on it completed). Two consumer warpgroups
// run wgmma on their 64 rows and then the usual register epilogue. For layers whose channels are whole multiples of
// kRow (each K tile one tap), unsplit.
// (TmaMaps, kTmaBM and tma_fits: in conv_igemm_kernels.cuh, which the launcher reads too.)

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
#if QD_WGMMA_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if QD_WGMMA_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
#if QD_WGMMA_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// Waits until the barrier's phase `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// One im2col column into `dst`: the map's pixels from window corner (w, h) of image n on, channels from c, each
// pixel shifted by the tap (dw, dh).
__device__ __forceinline__ void tma_im2col(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c, int w, int h,
                                           int n, uint16_t dw, uint16_t dh) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c), "r"(w), "r"(h), "r"(n), "h"(dw), "h"(dh)
      : "memory");
#endif
}
__device__ __forceinline__ void tma_tile2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int x, int y) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(x), "r"(y)
      : "memory");
#endif
}


// What the TMA kernels share. Their mbarriers (thread 0; `full` completes on a stage's bytes, `empty` on every
// consumer warp's release), before any thread waits on them.
template <int kStages>
__device__ __forceinline__ void tma_init_barriers(uint32_t full0, uint32_t empty0) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, kTmaConsumers / 32);
    }
#if QD_WGMMA_DEVICE
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
  }
  __syncthreads();
}

// One thread's walk over the K tiles: each K tile (filter row tr, column ts, channel block cb) copied into its stage
// as the input's im2col box (kTmaBM output pixels from block_m, one tap) and the weights' tile, on the stage's `full`
// barrier.
template <int BN, int kStages, int kRow>
struct TmaCopier {
  static constexpr int kABytes = kTmaBM * kRow, kStageBytes = tma_stage_bytes(BN, kRow);
  int next = 0, tr = 0, ts = 0, cb = 0, n0 = 0, w0 = 0, h0 = 0;
  // The M tile's first output pixel: image n0, its window's top-left input corner (w0, h0).
  __device__ __forceinline__ void start(const ConvParams& p, int block_m) {
    const int hw = p.OH * p.OW, pix = block_m - (block_m / hw) * hw, oh = pix / p.OW, ow = pix - oh * p.OW;
    n0 = block_m / hw;
    w0 = ow * p.stride_w - p.pad_w;
    h0 = oh * p.stride_h - p.pad_h;
  }
  // K tile `next` into its stage, then on to the one after.
  __device__ __forceinline__ void copy(const ConvParams& p, const TmaMaps& maps, uint32_t base, uint32_t full0,
                                       int block_n) {
    const int s = next % kStages;
    const uint32_t bar = full0 + 8 * s, dst = base + s * kStageBytes;
    mbar_expect_tx(bar, kStageBytes);
    tma_im2col(dst, &maps.a, bar, cb * kRow, w0, h0, n0, static_cast<uint16_t>(ts * p.dil_w),
               static_cast<uint16_t>(tr * p.dil_h));
    tma_tile2d(dst + kABytes, &maps.b, bar, next * kRow, block_n);
    ++next;
    if (++cb == p.C / kRow) {
      cb = 0;
      if (++ts == p.S) {
        ts = 0;
        ++tr;
      }
    }
  }
};

// A consumer warp's MMAs of K tile kt, once its stage is full (da0, db0: the stage 0 descriptors of its A rows and
// of B); returns with the MMAs of K tile kt - 1 done.
template <int BN, int kStages, int kRow>
__device__ __forceinline__ void tma_mma_tile(int (&acc)[1][BN / 8][4], uint32_t full0, uint64_t da0, uint64_t db0,
                                             int kt) {
  const int s = kt % kStages;
  mbar_wait(full0 + 8 * s, (kt / kStages) & 1);
  const uint64_t off = static_cast<uint32_t>(s * tma_stage_bytes(BN, kRow)) >> 4;
  wgmma_fence_acc(acc);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kRow / 32; ++kk) wgmma_async<BN, true>(acc, da0 + off + 2 * kk, db0 + off + 2 * kk);
  wgmma_commit();
  wgmma_fence_acc(acc);
  wgmma_wait<1>();
}

// kMinBlocks: the blocks per SM the register budget is set for: 2 (overlapping one block's epilogue with the
// other's MMAs) or 1 (no register cap short of the accumulators' needs; Nsight Compute saw a looping variant of this
// kernel with an N tile of 128 capped at 96 registers spill, the DRAM traffic of a deep 3x3 layer seven times its
// input's).
template <int BN, int kStages, int kRow, int kMinBlocks, bool kLean = false>
__global__ void __launch_bounds__(kTmaThreads, kMinBlocks)
    conv_tma_kernel(const ConvParams p, const ConvArgs a, const __grid_constant__ TmaMaps maps) {
  constexpr int BM = kTmaBM, kABytes = BM * kRow;
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t base = smem_addr(smem);
  const uint32_t full0 = base + kStages * tma_stage_bytes(BN, kRow), empty0 = full0 + 8 * kStages;  // mbarriers
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int M = p.N * p.OH * p.OW, block_m = blockIdx.x * BM, block_n = blockIdx.y * BN;
  const int ktiles = p.R * p.S * (p.C / kRow);
  tma_init_barriers<kStages>(full0, empty0);
  pdl_wait();
  if (warp == kTmaConsumers / 32) {  // the producer
    if (lane != 0) return;
    TmaCopier<BN, kStages, kRow> copier;
    copier.start(p, block_m);
    for (int kt = 0; kt < ktiles; ++kt) {
      if (kt >= kStages) mbar_wait(empty0 + 8 * (kt % kStages), (kt / kStages - 1) & 1);
      copier.copy(p, maps, base, full0, block_n);
    }
    return;
  }
  int acc[1][BN / 8][4];  // from kAccBias in the lean copy (kAccBiased)
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[0][j][e] = kLean ? kAccBias : 0;
  const uint64_t da0 = wgmma_desc<kRow>(base + (warp >> 2) * 64 * kRow), db0 = wgmma_desc<kRow>(base + kABytes);
  for (int kt = 0; kt < ktiles; ++kt) {
    tma_mma_tile<BN, kStages, kRow>(acc, full0, da0, db0, kt);  // then K tile kt - 1's stage goes to the producer
    if (kt > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((kt - 1) % kStages));
  }
  wgmma_wait<0>();
  wgmma_fence_acc(acc);
  pdl_trigger();
  if constexpr (kLean) {
    lean_epilogue<16, BN>(p, a, M, block_m, block_n, warp, 0, lane, acc);
  } else {
    igemm_epilogue<BM, BN, 16, BN, true>(p, a, M, block_m, block_n, warp, 0, lane, acc);
  }
}

// conv_tma_kernel without the producer warp: thread 0 issues the TMA copies itself, the first kStages K tiles before
// the loop, then each stage again once every warp has released it (its `empty` barrier, which it waits on one K tile
// after the consumers' own release). A block of 256 threads rather than 288: __launch_bounds__(288, 2) leaves 96
// registers (ptxas budgets a block of 9 warps as 10), where the 128 x 128 tile's epilogue spills (308 bytes per
// thread); 256 threads get 128. The warp index is broadcast from lane 0 so that the compiler keeps the descriptors'
// arithmetic uniform.
template <int BN, int kStages, int kRow, int kMinBlocks, bool kLean = false>
__global__ void __launch_bounds__(kTmaConsumers, kMinBlocks)
    conv_tma_ip_kernel(const ConvParams p, const ConvArgs a, const __grid_constant__ TmaMaps maps) {
  constexpr int BM = kTmaBM, kABytes = BM * kRow;
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t base = smem_addr(smem);
  const uint32_t full0 = base + kStages * tma_stage_bytes(BN, kRow), empty0 = full0 + 8 * kStages;  // mbarriers
  const int tid = threadIdx.x, warp = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;
  const int M = p.N * p.OH * p.OW, block_m = blockIdx.x * BM, block_n = blockIdx.y * BN;
  const int ktiles = p.R * p.S * (p.C / kRow);
  tma_init_barriers<kStages>(full0, empty0);
  pdl_wait();
  TmaCopier<BN, kStages, kRow> copier;  // thread 0's
  if (tid == 0) {
    copier.start(p, block_m);
    while (copier.next < ktiles && copier.next < kStages) copier.copy(p, maps, base, full0, block_n);
  }
  int acc[1][BN / 8][4];  // from kAccBias in the lean copy (kAccBiased)
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[0][j][e] = kLean ? kAccBias : 0;
  const uint64_t da0 = wgmma_desc<kRow>(base + (warp >> 2) * 64 * kRow), db0 = wgmma_desc<kRow>(base + kABytes);
  for (int kt = 0; kt < ktiles; ++kt) {
    tma_mma_tile<BN, kStages, kRow>(acc, full0, da0, db0, kt);  // K tile kt - 1's MMAs are done: its stage is free
    if (kt > 0) {
      const int freed = (kt - 1) % kStages;
      if (lane == 0) mbar_arrive(empty0 + 8 * freed);
      if (tid == 0 && copier.next < ktiles) {  // K tile kt - 1 + kStages into the stage every warp has released
        mbar_wait(empty0 + 8 * freed, ((kt - 1) / kStages) & 1);
        copier.copy(p, maps, base, full0, block_n);
      }
    }
  }
  wgmma_wait<0>();
  wgmma_fence_acc(acc);
  pdl_trigger();
  if constexpr (kLean) {
    lean_epilogue<16, BN>(p, a, M, block_m, block_n, warp, 0, lane, acc);
  } else {
    igemm_epilogue<BM, BN, 16, BN, true>(p, a, M, block_m, block_n, warp, 0, lane, acc);
  }
}

// The TMA configurations: two consumer warpgroups and a producer warp.
#define QD_TMA_CONFIG(BN, S, ROW, MIN_BLOCKS, NAME)                                                        \
  {NAME, kTmaBM, BN, kTmaThreads, S, nullptr, true, false, false, true, ROW, InFormat::kNhwc, false, false, \
   conv_tma_kernel<BN, S, ROW, MIN_BLOCKS>, nullptr, conv_tma_kernel<BN, S, ROW, MIN_BLOCKS, true>}

// conv_tma_ip_kernel's: two consumer warpgroups, thread 0 issuing the copies.
#define QD_TMA_IP_CONFIG(BN, S, ROW, MIN_BLOCKS, NAME)                                                        \
  {NAME, kTmaBM, BN, kTmaConsumers, S, nullptr, true, false, false, true, ROW, InFormat::kNhwc, false, false, \
   conv_tma_ip_kernel<BN, S, ROW, MIN_BLOCKS>, nullptr, conv_tma_ip_kernel<BN, S, ROW, MIN_BLOCKS, true>}

// name: block tile x warp tile, pipeline stages. Timing picks per layer.
const Config kConfigs[] = {
    QD_TMA_CONFIG(128, 3, 128, 2, "tma_i8_128x128_k128_s3"),
    QD_TMA_CONFIG(64, 4, 128, 2, "tma_i8_128x64_k128_s4"),
    QD_TMA_CONFIG(128, 4, 64, 2, "tma_i8_128x128_k64_s4"),
    QD_TMA_CONFIG(64, 6, 64, 2, "tma_i8_128x64_k64_s6"),
    QD_TMA_CONFIG(128, 6, 128, 1, "tma_i8_128x128_k128_s6_b1"),
    QD_TMA_IP_CONFIG(128, 3, 128, 2, "tma_ip_i8_128x128_k128_s3"),
    QD_TMA_IP_CONFIG(128, 4, 64, 2, "tma_ip_i8_128x128_k64_s4"),
    QD_TMA_IP_CONFIG(64, 4, 128, 2, "tma_ip_i8_128x64_k128_s4"),
    // Thin tiles capped for 3 blocks per SM (80 registers, no spills; at 4, 64 registers, the lean copy spills): more
    // warps to overlap one block's epilogue with the others' loads and MMAs (YOLOv5s's 64-channel 3x3 bottleneck
    // convs at 80 x 80 take the first).
    QD_TMA_IP_CONFIG(64, 4, 64, 3, "tma_ip_i8_128x64_k64_s4_b3"),
    QD_TMA_IP_CONFIG(64, 3, 128, 3, "tma_ip_i8_128x64_k128_s3_b3"),
};

}  // namespace

ConfigList conv_configs_tma() { return {kConfigs, static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]))}; }

}  // namespace qd::cuda
