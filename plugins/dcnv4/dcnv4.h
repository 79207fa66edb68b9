// DCNv4 (deformable convolution v4, OpenGVLab/DCNv4) as a qdeploy plugin op: ai.qdeploy::DCNv4, version 1.
//
//   value        [N, H, W, G*D]   channels-last
//   offset_mask  [N, Ho, Wo, P]   per group g, at g*3K: K (dx, dy) pairs, then K raw mask values (no softmax);
//                                  P >= 3*G*K (the official op pads it to a multiple of 8)
//   output       [N, Ho, Wo, G*D]
//
// K = kernel_h*kernel_w - remove_center; the sampling points run kernel-x outer, kernel-y inner (the centre point
// skipped when remove_center). Point (i, j) of output pixel (ox, oy) samples value at
//   x = ox*stride_w - pad_w + cw + offset_scale*(i*dilation_w + dx - cw),   cw = (dilation_w*(kernel_w-1)) >> 1
//   y = oy*stride_h - pad_h + ch + offset_scale*(j*dilation_h + dy - ch),   ch = (dilation_h*(kernel_h-1)) >> 1
// bilinearly with zero padding (a point with x or y <= -1 or >= the size adds nothing; corners outside read 0), and
// the output is the sum over points of mask * sample, accumulated in fp32. Ho and Wo are a convolution's:
// (H + 2*pad_h - (dilation_h*(kernel_h-1) + 1)) / stride_h + 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qdeploy/plugin.h"

namespace qd_dcnv4 {

constexpr const char* kDomain = "ai.qdeploy";
constexpr const char* kName = "DCNv4";
constexpr int kVersion = 1;

// The geometry of one node: attributes and input shapes resolved once, read the same way by the reference and the
// CUDA kernels.
struct Geometry {
  int64_t n = 0, h = 0, w = 0, ho = 0, wo = 0;
  int kh = 3, kw = 3, sh = 1, sw = 1, ph = 1, pw = 1, dh = 1, dw = 1;
  int g = 1, d = 1, k = 9, p = 0;  // groups, channels per group, sampling points, offset_mask channels
  bool remove_center = false;
  float offset_scale = 1.f;
  int64_t channels() const { return int64_t{g} * d; }
};

// Checks the attributes against the shapes (value first, offset_mask second) and fills *geo; errors say what to fix.
qdeploy::Status resolve_geometry(const qdeploy::Attrs& attrs, const qdeploy::Dims& value,
                                 const qdeploy::Dims& offset_mask, Geometry* geo);

// The declaration (schema, shape inference, reference, test cases) with the CUDA kernels this build has.
qdeploy::OpDef op_def();

// The CUDA kernels (dcnv4_cuda.cu); empty in a build without CUDA.
std::vector<qdeploy::CudaKernelDef> cuda_kernels();

}  // namespace qd_dcnv4
