// The implicit-GEMM convolutions' launcher: the configurations (conv_configs_*.cu) numbered in one list, which fit
// a layer, and the launch of the one timing picked, with its kernel copy, grid and tensor maps. The kernels are in
// conv_igemm_kernels.cuh.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernel_arch.h"
#include "backends/cuda/kernels/conv_igemm_kernels.cuh"

namespace qd::cuda {

const char* act_name(Act a) {
  switch (a) {
    case Act::kNone: return "none";
    case Act::kRelu: return "relu";
    case Act::kSilu: return "silu";
    case Act::kSigmoid: return "sigmoid";
    case Act::kLeakyRelu: return "leaky_relu";
    case Act::kHardSwish: return "hard_swish";
    case Act::kHardSigmoid: return "hard_sigmoid";
    case Act::kClip: return "clip";
    case Act::kGelu: return "gelu";
  }
  return "?";
}

namespace {

// Split-K second pass: one thread per output element sums the partials and runs the epilogue (INT8: the int32 sum
// is the accumulator, then the main kernel's epilogue arithmetic).
template <bool kI8>
__global__ void conv_splitk_epilogue(const ConvParams p, const ConvArgs a, int64_t total) {
  using Acc = std::conditional_t<kI8, int, float>;
  const Acc* ws = reinterpret_cast<const Acc*>(a.workspace);
  const SiluTies ties(p, a);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % p.K);
    const int m = static_cast<int>(i / p.K);
    Acc sum = 0;
    for (int z = 0; z < p.splits; ++z) sum += ws[z * total + i];
    float x;
    if constexpr (kI8) {
      x = __fadd_rn(__fmul_rn(static_cast<float>(sum), a.alpha[k]), a.bias[k]);
    } else {
      x = sum + a.bias[k];
    }
    const float f = ties.act<!kI8>(p, x);
    float v = f;
    if (has_residual(a)) v += residual_value<kI8>(p, a, m, k);
    if constexpr (kI8) v = exact_silu_near_tie(p, a, ties, m, k, x, f, v);
    store_out<kI8>(p, a, m, k, v);
  }
}

// The epilogue over a convolution computed elsewhere (cuDNN, fp16 convs only): acc is [M][K] fp16. One thread per 8
// channels of a pixel, with 16-byte loads and stores where the layout allows.
__global__ void conv_epilogue_kernel(const ConvParams p, const ConvArgs a, const __half* acc, int64_t groups,
                                     bool vec_in, bool vec_out) {
  const int kg = (p.K + 7) / 8;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int m = static_cast<int>(g / kg), k0 = static_cast<int>(g - static_cast<int64_t>(m) * kg) * 8;
    const __half* src = acc + static_cast<int64_t>(m) * p.K + k0;
    float v[8];
    if (vec_in) {
      const uint4 raw = *reinterpret_cast<const uint4*>(src);
      const __half2* h2 = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(h2[j]);
        v[2 * j] = f.x;
        v[2 * j + 1] = f.y;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = k0 + j < p.K ? __half2float(src[j]) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (k0 + j >= p.K) break;
      v[j] = apply_act(v[j] + a.bias[k0 + j], p.act, p.act_a, p.act_b);
      if (a.residual) v[j] += __half2float(a.residual[static_cast<int64_t>(m) * p.res_ld + k0 + j]);
    }
    if (vec_out) {
      uint4 raw;
      __half2* h2 = reinterpret_cast<__half2*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; ++j) h2[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
      *reinterpret_cast<uint4*>(static_cast<__half*>(a.y) + static_cast<int64_t>(m) * p.out_ld + p.out_coff + k0) = raw;
      continue;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (k0 + j < p.K) store_out<false>(p, a, m, k0 + j, v[j]);
    }
  }
}

// The driver's tensor-map encoders (through the runtime: no link to libcuda), looked up once.
PFN_cuTensorMapEncodeIm2col_v12000 g_encode_im2col = nullptr;
PFN_cuTensorMapEncodeTiled_v12000 g_encode_tiled = nullptr;

// conv_tma_kernel's tensor maps for p and a: the input as a 4-D im2col map (C, W, H, N; pixels in_ld bytes apart) read
// in columns of kTmaBM pixels x `row` channels, the weights as a 2-D map (Kp, K) read in `row` x bn boxes.
Status encode_tma_maps(const ConvParams& p, const ConvArgs& a, int bn, int row, TmaMaps* maps) {
  if (!g_encode_im2col || !g_encode_tiled) return internal("conv_tma: no tensor-map encoder in this driver");
  if (!aligned(a.x, 16) || !aligned(a.w, 16)) return internal("conv_tma: input or weights not 16-byte aligned");
  const CUtensorMapSwizzle swizzle = row == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.C), static_cast<cuuint64_t>(p.W),
                              static_cast<cuuint64_t>(p.H), static_cast<cuuint64_t>(p.N)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(p.in_ld), static_cast<cuuint64_t>(p.in_ld) * p.W,
                                 static_cast<cuuint64_t>(p.in_ld) * p.W * p.H};
  const TmaCorners corners(p);
  const cuuint32_t estrides[4] = {1, static_cast<cuuint32_t>(p.stride_w), static_cast<cuuint32_t>(p.stride_h), 1};
  CUresult r = g_encode_im2col(&maps->a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<void*>(a.x), dims, strides,
                               corners.lower, corners.upper, static_cast<cuuint32_t>(row), kTmaBM, estrides,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return internal("conv_tma: cuTensorMapEncodeIm2col failed (" + std::to_string(r) + ")");
  const cuuint64_t wdims[2] = {static_cast<cuuint64_t>(p.Kp), static_cast<cuuint64_t>(p.K)};
  const cuuint64_t wstrides[1] = {static_cast<cuuint64_t>(p.Kp)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(row), static_cast<cuuint32_t>(bn)}, ones[2] = {1, 1};
  r = g_encode_tiled(&maps->b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(a.w), wdims, wstrides, box, ones,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return internal("conv_tma: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return Status::ok();
}

// The dynamic shared memory a configuration's kernel takes.
int config_smem(const Config& c) {
  if (c.tma) return c.stages * (tma_stage_bytes(c.bn, c.row) + 16);  // the stages, then two mbarriers per stage
  if (c.warp_kind == kWarpHaloS2) return WarpHaloS2Layout::bytes();
  if (c.warp_kind == kWarpPw) return WarpPwLayout(c.warp_c, c.bn).bytes();
  return c.warp_halo ? WarpHaloLayout(c.int8, c.in != InFormat::kNhwc).bytes() : c.stages * (c.bm + c.bn) * c.row;
}

// Every configuration, numbered in this order.
const std::vector<Config>& all_configs() {
  static const std::vector<Config> all = [] {
    std::vector<Config> v;
    for (const ConfigList l : {conv_configs_igemm(), conv_configs_halo(), conv_configs_wgmma(), conv_configs_tma()}) {
      v.insert(v.end(), l.data, l.data + l.size);
    }
    return v;
  }();
  return all;
}
int num_configs() { return static_cast<int>(all_configs().size()); }
// Resident blocks per SM (conv_igemm_init), for the persistent grids.
std::vector<int> g_blocks_per_sm(num_configs(), 1);
// The device runs the configuration (conv_igemm_init, kernel_arch.h); all of them until it has asked the device, as
// for the host-side checks of the tests without a GPU.
std::vector<char> g_runs(num_configs(), 1);
int64_t g_sms = 1;                      // the device's SMs (conv_igemm_init)
bool g_wgmma = false;                   // the wgmma configurations can run (conv_igemm_init)
bool g_tma = false;                     // the TMA configurations can run: wgmma and the encoders

// What this binary's code for the device has, written by the code the device runs: bit 0 wgmma (sm_90a), bit 1
// griddepcontrol (sm_90+, pdl.cuh).
__global__ void arch_probe_kernel(int* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  *out = QD_WGMMA_DEVICE | 2;
#else
  *out = QD_WGMMA_DEVICE;
#endif
}

}  // namespace

int conv_igemm_configs() { return num_configs(); }
bool conv_igemm_config_int8(int config) {
  return config >= 0 && config < num_configs() && all_configs()[config].int8;
}
bool conv_igemm_config_staged(int config) {
  if (config < 0 || config >= num_configs()) return false;
  const Config& c = all_configs()[config];
  if (c.tma) return false;                           // the register epilogue
  if (c.warp_halo) return c.in != InFormat::kNhwc;  // over activations: the register epilogue where not lean
  return c.halo || tile_stages(c.bm, c.bn, c.stages, c.row);
}
bool conv_igemm_wgmma() { return g_wgmma; }
bool conv_igemm_config_fits(int config, const ConvParams& p) {
  if (config < 0 || config >= num_configs()) return false;
  const Config& c = all_configs()[config];
  if (!g_runs[config]) return false;
  if (c.in != p.in_format || (c.in != InFormat::kNhwc && c.nchw != p.in_nchw)) return false;
  if (c.wg && !g_wgmma) return false;
  // The stems' and conv_warp_halo_kernel's register epilogues quantize with out_scale alone.
  if (c.halo && c.warp_kind == kWarpHalo && p.out_split < p.K) return false;
  if (p.split_in_cluster && (p.splits < 2 || p.splits > 8 || !g_wgmma || c.persist || c.halo ||
                             !tile_stages(c.bm, c.bn, c.stages, c.row))) {
    return false;  // a cluster of at most 8 blocks (sm_90), whose tile fits the shared memory
  }
  if (c.tma) return g_tma && tma_fits(p, c.row);
  if (c.warp_kind == kWarpHaloS2) return warp_halo_s2_fits(p);
  if (c.warp_kind == kWarpPw) return warp_pw_fits(p, c.warp_c, c.bn);
  if (c.warp_halo) return c.in == InFormat::kNhwc ? warp_halo_fits(p, c.int8) : stem_image_fits(p);
  return !c.halo || stem_halo_fits(p);
}
bool conv_igemm_config_allowed(int config, const ConvParams& p, const qdeploy::KernelPolicy& policy) {
  if (config < 0 || config >= num_configs()) return false;
  const Config& c = all_configs()[config];
  if (!policy.wgmma && (c.wg || c.tma || p.split_in_cluster)) return false;
  if (!policy.tma && c.tma) return false;
  if (!policy.warp_halo_s2 && c.warp_kind == kWarpHaloS2) return false;
  if (!policy.warp_pw && c.warp_kind == kWarpPw) return false;
  return policy.only_config.empty() || std::strstr(c.name, policy.only_config.c_str());
}
std::string conv_igemm_config_name(int config) {
  return config >= 0 && config < num_configs() ? all_configs()[config].name : "?";
}

// ConvParams as launch_conv_igemm passes them to configuration c's kernel.
ConvParams launch_params(const ConvParams& p, const Config& c) {
  ConvParams q = p;
  q.small_acc = p.small_acc && c.int8;
  fast_divisor(int64_t{q.OH} * q.OW, &q.hw_magic, &q.hw_shift);
  fast_divisor(q.OW, &q.ow_magic, &q.ow_shift);
  return q;
}
// Which of configuration c's kernels runs q (launch_params) and a: the full one, or a copy with one epilogue alone.
enum class Copy { kFull, kLean, kHead, kStaged };
Copy kernel_copy(const Config& c, const ConvParams& q, const ConvArgs& a) {
  if (q.no_lean) return Copy::kFull;
  if (c.warp_kind != kWarpHalo) {  // their lean copies' 8-byte stores and residual loads: staging's alignment
    return c.lean && lean_fits(q, a) && staging(q, a) == Staging::kNhwc ? Copy::kLean : Copy::kFull;
  }
  if (c.warp_halo) return c.lean && halo_lean_fits(q, a) ? Copy::kLean : Copy::kFull;
  if ((c.lean || c.tma_lean) && lean_fits(q, a)) return Copy::kLean;
  if (c.head && head_fits(q, a)) return Copy::kHead;
  if (c.staged && staged_fits(q, a)) return Copy::kStaged;
  return Copy::kFull;
}
bool conv_igemm_config_lean(int config, const ConvParams& p, const ConvArgs& a) {
  if (config < 0 || config >= num_configs()) return false;
  const Config& c = all_configs()[config];
  return kernel_copy(c, launch_params(p, c), a) != Copy::kFull;
}

Status launch_conv_igemm(const ConvParams& p, const ConvArgs& a, int config, cudaStream_t stream) {
  if (config < 0 || config >= num_configs()) {
    return internal("conv_igemm: no tile configuration " + std::to_string(config));
  }
  const Config& c = all_configs()[config];
  const int chunk = c.int8 ? 16 : 8;  // elements per 16 bytes
  if (c.in == InFormat::kNhwc &&
      (p.C % chunk != 0 || p.in_ld % chunk != 0 || p.Kp % (4 * chunk) != 0 || p.Kp < p.R * p.S * p.C)) {
    return internal(std::string("conv_igemm: ") + c.name + " needs channels padded to " + std::to_string(chunk) +
                    " and weight rows to " + std::to_string(4 * chunk));
  }
  if (c.int8 && !a.alpha) return internal("conv_igemm: INT8 needs alpha");
  const int64_t M = static_cast<int64_t>(p.N) * p.OH * p.OW;
  if (M == 0 || p.K == 0) return Status::ok();
  if (p.splits < 1 || (p.splits > 1 && !p.split_in_cluster && !a.workspace)) {
    return internal("conv_igemm: split-K needs a workspace");
  }
  if (!conv_igemm_config_fits(config, p)) {  // e.g. the stem's kernel for another shape
    return internal(std::string("conv_igemm: ") + c.name + " does not fit this convolution (or split-K)");
  }
  const int64_t ntiles = ceil_div(p.K, c.bn);
  int64_t mblocks = ceil_div(M, c.bm);
  if (c.persist) {  // about one wave, the blocks that fit on the SMs at once, shared by the N tiles and K splits
    mblocks = std::min(mblocks, std::max<int64_t>(1, g_sms * g_blocks_per_sm[config] / (ntiles * p.splits)));
  }
  dim3 grid(static_cast<unsigned>(mblocks), static_cast<unsigned>(ntiles), static_cast<unsigned>(p.splits));
  if (c.halo && !c.warp_halo) {  // the stem (OW a multiple of 64): a strip of rows per block, at least 8 blocks per
                                 // SM where there are rows enough, at most 16 rows each
    const int64_t strip_rows = std::clamp<int64_t>(p.OH / ceil_div(g_sms * 8, (p.OW / 64) * p.N), 1, 16);
    grid = dim3(p.OW / 64, static_cast<unsigned>(ceil_div(p.OH, strip_rows)), p.N);
  } else if (c.warp_kind == kWarpPw) {  // one wave of warps, each streaming a run of pixel tiles (with a warp per
                                        // tile, where 32 warps per SM had to take them, a warp had nothing to load
                                        // ahead and the 1x1 layers at 80 x 80 ran no faster than the implicit GEMM)
    const int64_t tiles = ceil_div(M, WarpPwLayout(c.warp_c, c.bn).pixels);
    const int64_t run = ceil_div(tiles, g_sms * g_blocks_per_sm[config] * WarpPwLayout::warps);
    grid = dim3(static_cast<unsigned>(ceil_div(tiles, WarpPwLayout::warps * run)));
  } else if (c.warp_halo) {  // a warp per 32 columns of a strip of rows (grid y), at least 32 warps per SM where
                             // there are rows enough, at most 16 rows each
    const int64_t columns = p.N * static_cast<int64_t>(p.OW / 32);
    const int64_t strip_rows = std::clamp<int64_t>(p.OH * columns / (g_sms * 32), 1, 16);
    grid = dim3(static_cast<unsigned>(ceil_div(columns, 4)), static_cast<unsigned>(ceil_div(p.OH, strip_rows)));
  }
  const ConvParams q = launch_params(p, c);
  const unsigned cluster = p.split_in_cluster ? static_cast<unsigned>(p.splits) : 1u;
  const Copy copy = kernel_copy(c, q, a);
  if (c.tma) {
    TmaMaps maps;
    QD_RETURN_IF_ERROR(encode_tma_maps(q, a, c.bn, c.row, &maps));
    launch_pdl(copy == Copy::kLean ? c.tma_lean : c.tma, grid, dim3(c.threads), config_smem(c), stream, q, a, maps);
  } else {
    const ConvKernel kernel = copy == Copy::kLean     ? c.lean
                              : copy == Copy::kHead   ? c.head
                              : copy == Copy::kStaged ? c.staged
                                                      : c.kernel;
    launch_pdl_cluster(kernel, grid, dim3(c.threads), config_smem(c), stream, cluster, q, a);
  }
  QD_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), c.name));
  if (p.splits > 1 && !p.split_in_cluster) {
    const int64_t total = M * p.K;
    const int64_t blocks = std::min<int64_t>(ceil_div(total, 256), 65535 * 16);
    if (c.int8) {
      conv_splitk_epilogue<true><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(q, a, total);
    } else {
      conv_splitk_epilogue<false><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(q, a, total);
    }
    QD_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), "conv_splitk_epilogue"));
  }
  return Status::ok();
}

Status launch_conv_epilogue(const ConvParams& p, const ConvArgs& a, const __half* acc, cudaStream_t stream) {
  const int64_t M = static_cast<int64_t>(p.N) * p.OH * p.OW;
  if (M == 0 || p.K == 0) return Status::ok();
  const int64_t groups = M * ((p.K + 7) / 8);
  const bool vec_in = p.K % 8 == 0 && aligned(acc, 16);
  const bool vec_out = vec_in && p.out_format == OutFormat::kNhwcF16 && p.out_ld % 8 == 0 && p.out_coff % 8 == 0 &&
                       aligned(a.y, 16);
  const int64_t blocks = std::min<int64_t>(ceil_div(groups, 256), 65535 * 16);
  conv_epilogue_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p, a, acc, groups, vec_in, vec_out);
  return cuda_status(cudaGetLastError(), "conv_epilogue");
}

Status conv_igemm_init() {
  int* flag = nullptr;
  int has = 0;
  QD_CUDA_TRY(cudaMalloc(&flag, sizeof(int)));
  arch_probe_kernel<<<1, 1>>>(flag);
  const cudaError_t err = cudaMemcpy(&has, flag, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(flag);
  QD_CUDA_TRY(err);
  // The device's compute capability, where the candidates are set up: below sm_90 (Orin's sm_87) only the
  // cp.async / mma.sync configurations are offered, whatever the binary holds.
  DeviceArch arch;
  int dev = 0, sms = 0;
  QD_CUDA_TRY(cudaGetDevice(&dev));
  QD_CUDA_TRY(cudaDeviceGetAttribute(&arch.cc_major, cudaDevAttrComputeCapabilityMajor, dev));
  QD_CUDA_TRY(cudaDeviceGetAttribute(&arch.cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
  QD_CUDA_TRY(cudaDeviceGetAttribute(&arch.smem_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  arch.wgmma_code = (has & 1) != 0;
  arch.pdl_code = (has & 2) != 0;
  g_wgmma = has_sm90_features(arch);
  g_pdl_code = has_pdl(arch);
  void* im2col = nullptr;
  void* tiled = nullptr;
  cudaDriverEntryPointQueryResult found1 = cudaDriverEntryPointSymbolNotFound, found2 = found1;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeIm2col", &im2col, 12000, cudaEnableDefault, &found1) ==
          cudaSuccess &&
      cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &tiled, 12000, cudaEnableDefault, &found2) ==
          cudaSuccess &&
      found1 == cudaDriverEntryPointSuccess && found2 == cudaDriverEntryPointSuccess) {
    g_encode_im2col = reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(im2col);
    g_encode_tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(tiled);
  }
  (void)cudaGetLastError();  // a missing entry point is not an error of the next launch
  g_tma = g_wgmma && g_encode_im2col && g_encode_tiled;
  QD_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  g_sms = std::max(sms, 1);
  for (int i = 0; i < num_configs(); ++i) {
    const Config& c = all_configs()[i];
    const int smem = config_smem(c);
    g_runs[i] = kernel_runs_on(KernelNeeds{c.wg || c.tma, smem}, arch);
    if (!g_runs[i]) continue;  // its shared memory may exceed the device's: no attribute to set
    const void* fn = c.tma ? reinterpret_cast<const void*>(c.tma) : reinterpret_cast<const void*>(c.kernel);
    QD_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    for (const void* copy : {reinterpret_cast<const void*>(c.tma_lean), reinterpret_cast<const void*>(c.lean),
                             reinterpret_cast<const void*>(c.head), reinterpret_cast<const void*>(c.staged)}) {
      if (copy) QD_CUDA_TRY(cudaFuncSetAttribute(copy, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    }
    int per_sm = 0;
    QD_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, c.threads, smem));
    g_blocks_per_sm[i] = std::max(per_sm, 1);
  }
  return Status::ok();
}

size_t conv_igemm_workspace(const ConvParams& p) {
  if (p.splits == 1 || p.split_in_cluster) return 0;
  return static_cast<size_t>(p.splits) * p.N * p.OH * p.OW * p.K * 4;  // fp32 or int32 partials
}

}  // namespace qd::cuda
