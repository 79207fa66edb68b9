// Batched YOLOv5 post-processing: confidence filter + compaction, per-image sort, top-k cap, class-aware greedy NMS,
// mapping back through the letterbox. The result is the CPU's (yolo_candidates + batched_nms + unletterbox_detections
// in tasks/), detection for detection:
//  - a candidate's sort key is (~score bits) << 32 | (row * nc + class): ascending keys = descending scores, ties in
//    the CPU's candidate order (row, then class), which is what its stable sort keeps. Scores are > conf_thres >= 0,
//    so their float bits order like their values.
//  - every float operation the CPU rounds separately is an explicit _rn intrinsic (nvcc would otherwise fuse a*b+c),
//    and min / max / clip use std::min / std::max's comparisons, so IoU ties at the threshold resolve identically.
//  - NMS is the CPU's greedy loop, run by one block per image: the next unsuppressed candidate (in score order) is
//    kept, then the block's threads test it against every later candidate. Suppression flags are a bit mask in
//    shared memory.
//  - Two paths. An image with at most kSmallSort candidates (the common case) is sorted by a bitonic sort in shared
//    memory inside its NMS block: candidates + one NMS kernel, whatever the batch. An image with more is marked
//    pending (out_counts = kNmsPending) and finished by launch_yolo_nms_pending(): CUB's segmented radix sort over the
//    pending images' keys, then the NMS kernel on the sorted keys in global memory.
#include "tasks/cuda/kernels/yolo_nms.h"

#include <cuda_fp16.h>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "backends/cuda/cuda_util.h"

namespace qd::cuda {

namespace {

constexpr int kNmsThreads = 256;
constexpr int kSmallThreads = 1024;
constexpr size_t kMaxSharedBytes = 48 * 1024;  // without opting in to more
// Keys sorted in shared memory by the small path: 128 KiB of keys + the mask (opt-in shared memory: sm_80+ has 163 KiB
// per block or more).
constexpr int kSmallSort = 16384;
constexpr size_t kSmallSharedBytes = sizeof(uint64_t) * kSmallSort + sizeof(uint32_t) * (kSmallSort / 32);
// Candidates whose boxes and areas (20 bytes each) NMS keeps in shared memory, over the keys' space once sorted.
constexpr int kSmallBoxes = static_cast<int>(sizeof(uint64_t) * kSmallSort / (sizeof(float4) + sizeof(float)));

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }

// std::min / std::max on floats, NaN behaviour included.
__device__ __forceinline__ float std_min(float a, float b) { return (b < a) ? b : a; }
__device__ __forceinline__ float std_max(float a, float b) { return (a < b) ? b : a; }

__device__ __forceinline__ uint64_t make_key(float score, uint32_t idx) {
  return (static_cast<uint64_t>(~__float_as_uint(score)) << 32) | idx;
}
__device__ __forceinline__ float key_score(uint64_t key) {
  return __uint_as_float(~static_cast<uint32_t>(key >> 32));
}

// Corners of a row's box: cx -/+ w/2, cy -/+ h/2 (x / 2 == x * 0.5f exactly).
template <typename T>
__device__ __forceinline__ void row_box(const T* row, float b[4]) {
  const float cx = load(row, 0), cy = load(row, 1), hw = __fmul_rn(load(row, 2), 0.5f), hh = __fmul_rn(load(row, 3), 0.5f);
  b[0] = __fsub_rn(cx, hw);
  b[1] = __fsub_rn(cy, hh);
  b[2] = __fadd_rn(cx, hw);
  b[3] = __fadd_rn(cy, hh);
}

// ---------------------------------------------------------------- 1. candidates

// One thread per row. A row reserves its slots with one atomicAdd (after counting them), then writes its keys; the
// order of slots does not matter, the sort restores the CPU's order.
template <typename T>
__global__ void candidates_kernel(const T* __restrict__ pred, int64_t boxes, int nc, bool multi, float conf,
                                  int64_t cap, int* __restrict__ counts, uint64_t* __restrict__ keys) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int img = blockIdx.y;
  if (r >= boxes) return;
  const int64_t row_len = 5 + nc;
  const T* row = pred + (static_cast<int64_t>(img) * boxes + r) * row_len;
  const float obj = load(row, 4);
  if (!(obj > conf)) return;
  const uint32_t base = static_cast<uint32_t>(r) * static_cast<uint32_t>(nc);
  uint64_t* out = keys + static_cast<int64_t>(img) * cap;
  if (multi) {
    int n = 0;
    for (int c = 0; c < nc; ++c) n += __fmul_rn(load(row, 5 + c), obj) > conf;
    if (n == 0) return;
    int64_t slot = atomicAdd(counts + img, n);
    for (int c = 0; c < nc && slot < cap; ++c) {
      const float s = __fmul_rn(load(row, 5 + c), obj);
      if (s > conf) out[slot++] = make_key(s, base + c);
    }
  } else {
    int best = 0;
    float best_s = __fmul_rn(load(row, 5), obj);
    for (int c = 1; c < nc; ++c) {
      const float s = __fmul_rn(load(row, 5 + c), obj);
      if (s > best_s) best_s = s, best = c;
    }
    if (!(best_s > conf)) return;
    const int64_t slot = atomicAdd(counts + img, 1);
    if (slot < cap) out[slot] = make_key(best_s, base + best);
  }
}

// ---------------------------------------------------------------- 2. segments

// A pending image i sorts keys [i * cap, i * cap + count); every other image (done by the small path, or n..max_batch-1)
// is an empty segment, so that the sort always runs with the sizes its scratch memory was measured for.
__global__ void segments_kernel(const int* __restrict__ counts, const int* __restrict__ status, int n, int max_batch,
                                int64_t cap, int* __restrict__ begin, int* __restrict__ end) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= max_batch) return;
  const int64_t b = static_cast<int64_t>(i) * cap;
  const int64_t c = i < n && status[i] == kNmsPending ? min(static_cast<int64_t>(counts[i]), cap) : 0;
  begin[i] = static_cast<int>(b);
  end[i] = static_cast<int>(b + c);
}

// ---------------------------------------------------------------- 3. NMS

// First index in [from, k) whose suppression bit is clear, or k.
__device__ __forceinline__ int next_unsuppressed(const uint32_t* mask, int from, int k) {
  if (from >= k) return k;
  int w = from >> 5;
  uint32_t bits = ~mask[w] & (~0u << (from & 31));
  while (bits == 0) {
    if (++w << 5 >= k) return k;
    bits = ~mask[w];
  }
  const int i = (w << 5) + __ffs(bits) - 1;
  return i < k ? i : k;
}

struct NmsArgs {
  int64_t boxes, cap;
  int nc, kmax, max_det;
  float iou_thres, max_wh;
  bool agnostic;
  const uint64_t* keys;  // in slot order
  uint64_t* keys_sorted;  // CUB's output; the small path parks its sorted keys there too
  const int* counts;
  float* nms_boxes;
  float* nms_area;
  const LetterboxInfo* infos;
  int* out_counts;
  GpuDetection* out_dets;
};

// ultralytics' scale_boxes + clip_boxes as unletterbox_detections computes it: clip((v - pad) / scale, 0, hi).
__device__ __forceinline__ float unletterbox(float v, float pad, float scale, float hi) {
  return std_min(std_max(__fdiv_rn(__fsub_rn(v, pad), scale), 0.f), hi);
}

// Greedy NMS of image `img` over its k best candidates, `keys` sorted ascending (best first); mask: (k + 31) / 32
// words of shared memory; boxes / area: k slots for the candidates' shifted corners and areas (shared memory when
// they fit, else the image's global scratch). Writes out_counts[img] and its detections. Called by every thread of
// the block.
template <typename T>
__device__ void greedy_nms(const T* __restrict__ pred, const NmsArgs& a, int img, const uint64_t* keys, int k,
                           uint32_t* mask, float4* boxes, float* area) {
  const int tid = threadIdx.x;
  const int64_t row_len = 5 + a.nc;
  const T* image = pred + static_cast<int64_t>(img) * a.boxes * row_len;

  // Gather the candidates in score order, shifted by class * max_wh (batched_nms), with their areas (nms).
  for (int r = tid; r < k; r += blockDim.x) {
    const uint32_t idx = static_cast<uint32_t>(keys[r]);
    const int cls = static_cast<int>(idx % static_cast<uint32_t>(a.nc));
    float b[4];
    row_box(image + static_cast<int64_t>(idx / static_cast<uint32_t>(a.nc)) * row_len, b);
    const float off = a.agnostic ? 0.f : __fmul_rn(static_cast<float>(cls), a.max_wh);
    const float4 s = make_float4(__fadd_rn(b[0], off), __fadd_rn(b[1], off), __fadd_rn(b[2], off), __fadd_rn(b[3], off));
    boxes[r] = s;
    area[r] = __fmul_rn(__fsub_rn(s.z, s.x), __fsub_rn(s.w, s.y));
  }
  for (int w = tid; w < (k + 31) / 32; w += blockDim.x) mask[w] = 0;
  __syncthreads();

  const LetterboxInfo* lb = a.infos ? a.infos + img : nullptr;
  GpuDetection* out = a.out_dets + static_cast<int64_t>(img) * a.max_det;
  int kept = 0;
  // Every thread walks the same sequence (the mask is only read after a barrier), so the loop and its barriers are
  // uniform across the block.
  // The loop only records which candidates are kept (in out[].class_id); the detections are written afterwards, in
  // parallel.
  for (int i = next_unsuppressed(mask, 0, k); i < k && kept < a.max_det; i = next_unsuppressed(mask, i + 1, k)) {
    if (tid == 0) out[kept].class_id = i;
    ++kept;
    const float4 bi = boxes[i];
    const float ai = area[i];
    for (int j = i + 1 + tid; j < k; j += blockDim.x) {
      if (mask[j >> 5] & (1u << (j & 31))) continue;
      const float4 bj = boxes[j];
      // nms()'s expression order: inter / (area_i + area_j - inter), suppress when > iou_thres.
      const float w = std_max(0.f, __fsub_rn(std_min(bi.z, bj.z), std_max(bi.x, bj.x)));
      const float h = std_max(0.f, __fsub_rn(std_min(bi.w, bj.w), std_max(bi.y, bj.y)));
      const float inter = __fmul_rn(w, h);
      const float ovr = __fdiv_rn(inter, __fsub_rn(__fadd_rn(ai, area[j]), inter));
      if (ovr > a.iou_thres) atomicOr(&mask[j >> 5], 1u << (j & 31));
    }
    __syncthreads();
  }
  for (int r = tid; r < kept; r += blockDim.x) {  // thread 0's writes above are visible after the last barrier
    const uint64_t key = keys[out[r].class_id];
    const uint32_t idx = static_cast<uint32_t>(key);
    float b[4];
    row_box(image + static_cast<int64_t>(idx / static_cast<uint32_t>(a.nc)) * row_len, b);
    if (lb) {
      const float w = static_cast<float>(lb->orig_w), h = static_cast<float>(lb->orig_h);
      b[0] = unletterbox(b[0], lb->pad_x, lb->scale, w);
      b[1] = unletterbox(b[1], lb->pad_y, lb->scale, h);
      b[2] = unletterbox(b[2], lb->pad_x, lb->scale, w);
      b[3] = unletterbox(b[3], lb->pad_y, lb->scale, h);
    }
    out[r] = GpuDetection{b[0], b[1], b[2], b[3], key_score(key), static_cast<int32_t>(idx % a.nc)};
  }
  if (tid == 0) a.out_counts[img] = kept;
}

// The pending images' NMS on keys sorted by CUB (global memory); every other image is done already.
template <typename T>
__global__ void __launch_bounds__(kNmsThreads) nms_kernel(const T* __restrict__ pred, NmsArgs a) {
  extern __shared__ uint32_t mask[];
  const int img = blockIdx.x;
  if (a.out_counts[img] != kNmsPending) return;
  const int k = min(a.counts[img], a.kmax);  // the top-k cap (max_nms)
  greedy_nms(pred, a, img, a.keys_sorted + static_cast<int64_t>(img) * a.cap, k, mask,
             reinterpret_cast<float4*>(a.nms_boxes) + static_cast<int64_t>(img) * a.kmax,
             a.nms_area + static_cast<int64_t>(img) * a.kmax);
}

// The small path: an image's keys (in slot order) sorted in shared memory by a bitonic sort over the next power of
// two (padding keys sort last), then NMS. An image with more than kSmallSort candidates is left pending, one with
// more than cap is flagged for the CPU (-1).
template <typename T>
__global__ void __launch_bounds__(kSmallThreads) nms_small_kernel(const T* __restrict__ pred, NmsArgs a) {
  extern __shared__ __align__(16) uint64_t sorted[];  // [kSmallSort], then the mask
  const int img = blockIdx.x;
  const int tid = threadIdx.x;
  const int count = a.counts[img];
  if (count > a.cap || count > kSmallSort) {
    if (tid == 0) a.out_counts[img] = count > a.cap ? -1 : kNmsPending;
    return;
  }
  int p = 1;
  while (p < count) p <<= 1;
  const uint64_t* keys = a.keys + static_cast<int64_t>(img) * a.cap;
  for (int i = tid; i < p; i += blockDim.x) sorted[i] = i < count ? keys[i] : ~uint64_t{0};
  __syncthreads();
  for (int size = 2; size <= p; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = tid; i < p; i += blockDim.x) {
        const int j = i ^ stride;
        if (j > i) {
          const uint64_t x = sorted[i], y = sorted[j];
          if ((x > y) == ((i & size) == 0)) sorted[i] = y, sorted[j] = x;
        }
      }
      __syncthreads();
    }
  }
  const int k = min(count, a.kmax);
  uint32_t* mask = reinterpret_cast<uint32_t*>(sorted + kSmallSort);
  if (k > kSmallBoxes) {
    greedy_nms(pred, a, img, sorted, k, mask,
               reinterpret_cast<float4*>(a.nms_boxes) + static_cast<int64_t>(img) * a.kmax,
               a.nms_area + static_cast<int64_t>(img) * a.kmax);
    return;
  }
  // The boxes fit where the keys are: the sorted keys move to the image's global slots first (the loop reads boxes
  // for every candidate it tests, keys only for the kept ones).
  uint64_t* moved = a.keys_sorted + static_cast<int64_t>(img) * a.cap;
  for (int i = tid; i < k; i += blockDim.x) moved[i] = sorted[i];
  __syncthreads();
  float4* boxes = reinterpret_cast<float4*>(sorted);
  greedy_nms(pred, a, img, moved, k, mask, boxes, reinterpret_cast<float*>(boxes + k));
}

NmsArgs nms_args(const YoloNmsPlan& p, const LetterboxInfo* infos) {
  return NmsArgs{p.boxes,  p.cap,         p.nc,     p.kmax,      p.max_det, p.iou_thres, p.max_wh,   p.agnostic,
                 p.keys,   p.keys_sorted, p.counts, p.nms_boxes, p.nms_area, infos,      p.out_counts, p.out_dets};
}

template <typename T>
Status launch_typed(const YoloNmsPlan& p, const T* pred, int n, const LetterboxInfo* infos, cudaStream_t stream) {
  QD_CUDA_TRY(cudaMemsetAsync(p.counts, 0, sizeof(int) * static_cast<size_t>(p.max_batch), stream));
  {
    constexpr int kThreads = 256;
    const dim3 grid(static_cast<unsigned>(ceil_div(p.boxes, kThreads)), static_cast<unsigned>(n));
    candidates_kernel<T><<<grid, kThreads, 0, stream>>>(pred, p.boxes, p.nc, p.multi_label, p.conf_thres, p.cap,
                                                        p.counts, p.keys);
    QD_CUDA_TRY(cudaGetLastError());
  }
  const NmsArgs a = nms_args(p, infos);
  nms_small_kernel<T><<<static_cast<unsigned>(n), kSmallThreads, kSmallSharedBytes, stream>>>(pred, a);
  QD_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

template <typename T>
Status launch_pending_typed(const YoloNmsPlan& p, const T* pred, int n, const LetterboxInfo* infos,
                            cudaStream_t stream) {
  segments_kernel<<<static_cast<unsigned>(ceil_div(p.max_batch, 128)), 128, 0, stream>>>(
      p.counts, p.out_counts, n, p.max_batch, p.cap, p.seg_begin, p.seg_end);
  QD_CUDA_TRY(cudaGetLastError());
  size_t temp_bytes = p.sort_temp_bytes;
  QD_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(p.sort_temp, temp_bytes, p.keys, p.keys_sorted,
                                                      static_cast<int>(p.max_batch * p.cap), p.max_batch, p.seg_begin,
                                                      p.seg_end, 0, 64, stream));
  const NmsArgs a = nms_args(p, infos);
  const size_t shared = sizeof(uint32_t) * static_cast<size_t>((p.kmax + 31) / 32);
  nms_kernel<T><<<static_cast<unsigned>(n), kNmsThreads, shared, stream>>>(pred, a);
  QD_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace

Expected<size_t> yolo_sort_temp_bytes(int max_batch, int64_t cap) {
  size_t bytes = 0;
  QD_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(nullptr, bytes, static_cast<const uint64_t*>(nullptr),
                                                      static_cast<uint64_t*>(nullptr),
                                                      static_cast<int>(max_batch * cap), max_batch,
                                                      static_cast<const int*>(nullptr),
                                                      static_cast<const int*>(nullptr), 0, 64));
  return bytes;
}

Status yolo_nms_init() {
  for (const void* k : {reinterpret_cast<const void*>(nms_small_kernel<float>),
                        reinterpret_cast<const void*>(nms_small_kernel<__half>)}) {
    QD_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSmallSharedBytes)));
  }
  return Status::ok();
}

int yolo_nms_max_kmax(int /*max_det*/) { return static_cast<int>(kMaxSharedBytes / sizeof(uint32_t) * 32); }

namespace {
template <class Launch>
Status dispatch(const YoloNmsPlan& p, const void* pred, int n, Launch&& launch) {
  if (n < 1 || n > p.max_batch) {
    return invalid("GPU YOLO post-processing: batch " + std::to_string(n) + " outside 1.." +
                   std::to_string(p.max_batch));
  }
  if (!pred) return invalid("GPU YOLO post-processing: no prediction tensor");
  switch (p.dtype) {
    case DType::kFloat32: return launch(static_cast<const float*>(pred));
    case DType::kFloat16: return launch(static_cast<const __half*>(pred));
    default: return unsupported(std::string("GPU YOLO post-processing: prediction type ") + dtype_name(p.dtype));
  }
}
}  // namespace

Status launch_yolo_nms(const YoloNmsPlan& p, const void* pred, int n, const LetterboxInfo* infos,
                       cudaStream_t stream) {
  return dispatch(p, pred, n, [&](auto* typed) { return launch_typed(p, typed, n, infos, stream); });
}

Status launch_yolo_nms_pending(const YoloNmsPlan& p, const void* pred, int n, const LetterboxInfo* infos,
                               cudaStream_t stream) {
  return dispatch(p, pred, n, [&](auto* typed) { return launch_pending_typed(p, typed, n, infos, stream); });
}

}  // namespace qd::cuda
