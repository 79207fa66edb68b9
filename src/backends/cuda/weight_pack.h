// Conv weights packed for the tensor-core kernels (PackedConv, instance.h).
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/instance.h"
#include "core/tensor.h"

namespace qd::cuda {

// [K, C, R, S] -> [K, 4C, R/2, S/2]: the weights of the stride-1 conv over a space-to-depth input that computes the
// stride-2 conv (R and S even).
Tensor space_to_depth_weights(const Tensor& w);

// fp16 weights [K][R][S][C] (C padded to 8, rows to 32 elements) and the bias (zeros without one).
Expected<std::shared_ptr<PackedConv>> pack_conv(const Tensor& w, const Tensor* bias);

// INT8 weights exactly as the reference quantizes them (per output channel; `qat_scales` when the QAT model has
// them), with alpha = sx * s_w[k].
Expected<std::shared_ptr<PackedConv>> pack_conv_int8(const Tensor& w, const Tensor* bias, float sx,
                                                    const std::vector<float>* qat_scales);

// Two convs' packed weights as one conv with a's output channels first, then b's (same C, R, S and precision).
Expected<std::shared_ptr<PackedConv>> merge_packed(const PackedConv& a, const PackedConv& b);

}  // namespace qd::cuda
