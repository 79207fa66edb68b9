// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): a warpgroup of 4 warps multiplies a 64 x N tile of A by an N x K
// tile of B, both read straight from shared memory through matrix descriptors, into accumulators in registers laid
// out as N/8 mma.sync m16n8 C fragments per warp (warp w of the group holds rows 16w..16w+15), so the implicit GEMM's
// epilogue takes them unchanged. The tiles are K-major rows of 64 bytes in the 64-byte swizzle (16-byte chunk c of
// row r at chunk c ^ ((r >> 1) & 3), conv_igemm.cu's tile_offset) or of 128 bytes in the 128-byte swizzle (c ^ (r &
// 7)).
//
// Only code compiled for sm_90a has the instruction (QD_WGMMA_DEVICE); elsewhere the functions trap, and
// conv_igemm_init finds out which the loaded binary has before offering the configurations that use them.
// The accumulator operands are written out per shape: inline PTX takes no arrays.
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

template <>
__device__ __forceinline__ void wgmma_async<32, false>(float (&d)[1][4][4], uint64_t da, uint64_t db) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, 1, 1, 1, 0, 0;\n"
      : "+f"(d[0][0][0]), "+f"(d[0][0][1]), "+f"(d[0][0][2]), "+f"(d[0][0][3]),
        "+f"(d[0][1][0]), "+f"(d[0][1][1]), "+f"(d[0][1][2]), "+f"(d[0][1][3]),
        "+f"(d[0][2][0]), "+f"(d[0][2][1]), "+f"(d[0][2][2]), "+f"(d[0][2][3]),
        "+f"(d[0][3][0]), "+f"(d[0][3][1]), "+f"(d[0][3][2]), "+f"(d[0][3][3])
      : "l"(da), "l"(db));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void wgmma_async<64, false>(float (&d)[1][8][4], uint64_t da, uint64_t db) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, 1, 1, 1, 0, 0;\n"
      : "+f"(d[0][0][0]), "+f"(d[0][0][1]), "+f"(d[0][0][2]), "+f"(d[0][0][3]),
        "+f"(d[0][1][0]), "+f"(d[0][1][1]), "+f"(d[0][1][2]), "+f"(d[0][1][3]),
        "+f"(d[0][2][0]), "+f"(d[0][2][1]), "+f"(d[0][2][2]), "+f"(d[0][2][3]),
        "+f"(d[0][3][0]), "+f"(d[0][3][1]), "+f"(d[0][3][2]), "+f"(d[0][3][3]),
        "+f"(d[0][4][0]), "+f"(d[0][4][1]), "+f"(d[0][4][2]), "+f"(d[0][4][3]),
        "+f"(d[0][5][0]), "+f"(d[0][5][1]), "+f"(d[0][5][2]), "+f"(d[0][5][3]),
        "+f"(d[0][6][0]), "+f"(d[0][6][1]), "+f"(d[0][6][2]), "+f"(d[0][6][3]),
        "+f"(d[0][7][0]), "+f"(d[0][7][1]), "+f"(d[0][7][2]), "+f"(d[0][7][3])
      : "l"(da), "l"(db));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void wgmma_async<128, false>(float (&d)[1][16][4], uint64_t da, uint64_t db) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1, 1, 1, 0, 0;\n"
      : "+f"(d[0][0][0]), "+f"(d[0][0][1]), "+f"(d[0][0][2]), "+f"(d[0][0][3]),
        "+f"(d[0][1][0]), "+f"(d[0][1][1]), "+f"(d[0][1][2]), "+f"(d[0][1][3]),
        "+f"(d[0][2][0]), "+f"(d[0][2][1]), "+f"(d[0][2][2]), "+f"(d[0][2][3]),
        "+f"(d[0][3][0]), "+f"(d[0][3][1]), "+f"(d[0][3][2]), "+f"(d[0][3][3]),
        "+f"(d[0][4][0]), "+f"(d[0][4][1]), "+f"(d[0][4][2]), "+f"(d[0][4][3]),
        "+f"(d[0][5][0]), "+f"(d[0][5][1]), "+f"(d[0][5][2]), "+f"(d[0][5][3]),
        "+f"(d[0][6][0]), "+f"(d[0][6][1]), "+f"(d[0][6][2]), "+f"(d[0][6][3]),
        "+f"(d[0][7][0]), "+f"(d[0][7][1]), "+f"(d[0][7][2]), "+f"(d[0][7][3]),
        "+f"(d[0][8][0]), "+f"(d[0][8][1]), "+f"(d[0][8][2]), "+f"(d[0][8][3]),
        "+f"(d[0][9][0]), "+f"(d[0][9][1]), "+f"(d[0][9][2]), "+f"(d[0][9][3]),
        "+f"(d[0][10][0]), "+f"(d[0][10][1]), "+f"(d[0][10][2]), "+f"(d[0][10][3]),
        "+f"(d[0][11][0]), "+f"(d[0][11][1]), "+f"(d[0][11][2]), "+f"(d[0][11][3]),
        "+f"(d[0][12][0]), "+f"(d[0][12][1]), "+f"(d[0][12][2]), "+f"(d[0][12][3]),
        "+f"(d[0][13][0]), "+f"(d[0][13][1]), "+f"(d[0][13][2]), "+f"(d[0][13][3]),
        "+f"(d[0][14][0]), "+f"(d[0][14][1]), "+f"(d[0][14][2]), "+f"(d[0][14][3]),
        "+f"(d[0][15][0]), "+f"(d[0][15][1]), "+f"(d[0][15][2]), "+f"(d[0][15][3])
      : "l"(da), "l"(db));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void wgmma_async<256, false>(float (&d)[1][32][4], uint64_t da, uint64_t db) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, 1, 1, 1, 0, 0;\n"
      : "+f"(d[0][0][0]), "+f"(d[0][0][1]), "+f"(d[0][0][2]), "+f"(d[0][0][3]),
        "+f"(d[0][1][0]), "+f"(d[0][1][1]), "+f"(d[0][1][2]), "+f"(d[0][1][3]),
        "+f"(d[0][2][0]), "+f"(d[0][2][1]), "+f"(d[0][2][2]), "+f"(d[0][2][3]),
        "+f"(d[0][3][0]), "+f"(d[0][3][1]), "+f"(d[0][3][2]), "+f"(d[0][3][3]),
        "+f"(d[0][4][0]), "+f"(d[0][4][1]), "+f"(d[0][4][2]), "+f"(d[0][4][3]),
        "+f"(d[0][5][0]), "+f"(d[0][5][1]), "+f"(d[0][5][2]), "+f"(d[0][5][3]),
        "+f"(d[0][6][0]), "+f"(d[0][6][1]), "+f"(d[0][6][2]), "+f"(d[0][6][3]),
        "+f"(d[0][7][0]), "+f"(d[0][7][1]), "+f"(d[0][7][2]), "+f"(d[0][7][3]),
        "+f"(d[0][8][0]), "+f"(d[0][8][1]), "+f"(d[0][8][2]), "+f"(d[0][8][3]),
        "+f"(d[0][9][0]), "+f"(d[0][9][1]), "+f"(d[0][9][2]), "+f"(d[0][9][3]),
        "+f"(d[0][10][0]), "+f"(d[0][10][1]), "+f"(d[0][10][2]), "+f"(d[0][10][3]),
        "+f"(d[0][11][0]), "+f"(d[0][11][1]), "+f"(d[0][11][2]), "+f"(d[0][11][3]),
        "+f"(d[0][12][0]), "+f"(d[0][12][1]), "+f"(d[0][12][2]), "+f"(d[0][12][3]),
        "+f"(d[0][13][0]), "+f"(d[0][13][1]), "+f"(d[0][13][2]), "+f"(d[0][13][3]),
        "+f"(d[0][14][0]), "+f"(d[0][14][1]), "+f"(d[0][14][2]), "+f"(d[0][14][3]),
        "+f"(d[0][15][0]), "+f"(d[0][15][1]), "+f"(d[0][15][2]), "+f"(d[0][15][3]),
        "+f"(d[0][16][0]), "+f"(d[0][16][1]), "+f"(d[0][16][2]), "+f"(d[0][16][3]),
        "+f"(d[0][17][0]), "+f"(d[0][17][1]), "+f"(d[0][17][2]), "+f"(d[0][17][3]),
        "+f"(d[0][18][0]), "+f"(d[0][18][1]), "+f"(d[0][18][2]), "+f"(d[0][18][3]),
        "+f"(d[0][19][0]), "+f"(d[0][19][1]), "+f"(d[0][19][2]), "+f"(d[0][19][3]),
        "+f"(d[0][20][0]), "+f"(d[0][20][1]), "+f"(d[0][20][2]), "+f"(d[0][20][3]),
        "+f"(d[0][21][0]), "+f"(d[0][21][1]), "+f"(d[0][21][2]), "+f"(d[0][21][3]),
        "+f"(d[0][22][0]), "+f"(d[0][22][1]), "+f"(d[0][22][2]), "+f"(d[0][22][3]),
        "+f"(d[0][23][0]), "+f"(d[0][23][1]), "+f"(d[0][23][2]), "+f"(d[0][23][3]),
        "+f"(d[0][24][0]), "+f"(d[0][24][1]), "+f"(d[0][24][2]), "+f"(d[0][24][3]),
        "+f"(d[0][25][0]), "+f"(d[0][25][1]), "+f"(d[0][25][2]), "+f"(d[0][25][3]),
        "+f"(d[0][26][0]), "+f"(d[0][26][1]), "+f"(d[0][26][2]), "+f"(d[0][26][3]),
        "+f"(d[0][27][0]), "+f"(d[0][27][1]), "+f"(d[0][27][2]), "+f"(d[0][27][3]),
        "+f"(d[0][28][0]), "+f"(d[0][28][1]), "+f"(d[0][28][2]), "+f"(d[0][28][3]),
        "+f"(d[0][29][0]), "+f"(d[0][29][1]), "+f"(d[0][29][2]), "+f"(d[0][29][3]),
        "+f"(d[0][30][0]), "+f"(d[0][30][1]), "+f"(d[0][30][2]), "+f"(d[0][30][3]),
        "+f"(d[0][31][0]), "+f"(d[0][31][1]), "+f"(d[0][31][2]), "+f"(d[0][31][3])
      : "l"(da), "l"(db));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void wgmma_async<32, true>(int (&d)[1][4][4], uint64_t da, uint64_t db) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, 1;\n"
      : "+r"(d[0][0][0]), "+r"(d[0][0][1]), "+r"(d[0][0][2]), "+r"(d[0][0][3]),
        "+r"(d[0][1][0]), "+r"(d[0][1][1]), "+r"(d[0][1][2]), "+r"(d[0][1][3]),
        "+r"(d[0][2][0]), "+r"(d[0][2][1]), "+r"(d[0][2][2]), "+r"(d[0][2][3]),
        "+r"(d[0][3][0]), "+r"(d[0][3][1]), "+r"(d[0][3][2]), "+r"(d[0][3][3])
      : "l"(da), "l"(db));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void wgmma_async<64, true>(int (&d)[1][8][4], uint64_t da, uint64_t db) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, 1;\n"
      : "+r"(d[0][0][0]), "+r"(d[0][0][1]), "+r"(d[0][0][2]), "+r"(d[0][0][3]),
        "+r"(d[0][1][0]), "+r"(d[0][1][1]), "+r"(d[0][1][2]), "+r"(d[0][1][3]),
        "+r"(d[0][2][0]), "+r"(d[0][2][1]), "+r"(d[0][2][2]), "+r"(d[0][2][3]),
        "+r"(d[0][3][0]), "+r"(d[0][3][1]), "+r"(d[0][3][2]), "+r"(d[0][3][3]),
        "+r"(d[0][4][0]), "+r"(d[0][4][1]), "+r"(d[0][4][2]), "+r"(d[0][4][3]),
        "+r"(d[0][5][0]), "+r"(d[0][5][1]), "+r"(d[0][5][2]), "+r"(d[0][5][3]),
        "+r"(d[0][6][0]), "+r"(d[0][6][1]), "+r"(d[0][6][2]), "+r"(d[0][6][3]),
        "+r"(d[0][7][0]), "+r"(d[0][7][1]), "+r"(d[0][7][2]), "+r"(d[0][7][3])
      : "l"(da), "l"(db));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void wgmma_async<128, true>(int (&d)[1][16][4], uint64_t da, uint64_t db) {
#if QD_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1;\n"
      : "+r"(d[0][0][0]), "+r"(d[0][0][1]), "+r"(d[0][0][2]), "+r"(d[0][0][3]),
        "+r"(d[0][1][0]), "+r"(d[0][1][1]), "+r"(d[0][1][2]), "+r"(d[0][1][3]),
        "+r"(d[0][2][0]), "+r"(d[0][2][1]), "+r"(d[0][2][2]), "+r"(d[0][2][3]),
        "+r"(d[0][3][0]), "+r"(d[0][3][1]), "+r"(d[0][3][2]), "+r"(d[0][3][3]),
        "+r"(d[0][4][0]), "+r"(d[0][4][1]), "+r"(d[0][4][2]), "+r"(d[0][4][3]),
        "+r"(d[0][5][0]), "+r"(d[0][5][1]), "+r"(d[0][5][2]), "+r"(d[0][5][3]),
        "+r"(d[0][6][0]), "+r"(d[0][6][1]), "+r"(d[0][6][2]), "+r"(d[0][6][3]),
        "+r"(d[0][7][0]), "+r"(d[0][7][1]), "+r"(d[0][7][2]), "+r"(d[0][7][3]),
        "+r"(d[0][8][0]), "+r"(d[0][8][1]), "+r"(d[0][8][2]), "+r"(d[0][8][3]),
        "+r"(d[0][9][0]), "+r"(d[0][9][1]), "+r"(d[0][9][2]), "+r"(d[0][9][3]),
        "+r"(d[0][10][0]), "+r"(d[0][10][1]), "+r"(d[0][10][2]), "+r"(d[0][10][3]),
        "+r"(d[0][11][0]), "+r"(d[0][11][1]), "+r"(d[0][11][2]), "+r"(d[0][11][3]),
        "+r"(d[0][12][0]), "+r"(d[0][12][1]), "+r"(d[0][12][2]), "+r"(d[0][12][3]),
        "+r"(d[0][13][0]), "+r"(d[0][13][1]), "+r"(d[0][13][2]), "+r"(d[0][13][3]),
        "+r"(d[0][14][0]), "+r"(d[0][14][1]), "+r"(d[0][14][2]), "+r"(d[0][14][3]),
        "+r"(d[0][15][0]), "+r"(d[0][15][1]), "+r"(d[0][15][2]), "+r"(d[0][15][3])
      : "l"(da), "l"(db));
#else
  __trap();
#endif
}

}  // namespace qd::cuda
