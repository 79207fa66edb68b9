// Convolution configurations: the sm_90a warpgroup-MMA kernels.
// Their kernels are instantiated in a translation unit apart from the other kinds' so that they compile in parallel;
// conv_igemm.cu numbers all units' entries in one list (plans and timing caches record a choice by its name).
#include "backends/cuda/kernels/conv_igemm_kernels.cuh"

namespace qd::cuda {
namespace {

// The wgmma configurations: BM / 64 warpgroups of 128 threads.
#define QD_WG_CONFIG(BM, BN, S, I8, ROW, NAME)                                                                    \
  {NAME, BM, BN, 2 * BM, S, conv_igemm_kernel<BM, BN, 16, BN, S, I8, false, true, ROW>, I8, false, false, true, ROW, \
   InFormat::kNhwc, false, false, nullptr, lean_kernel<BM, BN, 16, BN, S, I8, true, ROW>(), nullptr,               \
   staged_kernel<kEpiHead, BM, BN, 16, BN, S, I8, true, ROW>(),                                                     \
   staged_kernel<kEpiStaged, BM, BN, 16, BN, S, I8, true, ROW>()}

// name: block tile x warp tile, pipeline stages. Timing picks per layer.
const Config kConfigs[] = {
    // Hopper's warpgroup MMA (sm_90a).
    QD_WG_CONFIG(128, 256, 4, false, 64, "wgmma_f16_128x256_s4"),
    QD_WG_CONFIG(128, 128, 4, false, 64, "wgmma_f16_128x128_s4"),
    QD_WG_CONFIG(128, 64, 4, false, 64, "wgmma_f16_128x64_s4"),
    QD_WG_CONFIG(64, 128, 4, false, 64, "wgmma_f16_64x128_s4"),
    QD_WG_CONFIG(64, 64, 4, false, 64, "wgmma_f16_64x64_s4"),
    QD_WG_CONFIG(64, 32, 4, false, 64, "wgmma_f16_64x32_s4"),
    QD_WG_CONFIG(128, 128, 4, true, 64, "wgmma_i8_128x128_s4"),
    QD_WG_CONFIG(128, 64, 4, true, 64, "wgmma_i8_128x64_s4"),
    QD_WG_CONFIG(64, 128, 4, true, 64, "wgmma_i8_64x128_s4"),
    QD_WG_CONFIG(64, 64, 4, true, 64, "wgmma_i8_64x64_s4"),
    QD_WG_CONFIG(64, 32, 4, true, 64, "wgmma_i8_64x32_s4"),
    // Three stages (one tile loading while one multiplies): more blocks per SM for thin layers of one or two K tiles.
    QD_WG_CONFIG(128, 64, 3, false, 64, "wgmma_f16_128x64_s3"),
    QD_WG_CONFIG(64, 64, 3, false, 64, "wgmma_f16_64x64_s3"),
    QD_WG_CONFIG(128, 64, 3, true, 64, "wgmma_i8_128x64_s3"),
    QD_WG_CONFIG(64, 64, 3, true, 64, "wgmma_i8_64x64_s3"),
    // 128-byte rows: half the pipeline steps (barriers, address arithmetic) per MAC.
    QD_WG_CONFIG(128, 256, 4, false, 128, "wgmma_f16_128x256_k64_s4"),
    QD_WG_CONFIG(128, 128, 4, false, 128, "wgmma_f16_128x128_k64_s4"),
    QD_WG_CONFIG(128, 64, 4, false, 128, "wgmma_f16_128x64_k64_s4"),
    QD_WG_CONFIG(64, 128, 4, false, 128, "wgmma_f16_64x128_k64_s4"),
    QD_WG_CONFIG(64, 64, 4, false, 128, "wgmma_f16_64x64_k64_s4"),
    QD_WG_CONFIG(128, 128, 4, true, 128, "wgmma_i8_128x128_k128_s4"),
    QD_WG_CONFIG(128, 64, 4, true, 128, "wgmma_i8_128x64_k128_s4"),
    QD_WG_CONFIG(64, 128, 4, true, 128, "wgmma_i8_64x128_k128_s4"),
    QD_WG_CONFIG(64, 64, 4, true, 128, "wgmma_i8_64x64_k128_s4"),
};

}  // namespace

ConfigList conv_configs_wgmma() { return {kConfigs, static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]))}; }

}  // namespace qd::cuda
