// Fused tensor-core convolution (implicit GEMM): conv + bias + activation + residual add in one kernel, in fp16 (fp32
// accumulation) or INT8 (int32 accumulation, then y = acc * s_x * s_w[k] + bias[k] as the INT8 contract says).
// Activations are NHWC with the channel count padded to a multiple of 16 bytes' worth of elements (8 fp16, 16 int8);
// weights are [K][R][S][Cp] with each row zero-padded to 64 bytes' worth (32 fp16, 64 int8). The output can be NHWC fp16 (optionally a
// channel slice of a wider tensor, so producers of a Concat write straight into it) or NCHW fp16/fp32 (so a layer that
// feeds float ops in ONNX layout converts inside the kernel, with no reformat pass).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/fast_div.h"
#include "core/status.h"
#include "qdeploy/kernel_policy.h"

namespace qd::cuda {

enum class Act : int { kNone = 0, kRelu, kSilu, kSigmoid, kLeakyRelu, kHardSwish, kHardSigmoid, kClip, kGelu };
const char* act_name(Act a);

enum class OutFormat : int { kNhwcF16 = 0, kNchwF16, kNchwF32, kNhwcI8 };
// What the input is. kNhwc: NHWC with C (padded) values per pixel, in_ld apart, in the conv's precision (the tile
// kernels). kImageF16 / kImageF32: a stem's image as the engine got it, fp16 or fp32, NCHW planes (in_nchw) or NHWC
// pixels of exactly in_channels (3) values; the conv is the stride-1 one over its space-to-depth (H, W and the kernel
// halved, C = 16 packed channels; lower.cpp's space_to_depth_weights) and the stem kernels (stem_image_*,
// conv_warp_halo_kernel) read the image themselves, quantizing it with in_scale for INT8. kImageI8 (INT8 convs
// only): NHWC pixels of in_channels int8 values, quantized with in_scale already (an int8:nhwc input binding, which
// the preprocessing kernel writes), read as they are.
enum class InFormat : int { kNhwc = 0, kImageF16, kImageF32, kImageI8 };
// The optional second output (ConvArgs::y2), always NHWC: fp16, or int8 quantized with ConvParams::out2_scale.
enum class Out2Format : int { kF16 = 0, kI8 };

struct ConvParams {
  int N = 0, H = 0, W = 0, C = 0;  // input; C is the padded channel count (16 bytes' worth)
  int K = 0, R = 0, S = 0;         // output channels, kernel size
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int OH = 0, OW = 0;
  int Kp = 0;                      // weight row length: R*S*C rounded up to 32
  int in_ld = 0;                   // elements between input pixels (>= C)
  InFormat in_format = InFormat::kNhwc;
  bool in_nchw = false;            // kImage*: NCHW planes, else NHWC pixels of in_ld = in_channels values
  int in_channels = 0;             // kImage*: the image's channels
  float in_scale = 1.f;            // kImage* INT8: the image's quantization scale
  int out_ld = 0, out_coff = 0;    // NHWC output: elements between pixels, first channel
  int out2_ld = 0, out2_coff = 0;  // the same for ConvArgs::y2
  int res_ld = 0;                  // residual (NHWC) elements between pixels
  float res_scale = 0.f;           // ConvArgs::residual_i8: the residual is q * res_scale
  OutFormat out_format = OutFormat::kNhwcF16;
  Act act = Act::kNone;
  float act_a = 0.f, act_b = 0.f;  // LeakyRelu alpha; HardSigmoid alpha/beta; Clip min/max
  float out_scale = 1.f;           // kNhwcI8: the output's quantization scale
  // kNhwcI8 of sibling convs run as one (lower.cpp's merge_sibling_convs): channels from out_split on (a multiple of
  // 8) are another tensor's, quantized with out_scale_hi. Not for the halo kernels, nor for exact_silu.
  int out_split = INT_MAX;
  float out_scale_hi = 1.f;
  // ConvArgs::y2: its format, its scale (kI8), and its source: the value v, or (out2_of_q, with a kNhwcI8 output) the
  // output's dequantized value q * out_scale, which is what every other reader of an INT8 tensor sees.
  Out2Format out2_format = Out2Format::kF16;
  bool out2_of_q = false;
  float out2_scale = 1.f;
  // Split-K: the K loop is cut into `splits` ranges run by separate blocks, whose fp32 partial sums go to a
  // workspace that a second kernel adds up before the epilogue. Pays off when M x K alone gives too few blocks to
  // fill the GPU (small images, batch 1).
  int splits = 1;
  // Split-K inside a thread-block cluster (sm_90): the `splits` blocks of an output tile form one cluster and add
  // their partial sums through distributed shared memory; the first then runs the usual epilogue. No workspace and no
  // second kernel, which at batch 1 costs more than the split gains. Configurations whose tile fits their shared
  // memory (conv_igemm_config_staged), not persistent nor halo ones (conv_igemm_config_fits).
  bool split_in_cluster = false;
  // The epilogue stores from the registers even where it could go through shared memory (the Lowerer sets it where
  // KernelPolicy::staged_epilogue is off, for A/B runs).
  bool direct_epilogue = false;
  // INT8 layers that the quad-transposed register epilogue (conv_igemm_kernels.cuh's quad_epilogue_i8) could write
  // take the others (tests; the Lowerer sets it for all where KernelPolicy::quad_epilogue is off, for A/B runs).
  bool no_quad_epilogue = false;
  // The full kernels, never their copies compiled with one epilogue (KernelPolicy::lean_epilogue off; A/B runs).
  bool no_lean = false;
  // INT8 convs with SiLU and an int8 output (BuildOptions::int8_mode "bitexact"): values whose fast SiLU lands near a
  // rounding tie get the reference's SiLU instead (silu_exact), so that they quantize as the reference does. In the
  // staged epilogue (conv_igemm_config_staged), split-K's and the grouped kernel's; the register epilogue stays within
  // +-1 LSB. Costs YOLOv5s INT8 6-10% (per-element tie checks in epilogues that bound the thin layers). The staged
  // epilogue then also rounds every int8 output as the division does (otherwise with a reciprocal, +-1 LSB).
  bool exact_silu = false;
  // INT8: every accumulator of this layer lies in [-2^22, 2^22) (int8_acc_bound < kSmallAccLimit, set by the Lowerer
  // from the weights): the register epilogues convert it to float with an integer add and a float subtract (full
  // rate) instead of I2F, which runs at 16 per clock per SM, the rate of SiLU's exp2 and reciprocal. The same value.
  // The Lowerer leaves it off where KernelPolicy::small_acc is off (A/B runs).
  bool small_acc = false;
  // Set by launch_conv_igemm: OH * OW and OW as multiply-high divisors (fast_divisor), for the implicit GEMM's im2col
  // rows' pixel coordinates (two integer divisions per row and M tile took a third of /model.1's instructions).
  uint32_t hw_magic = 0, ow_magic = 0;
  uint8_t hw_shift = 0, ow_shift = 0;
};

// The largest |accumulator| an INT8 conv with these weights ([K][per_k] int8, any order within a row, padding zero)
// can give over int8 inputs (|x| <= 128): 128 * max_k sum |w[k]|. ConvParams::small_acc where it is below
// kSmallAccLimit.
constexpr int64_t kSmallAccLimit = int64_t{1} << 22;
inline int64_t int8_acc_bound(const int8_t* w, int64_t K, int64_t per_k) {
  int64_t worst = 0;
  for (int64_t k = 0; k < K; ++k) {
    int64_t sum = 0;
    for (int64_t j = 0; j < per_k; ++j) sum += w[k * per_k + j] < 0 ? -w[k * per_k + j] : w[k * per_k + j];
    worst = sum > worst ? sum : worst;
  }
  return 128 * worst;
}

struct ConvArgs {
  const void* x = nullptr;         // __half or int8_t, as the configuration
  const void* w = nullptr;
  const float* bias = nullptr;     // [K], never null
  const float* alpha = nullptr;    // INT8: [K] s_x * s_w[k]
  // Added after the activation; at most one, may both be null. NHWC fp16, or int8 (an INT8 tensor read as its
  // dequantized value q * res_scale in fp32, as the reference does).
  const __half* residual = nullptr;
  const int8_t* residual_i8 = nullptr;
  void* y = nullptr;
  // Optional second output (ConvParams::out2_*), e.g. for a tensor's other readers. The fp16 configurations and the
  // cuDNN epilogue take only fp16 residuals and, beside a kNhwcI8 output, its dequantized fp16 copy (kF16,
  // out2_of_q); int8 residuals and the other second outputs are for the INT8 configurations.
  void* y2 = nullptr;
  float* workspace = nullptr;        // splits x M x K floats when splits > 1
};

// Raises the kernels' shared-memory limits; once per process and device, before any launch or graph capture.
Status conv_igemm_init();
// Bytes of workspace launch_conv_igemm needs for p.splits.
size_t conv_igemm_workspace(const ConvParams& p);

// Tile configurations the builder times against each other (index < conv_igemm_configs()); each is fp16 or INT8.
int conv_igemm_configs();
bool conv_igemm_config_int8(int config);
// Whether its epilogue goes through shared memory (where the layer's layout allows: K and the strides multiples of
// 8), so that ConvParams::exact_silu applies.
bool conv_igemm_config_staged(int config);
bool conv_igemm_wgmma();  // whether the wgmma (sm_90a) configurations are offered (after conv_igemm_init)
// Whether configuration `config` can run `p` (special-purpose ones fit few shapes; wgmma ones need sm_90a).
bool conv_igemm_config_fits(int config, const ConvParams& p);
// Whether the kernel policy lets the build pick configuration `config` for p (its families, cluster split-K through
// wgmma, KernelPolicy::only_config).
bool conv_igemm_config_allowed(int config, const ConvParams& p, const qdeploy::KernelPolicy& policy);
std::string conv_igemm_config_name(int config);
// Whether launch_conv_igemm runs a lean copy of configuration `config`'s kernel for p and a: one compiled with a
// single epilogue, the usual INT8 layer's (SiLU, accumulators converted without I2F, the quad epilogue's int8 NHWC
// output), an INT8 detection head's (Sigmoid, NCHW output) or the staged NHWC SiLU one (layers with a second output),
// where the configuration has one and ConvParams::no_lean is off. The same code path, so the same results, as the
// full kernel's.
bool conv_igemm_config_lean(int config, const ConvParams& p, const ConvArgs& a);
Status launch_conv_igemm(const ConvParams& p, const ConvArgs& a, int config, cudaStream_t stream);
// The fused layer's epilogue (bias, activation, residual, output format; not INT8's rescale) over a convolution
// computed by another kernel: `acc` is [N*OH*OW][K] fp16 (cuDNN's result, see cudnn_conv.h).
Status launch_conv_epilogue(const ConvParams& p, const ConvArgs& a, const __half* acc, cudaStream_t stream);
// Grouped / depthwise INT8 convolution (CUDA cores, int32 accumulation) with the same epilogue as the implicit GEMM:
// `groups` groups of cg input channels each; weights packed like the implicit GEMM's, rows [R][S][cp] (cp: cg padded
// to 16) of length p.Kp; p.in_ld input values per pixel.
Status launch_conv_grouped_i8(const ConvParams& p, const ConvArgs& a, int groups, int cg, int cp, cudaStream_t stream);

}  // namespace qd::cuda
