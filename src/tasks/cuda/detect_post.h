// Batched YOLOv5 post-processing on the GPU: from the decoded output [N, boxes, 5+nc] (fp32 or fp16, on the device)
// to each image's detections in its own pixels, copied back to the host. Per image: confidence filter (obj * cls,
// best-class or multi-label), candidate compaction, sort by score, the max_nms cap, class-aware NMS, max_det, mapping
// through the letterbox. Two kernels when every image has at most 16,384 candidates (sorted in shared memory);
// images with more are finished by a CUB sort in a second round trip inside collect() (kernels/yolo_nms.h). The detections are the CPU path's (yolov5_postprocess + unletterbox_detections in
// tasks/yolo_decode.h), same boxes, scores, classes and order: the options are the same YoloPostprocessOptions.
//
// Use:
//   auto post = QD_TRY(cuda::YoloPostprocessor::create({max_batch, boxes, nc, DType::kFloat16, opts}));
//   ... enqueue the engine writing d_pred on `stream` ...
//   QD_RETURN_IF_ERROR(post->enqueue(d_pred, n, infos.data(), stream));   // asynchronous
//   auto dets = QD_TRY(post->collect());                                  // waits; one list per image
// Models whose output is the three raw heads need decode_yolov5_heads first (CPU) — the GPU path takes the decoded
// output only. One YoloPostprocessor per stream (or thread).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "tasks/detection.h"
#include "tasks/yolo_decode.h"

namespace qd::cuda {

struct YoloGpuConfig {
  int max_batch = 1;
  int64_t boxes = 0;       // rows per image
  int num_classes = 0;     // nc: a row holds 5 + nc values
  DType dtype = DType::kFloat32;  // of the prediction tensor: kFloat32 or kFloat16
  YoloPostprocessOptions post;
  // Candidate slots per image. 0 (the default): every possible candidate (boxes, or boxes * nc with multi_label), so
  // the result is always the CPU's. A smaller number saves device memory (8 bytes x 2 per slot per image); an image
  // with more candidates than that is redone on the CPU from the prediction tensor (same result, slower).
  int64_t max_candidates = 0;
};

class YoloPostprocessor {
 public:
  // Validates the config (the same option checks as the CPU path) and allocates device and pinned memory for
  // max_batch images.
  static Expected<std::unique_ptr<YoloPostprocessor>> create(const YoloGpuConfig& config);
  ~YoloPostprocessor();
  YoloPostprocessor(const YoloPostprocessor&) = delete;
  YoloPostprocessor& operator=(const YoloPostprocessor&) = delete;

  const YoloGpuConfig& config() const { return cfg_; }
  size_t device_bytes() const { return device_bytes_; }

  // Enqueues the work for d_pred (device, [n, boxes, 5 + nc] of config().dtype, n <= max_batch) on `stream`, and the
  // copy of the results into pinned memory. infos: n letterbox geometries (the ImagePreprocessor's) to map boxes to
  // original pixels and clip them, or nullptr to keep them in network-input pixels. Does not wait for the device.
  // collect() must come before the next enqueue().
  // before_download (optional): recorded on `stream` after the kernels, before the copy of the results.
  Status enqueue(const void* d_pred, int n, const LetterboxInfo* infos, cudaStream_t stream,
                 cudaEvent_t before_download = nullptr);
  // Waits for the last enqueue(); one list per image, best first, Detection::image = index in the batch.
  // d_pred must still hold that batch: an image with more candidates than max_candidates is redone from it.
  Expected<std::vector<std::vector<Detection>>> collect();
  // enqueue() + collect().
  Expected<std::vector<std::vector<Detection>>> run(const void* d_pred, int n, const LetterboxInfo* infos,
                                                    cudaStream_t stream);

 private:
  YoloPostprocessor() = default;
  Status init();
  Status download();  // enqueues the copy of the results to pinned memory and records `done`
  Expected<std::vector<Detection>> cpu_fallback(int image) const;

  YoloGpuConfig cfg_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  size_t device_bytes_ = 0;
};

}  // namespace qd::cuda
