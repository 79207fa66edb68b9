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
#include "backends/cuda/kernels/yolo_nms.h"

#include <cuda_fp16.h>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "backends/cuda/cuda_util.h"

namespace qd::cuda {

namespace {

constexpr int kNmsThreads = 256;
constexpr size_t kMaxSharedBytes = 48 * 1024;  // without opting in to more

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

// Image i sorts keys [i * cap, i * cap + min(count, cap)); images n..max_batch-1 are empty segments, so that the sort
// always runs with the sizes its scratch memory was measured for.
__global__ void segments_kernel(const int* __restrict__ counts, int n, int max_batch, int64_t cap,
                                int* __restrict__ begin, int* __restrict__ end) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= max_batch) return;
  const int64_t b = static_cast<int64_t>(i) * cap;
  const int64_t c = i < n ? min(static_cast<int64_t>(counts[i]), cap) : 0;
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
  const uint64_t* keys_sorted;
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

template <typename T>
__global__ void __launch_bounds__(kNmsThreads) nms_kernel(const T* __restrict__ pred, NmsArgs a) {
  extern __shared__ uint32_t mask[];
  const int img = blockIdx.x;
  const int tid = threadIdx.x;
  const int count = a.counts[img];
  if (count > a.cap) {  // did not fit: the host redoes this image on the CPU
    if (tid == 0) a.out_counts[img] = -1;
    return;
  }
  const int k = min(count, a.kmax);  // the top-k cap (max_nms)
  const int64_t row_len = 5 + a.nc;
  const T* image = pred + static_cast<int64_t>(img) * a.boxes * row_len;
  const uint64_t* keys = a.keys_sorted + static_cast<int64_t>(img) * a.cap;
  float4* boxes = reinterpret_cast<float4*>(a.nms_boxes) + static_cast<int64_t>(img) * a.kmax;
  float* area = a.nms_area + static_cast<int64_t>(img) * a.kmax;

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
  for (int i = next_unsuppressed(mask, 0, k); i < k && kept < a.max_det; i = next_unsuppressed(mask, i + 1, k)) {
    if (tid == 0) {
      const uint64_t key = keys[i];
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
      out[kept] = GpuDetection{b[0], b[1], b[2], b[3], key_score(key), static_cast<int32_t>(idx % a.nc)};
    }
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
  if (tid == 0) a.out_counts[img] = kept;
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
  segments_kernel<<<static_cast<unsigned>(ceil_div(p.max_batch, 128)), 128, 0, stream>>>(
      p.counts, n, p.max_batch, p.cap, p.seg_begin, p.seg_end);
  QD_CUDA_TRY(cudaGetLastError());
  size_t temp_bytes = p.sort_temp_bytes;
  QD_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(p.sort_temp, temp_bytes, p.keys, p.keys_sorted,
                                                      static_cast<int>(p.max_batch * p.cap), p.max_batch, p.seg_begin,
                                                      p.seg_end, 0, 64, stream));
  NmsArgs a{p.boxes,     p.cap,         p.nc,   p.kmax,       p.max_det,   p.iou_thres, p.max_wh, p.agnostic,
            p.keys_sorted, p.counts,    p.nms_boxes, p.nms_area, infos, p.out_counts, p.out_dets};
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

int yolo_nms_max_kmax(int /*max_det*/) { return static_cast<int>(kMaxSharedBytes / sizeof(uint32_t) * 32); }

Status launch_yolo_nms(const YoloNmsPlan& p, const void* pred, int n, const LetterboxInfo* infos,
                       cudaStream_t stream) {
  if (n < 1 || n > p.max_batch) {
    return invalid("GPU YOLO post-processing: batch " + std::to_string(n) + " outside 1.." +
                   std::to_string(p.max_batch));
  }
  if (!pred) return invalid("GPU YOLO post-processing: no prediction tensor");
  switch (p.dtype) {
    case DType::kFloat32: return launch_typed(p, static_cast<const float*>(pred), n, infos, stream);
    case DType::kFloat16: return launch_typed(p, static_cast<const __half*>(pred), n, infos, stream);
    default: return unsupported(std::string("GPU YOLO post-processing: prediction type ") + dtype_name(p.dtype));
  }
}

}  // namespace qd::cuda
