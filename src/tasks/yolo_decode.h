// YOLOv5 post-processing on the CPU: raw Detect-head decoding, confidence filtering + class-aware NMS (ultralytics'
// non_max_suppression), and mapping boxes from the letterboxed network input back to the original image.
// These are the reference semantics for the batched GPU versions.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "tasks/detection.h"
#include "tasks/nms.h"

namespace qd {

struct YoloPostprocessOptions {
  float conf_thres = 0.25f;  // ultralytics val.py uses 0.001, detect.py 0.25
  float iou_thres = 0.45f;   // val.py 0.6 (0.65 for --save-json runs), detect.py 0.45
  bool multi_label = false;  // true: every class with obj*cls > conf_thres is a detection (val.py); else best class
  bool agnostic = false;     // one NMS over all classes
  int max_det = 300;
  int max_nms = 30000;
  float max_wh = 7680.f;
};

// Range checks of the options (thresholds in [0, 1], max_det / max_nms >= 1, max_wh > 0); the GPU path uses them too.
Status check_yolo_options(const YoloPostprocessOptions& opts);

// The confidence step for one image. rows is [num_boxes][row_len] decoded predictions
// (cx, cy, w, h, obj, cls_0 .. cls_{nc-1}) in input pixels, nc = row_len - 5 >= 1.
// A row is a candidate when obj > conf_thres; its class scores become obj * cls (float). With multi_label (and
// nc > 1) every class with obj*cls > conf_thres gives a detection, row by row then class by class; otherwise the best
// class (the first on ties) does, when obj*cls > conf_thres. Boxes become corners cx -/+ w/2, cy -/+ h/2.
std::vector<Detection> yolo_candidates(const float* rows, int64_t num_boxes, int64_t row_len, int64_t image,
                                       const YoloPostprocessOptions& opts);

// One image's detections: yolo_candidates() then batched_nms() with the options' NMS settings (opts as
// check_yolo_options() accepts them).
std::vector<Detection> yolov5_postprocess_image(const float* rows, int64_t num_boxes, int64_t row_len, int64_t image,
                                                const YoloPostprocessOptions& opts);

// ultralytics' non_max_suppression for pred [N, boxes, 5+nc] float32: yolov5_postprocess_image() per image.
// Returns one list per image (Detection::image = its batch index), best first, boxes in input pixels.
Expected<std::vector<std::vector<Detection>>> yolov5_postprocess(const Tensor& pred, const YoloPostprocessOptions& opts);

// Geometry of YOLOv5's Detect head: one stride and one anchor list (w, h pairs in input pixels) per output level.
struct YoloHeadSpec {
  std::vector<int> strides = {8, 16, 32};
  std::vector<std::vector<float>> anchors = {
      {10, 13, 16, 30, 33, 23}, {30, 61, 62, 45, 59, 119}, {116, 90, 156, 198, 373, 326}};
};

// Decodes raw head outputs as YOLOv5 (v6) Detect does in eval mode. heads[l] is [N, na*(5+nc), H, W] float32 (the
// 1x1 conv output, before sigmoid), na = anchors[l].size() / 2. Each value goes through a sigmoid s, then
// x = (s*2 - 0.5 + grid_x) * stride, y likewise, w = (s*2)^2 * anchor_w, h likewise; obj and classes stay s.
// Returns [N, sum_l na*H*W, 5+nc] ordered level, anchor, row, column: the layout of the exported model's output.
Expected<Tensor> decode_yolov5_heads(const std::vector<Tensor>& heads, const YoloHeadSpec& spec = {});

// Maps boxes from the letterboxed input to the original image: (v - pad) / scale, then clipped to [0, orig_w] x
// [0, orig_h] (ultralytics' scale_boxes + clip_boxes). Errors when the letterbox is invalid.
Status unletterbox_detections(std::vector<Detection>& dets, const LetterboxInfo& lb);

}  // namespace qd
