#include "tasks/yolo_decode.h"

#include <algorithm>
#include <cmath>

#include "core/shape.h"

namespace qd {

std::vector<Detection> yolo_candidates(const float* rows, int64_t num_boxes, int64_t row_len, int64_t image,
                                       const YoloPostprocessOptions& opts) {
  std::vector<Detection> out;
  const int64_t nc = row_len - 5;
  if (nc < 1) return out;
  const bool multi = opts.multi_label && nc > 1;
  const float conf = opts.conf_thres;
  for (int64_t b = 0; b < num_boxes; ++b) {
    const float* r = rows + b * row_len;
    const float obj = r[4];
    if (!(obj > conf)) continue;
    Detection d;
    d.x1 = r[0] - r[2] / 2;
    d.y1 = r[1] - r[3] / 2;
    d.x2 = r[0] + r[2] / 2;
    d.y2 = r[1] + r[3] / 2;
    d.image = image;
    if (multi) {
      for (int64_t c = 0; c < nc; ++c) {
        const float s = r[5 + c] * obj;
        if (s > conf) {
          d.score = s;
          d.class_id = static_cast<int>(c);
          out.push_back(d);
        }
      }
    } else {
      int64_t best = 0;
      float best_s = r[5] * obj;
      for (int64_t c = 1; c < nc; ++c) {
        const float s = r[5 + c] * obj;
        if (s > best_s) {
          best_s = s;
          best = c;
        }
      }
      if (best_s > conf) {
        d.score = best_s;
        d.class_id = static_cast<int>(best);
        out.push_back(d);
      }
    }
  }
  return out;
}

Status check_yolo_options(const YoloPostprocessOptions& o) {
  if (!(o.conf_thres >= 0 && o.conf_thres <= 1)) return invalid("confidence threshold must lie in [0, 1]");
  if (!(o.iou_thres >= 0 && o.iou_thres <= 1)) return invalid("NMS IoU threshold must lie in [0, 1]");
  if (o.max_det < 1) return invalid("max_det must be at least 1");
  if (o.max_nms < 1) return invalid("max_nms must be at least 1");
  if (!(o.max_wh > 0) || !std::isfinite(o.max_wh)) return invalid("max_wh must be a positive number");
  return Status::ok();
}

Expected<std::vector<std::vector<Detection>>> yolov5_postprocess(const Tensor& pred, const YoloPostprocessOptions& opts) {
  QD_RETURN_IF_ERROR(check_yolo_options(opts));
  if (pred.dtype() != DType::kFloat32) {
    return invalid(std::string("YOLO output must be float32, got ") + dtype_name(pred.dtype()));
  }
  if (pred.rank() != 3 || pred.shape()[2] < 6) {
    return invalid("YOLO output must be [batch, boxes, 5 + classes] with at least one class, got " +
                   shape_str(pred.shape()));
  }
  const int64_t n = pred.shape()[0], boxes = pred.shape()[1], row = pred.shape()[2];
  std::vector<std::vector<Detection>> out(static_cast<size_t>(n));
  const float* p = pred.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = yolov5_postprocess_image(p + i * boxes * row, boxes, row, i, opts);
  }
  return out;
}

std::vector<Detection> yolov5_postprocess_image(const float* rows, int64_t num_boxes, int64_t row_len, int64_t image,
                                                const YoloPostprocessOptions& opts) {
  NmsOptions nms;
  nms.iou_thres = opts.iou_thres;
  nms.max_det = opts.max_det;
  nms.max_nms = opts.max_nms;
  nms.agnostic = opts.agnostic;
  nms.max_wh = opts.max_wh;
  return batched_nms(yolo_candidates(rows, num_boxes, row_len, image, opts), nms);
}

Expected<Tensor> decode_yolov5_heads(const std::vector<Tensor>& heads, const YoloHeadSpec& spec) {
  if (heads.empty()) return invalid("no YOLO head outputs given");
  if (spec.strides.size() != heads.size() || spec.anchors.size() != heads.size()) {
    return invalid("the YOLO head spec has " + std::to_string(spec.strides.size()) + " strides and " +
                   std::to_string(spec.anchors.size()) + " anchor lists for " + std::to_string(heads.size()) +
                   " head outputs");
  }
  int64_t batch = -1, no = -1, total = 0;
  for (size_t l = 0; l < heads.size(); ++l) {
    const Tensor& h = heads[l];
    const std::string which = "YOLO head output " + std::to_string(l);
    if (h.dtype() != DType::kFloat32) return invalid(which + " must be float32, got " + dtype_name(h.dtype()));
    if (h.rank() != 4) return invalid(which + " must be [batch, anchors*(5+classes), H, W], got " + shape_str(h.shape()));
    const auto& a = spec.anchors[l];
    if (a.empty() || a.size() % 2 != 0) return invalid(which + ": anchors must be (w, h) pairs");
    if (spec.strides[l] <= 0) return invalid(which + ": stride must be positive");
    const int64_t na = static_cast<int64_t>(a.size() / 2);
    const int64_t c = h.shape()[1];
    if (c % na != 0 || c / na < 6) {
      return invalid(which + " has " + std::to_string(c) + " channels, not " + std::to_string(na) +
                     " anchors x (5 + classes)");
    }
    if (batch < 0) {
      batch = h.shape()[0];
      no = c / na;
    } else if (h.shape()[0] != batch || c / na != no) {
      return invalid(which + " (" + shape_str(h.shape()) + ") does not match the batch or class count of output 0");
    }
    total += na * h.shape()[2] * h.shape()[3];
  }
  Tensor out = QD_TRY(Tensor::make(DType::kFloat32, {batch, total, no}));
  float* o = out.data<float>();
  auto sigmoid = [](float x) { return 1.f / (1.f + std::exp(-x)); };
  for (int64_t b = 0; b < batch; ++b) {
    float* dst = o + b * total * no;
    for (size_t l = 0; l < heads.size(); ++l) {
      const Tensor& h = heads[l];
      const int64_t H = h.shape()[2], W = h.shape()[3];
      const auto& anchors = spec.anchors[l];
      const int64_t na = static_cast<int64_t>(anchors.size() / 2);
      const float stride = static_cast<float>(spec.strides[l]);
      const float* src = h.data<float>() + b * na * no * H * W;
      for (int64_t a = 0; a < na; ++a) {
        for (int64_t y = 0; y < H; ++y) {
          for (int64_t x = 0; x < W; ++x) {
            for (int64_t k = 0; k < no; ++k) dst[k] = sigmoid(src[((a * no + k) * H + y) * W + x]);
            dst[0] = (dst[0] * 2.f - 0.5f + static_cast<float>(x)) * stride;
            dst[1] = (dst[1] * 2.f - 0.5f + static_cast<float>(y)) * stride;
            const float tw = dst[2] * 2.f, th = dst[3] * 2.f;
            dst[2] = tw * tw * anchors[static_cast<size_t>(2 * a)];
            dst[3] = th * th * anchors[static_cast<size_t>(2 * a + 1)];
            dst += no;
          }
        }
      }
    }
  }
  return out;
}

Status unletterbox_detections(std::vector<Detection>& dets, const LetterboxInfo& lb) {
  if (!(lb.scale > 0) || !std::isfinite(lb.scale) || !std::isfinite(lb.pad_x) || !std::isfinite(lb.pad_y)) {
    return invalid("letterbox: scale must be positive and the padding finite");
  }
  if (lb.orig_w <= 0 || lb.orig_h <= 0) return invalid("letterbox: the original image size must be positive");
  const float w = static_cast<float>(lb.orig_w), h = static_cast<float>(lb.orig_h);
  auto clip = [](float v, float hi) { return std::min(std::max(v, 0.f), hi); };
  for (Detection& d : dets) {
    d.x1 = clip((d.x1 - lb.pad_x) / lb.scale, w);
    d.y1 = clip((d.y1 - lb.pad_y) / lb.scale, h);
    d.x2 = clip((d.x2 - lb.pad_x) / lb.scale, w);
    d.y2 = clip((d.y2 - lb.pad_y) / lb.scale, h);
  }
  return Status::ok();
}

}  // namespace qd
