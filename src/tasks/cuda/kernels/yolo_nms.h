// The kernels behind cuda::YoloPostprocessor (tasks/cuda/detect_post.h): internal interface.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "tasks/detection.h"

namespace qd::cuda {

// One kept detection as the device writes it (boxes already mapped back through the letterbox).
struct GpuDetection {
  float x1, y1, x2, y2, score;
  int32_t class_id;
};

// Sizes, options and device buffers of one YoloPostprocessor (allocated for max_batch images).
struct YoloNmsPlan {
  // shape and options
  int max_batch = 0;
  int64_t boxes = 0;     // rows per image
  int nc = 0;            // classes; a row is cx, cy, w, h, obj, cls_0 .. cls_{nc-1}
  DType dtype = DType::kFloat32;
  bool multi_label = false;  // already false when nc == 1 (the CPU rule)
  bool agnostic = false;
  float conf_thres = 0, iou_thres = 0, max_wh = 0;
  int64_t cap = 0;       // candidate slots per image; an image with more is flagged (its count is set to -1)
  int kmax = 0;          // candidates that enter NMS: min(max_nms, cap)
  int max_det = 0;
  // device buffers
  int* counts = nullptr;              // [max_batch] candidates found (may exceed cap)
  uint64_t* keys = nullptr;           // [max_batch * cap] (~score bits << 32) | (row * nc + class)
  uint64_t* keys_sorted = nullptr;    // [max_batch * cap]
  int* seg_begin = nullptr;           // [max_batch]
  int* seg_end = nullptr;             // [max_batch]
  void* sort_temp = nullptr;
  size_t sort_temp_bytes = 0;
  float* nms_boxes = nullptr;         // [max_batch * kmax * 4] class-shifted corners
  float* nms_area = nullptr;          // [max_batch * kmax]
  int* out_counts = nullptr;          // [max_batch] kept per image; -1: more candidates than cap; kNmsPending
  GpuDetection* out_dets = nullptr;   // [max_batch * max_det]
};

// out_counts value of an image left for launch_yolo_nms_pending() (more candidates than the in-block sort takes).
constexpr int kNmsPending = -2;

// Raises the in-block sort kernel's shared-memory limit on the current device; before the first launch (each
// YoloPostprocessor calls it when created).
Status yolo_nms_init();

// CUB's scratch size for the segmented sort of max_batch segments of cap keys.
Expected<size_t> yolo_sort_temp_bytes(int max_batch, int64_t cap);
// Largest kmax the NMS kernel's shared-memory suppression mask allows (for max_det kept detections).
int yolo_nms_max_kmax(int max_det);

// Enqueues candidate filtering, the per-image sort, NMS and the mapping back for pred [n, boxes, 5 + nc] (device,
// plan.dtype) on `stream`. infos: device [n] letterbox geometries (validated by the caller), or nullptr to keep boxes
// in network-input pixels. Writes out_counts / out_dets for images 0..n-1. Does not synchronize or allocate.
// Images with too many candidates for the in-block sort are left with out_counts = kNmsPending: the caller then runs
// launch_yolo_nms_pending() with the same arguments (after reading the counts back), which finishes them.
Status launch_yolo_nms(const YoloNmsPlan& plan, const void* pred, int n, const LetterboxInfo* infos,
                       cudaStream_t stream);
Status launch_yolo_nms_pending(const YoloNmsPlan& plan, const void* pred, int n, const LetterboxInfo* infos,
                               cudaStream_t stream);

}  // namespace qd::cuda
