// Stand-ins for the few ATen names the official DCNv4 forward kernels use, so that bench/dcnv4_kernel_bench.cpp
// compiles those kernels from their source without PyTorch (-Ibench/peer_shim). Accumulation type: fp32, as ATen's
// opmath type is for float and half.
#pragma once
#include <cassert>
#include <stdexcept>

namespace at {
template <typename T>
using opmath_type = float;
}  // namespace at

#define AT_ASSERTM(cond, ...) assert(cond)
