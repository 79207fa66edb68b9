// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): a warpgroup of 4 warps multiplies a 64 x N tile of A by an N x K
// tile of B, both read straight from shared memory through matrix descriptors, into accumulators in registers laid
// out as N/8 mma.sync m16n8 C fragments per warp (warp w of the group holds rows 16w..16w+15), so the implicit GEMM's
// epilogue takes them unchanged. The tiles are K-major rows of 64 bytes in the 64-byte swizzle (16-byte chunk c of
// row r at chunk c ^ ((r >> 1) & 3), conv_igemm_kernels.cuh's tile_offset) or of 128 bytes in the 128-byte swizzle
// (c ^ (r & 7)).
//
// Only code compiled for sm_90a has the instruction (QD_WGMMA_DEVICE); elsewhere the functions trap, and
// conv_igemm_init finds out which the loaded binary has before offering the configurations that use them.
// Inline PTX takes no arrays: the accumulator operands are listed per shape by the macros below.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QD_WGMMA_DEVICE 1
#else
#define QD_WGMMA_DEVICE 0
#endif

namespace qd::cuda {

// Descriptor of a K-major tile of kRow-byte rows (64 or 128) at shared-memory byte address `addr` (aligned to 8
// rows): the kRow-byte swizzle (bits 62-63: 2 for 64 bytes, 1 for 128), 8 rows between 8-row groups (bits 32-45, in
// 16-byte units); the leading offset (bits 16-29) is unused by swizzled K-major layouts and set to 1. Adding 2 moves
// the start 32 bytes along K (the next k16 / k32).
template <int kRow>
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr) {
  static_assert(kRow == 64 || kRow == 128, "64- or 128-byte rows");
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (static_cast<uint64_t>(8 * kRow >> 4) << 32) | (uint64_t{kRow == 64 ? 2 : 1} << 62);
}

// Orders this thread's earlier register and shared-memory accesses before the wgmma that follow (wgmma.fence).
__device__ __forceinline__ void wgmma_fence() {
#if QD_WGMMA_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if QD_WGMMA_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if QD_WGMMA_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Makes shared-memory writes of the generic proxy (cp.async, st.shared) visible to wgmma's reads (the async proxy).
__device__ __forceinline__ void fence_proxy_async_shared() {
#if QD_WGMMA_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving accumulator accesses across the asynchronous MMAs that read and write them.
template <typename T, int NT>
__device__ __forceinline__ void wgmma_fence_acc(T (&d)[1][NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (std::is_same_v<T, float>) {
        asm volatile("" : "+f"(d[0][j][e])::"memory");
      } else {
        asm volatile("" : "+r"(d[0][j][e])::"memory");
      }
    }
}

// d += A x B^T for one k16 (fp16, fp32 accumulators) or k32 (int8, int32 accumulators) step; kI8 picks the types.
template <int N, bool kI8>
__device__ __forceinline__ void wgmma_async(std::conditional_t<kI8, int, float> (&d)[1][N / 8][4], uint64_t da,
                                            uint64_t db);

// The accumulator operands, in the instruction's order: N / 8 fragments of 4 (C is the constraint, "+f" or "+r"),
// and the register list "{%0, ..., %(N/2 - 1)}" that names them; the descriptors follow as %(N/2) and %(N/2 + 1).
#define QD_WG_FRAG(C, j) C(d[0][j][0]), C(d[0][j][1]), C(d[0][j][2]), C(d[0][j][3])
#define QD_WG_OPS32(C) QD_WG_FRAG(C, 0), QD_WG_FRAG(C, 1), QD_WG_FRAG(C, 2), QD_WG_FRAG(C, 3)
#define QD_WG_OPS64(C) QD_WG_OPS32(C), QD_WG_FRAG(C, 4), QD_WG_FRAG(C, 5), QD_WG_FRAG(C, 6), QD_WG_FRAG(C, 7)
#define QD_WG_OPS128(C)                                                                                            \
  QD_WG_OPS64(C), QD_WG_FRAG(C, 8), QD_WG_FRAG(C, 9), QD_WG_FRAG(C, 10), QD_WG_FRAG(C, 11), QD_WG_FRAG(C, 12),  \
      QD_WG_FRAG(C, 13), QD_WG_FRAG(C, 14), QD_WG_FRAG(C, 15)
#define QD_WG_OPS256(C)                                                                                             \
  QD_WG_OPS128(C), QD_WG_FRAG(C, 16), QD_WG_FRAG(C, 17), QD_WG_FRAG(C, 18), QD_WG_FRAG(C, 19), QD_WG_FRAG(C, 20), \
      QD_WG_FRAG(C, 21), QD_WG_FRAG(C, 22), QD_WG_FRAG(C, 23), QD_WG_FRAG(C, 24), QD_WG_FRAG(C, 25),              \
      QD_WG_FRAG(C, 26), QD_WG_FRAG(C, 27), QD_WG_FRAG(C, 28), QD_WG_FRAG(C, 29), QD_WG_FRAG(C, 30), QD_WG_FRAG(C, 31)
#define QD_WG_REGS32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define QD_WG_REGS64 \
  QD_WG_REGS32 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define QD_WG_REGS128                                                                                    \
  QD_WG_REGS64 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, " \
               "%49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define QD_WG_REGS256                                                                                          \
  QD_WG_REGS128 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, "      \
                "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, " \
                "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, "  \
                "%116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define QD_WG_F(x) "+f"(x)
#define QD_WG_R(x) "+r"(x)
#if QD_WGMMA_DEVICE
#define QD_WG_ASM(text, ...) asm volatile(text : __VA_ARGS__ : "l"(da), "l"(db))
#else
#define QD_WG_ASM(text, ...) __trap()
#endif
// One specialization per shape; DESC names the descriptors' operands ("%16, %17" after 16 accumulators). fp16:
// scale-d 1 (accumulate), A and B neither negated nor transposed (both K-major); int8: scale-d 1.
#define QD_WGMMA_F16(N, DESC)                                                                                  \
  template <>                                                                                                  \
  __device__ __forceinline__ void wgmma_async<N, false>(float (&d)[1][N / 8][4], uint64_t da, uint64_t db) {   \
    QD_WG_ASM("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 {" QD_WG_REGS##N "}, " DESC            \
              ", 1, 1, 1, 0, 0;\n",                                                                           \
              QD_WG_OPS##N(QD_WG_F));                                                                          \
  }
#define QD_WGMMA_I8(N, DESC)                                                                                   \
  template <>                                                                                                  \
  __device__ __forceinline__ void wgmma_async<N, true>(int (&d)[1][N / 8][4], uint64_t da, uint64_t db) {      \
    QD_WG_ASM("wgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 {" QD_WG_REGS##N "}, " DESC ", 1;\n",    \
              QD_WG_OPS##N(QD_WG_R));                                                                          \
  }
QD_WGMMA_F16(32, "%16, %17")
QD_WGMMA_F16(64, "%32, %33")
QD_WGMMA_F16(128, "%64, %65")
QD_WGMMA_F16(256, "%128, %129")
QD_WGMMA_I8(32, "%16, %17")
QD_WGMMA_I8(64, "%32, %33")
QD_WGMMA_I8(128, "%64, %65")  // int8 has no n256 shape

}  // namespace qd::cuda
