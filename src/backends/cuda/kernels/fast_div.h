// Integer division by a divisor fixed for a kernel, as a multiply-high and a shift (an integer division by a run-time
// value is ~30 instructions): the elementwise chains' operand indices, the implicit GEMM's im2col rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qd::cuda {

// Division by a divisor d fixed for a kernel, for n < 2^31, as a multiply-high and a shift: fast_divisor gives d's
// magic number and shift (p = 31 + ceil(log2 d), magic ceil(2^p / d), shift p - 32; magic 0 for d = 1, and 1, a
// quotient of 0, for d over 2^31), fast_div the quotient.
inline void fast_divisor(int64_t d, uint32_t* magic, uint8_t* shift) {
  *magic = d > (int64_t{1} << 31) ? 1 : 0;
  *shift = 0;
  if (d <= 1 || d > (int64_t{1} << 31)) return;
  int log2 = 0;
  while ((int64_t{1} << log2) < d) ++log2;
  const int p = 31 + log2;
  *magic = static_cast<uint32_t>(((uint64_t{1} << p) + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d));
  *shift = static_cast<uint8_t>(p - 32);
}
__host__ __device__ inline uint32_t fast_div(uint32_t n, uint32_t magic, uint32_t shift) {
#ifdef __CUDA_ARCH__
  return magic ? __umulhi(n, magic) >> shift : n;
#else
  return magic ? static_cast<uint32_t>((uint64_t{n} * magic) >> 32) >> shift : n;
#endif
}

}  // namespace qd::cuda
