// Grouped and depthwise fp16 convolutions (conv_grouped.cu, beside conv.h's launch_conv_grouped_i8).
#pragma once

#include "backends/cuda/kernels/conv.h"

namespace qd::cuda {

// y = epilogue(conv(x, w)) for an NHWC fp16 x and fp16 weights packed as pack_conv does ([K][R][S][cp], rows of Kp):
// `groups` groups of `cg` input channels, fp32 accumulation, the implicit GEMM's epilogue (bias, activation,
// fp16 residual, any output format).
Status launch_conv_grouped_f16(const ConvParams& p, const ConvArgs& a, int groups, int cg, int cp, cudaStream_t stream);

}  // namespace qd::cuda
