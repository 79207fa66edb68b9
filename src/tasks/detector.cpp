#include "tasks/detector.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/file_io.h"
#include "runtime/io_format.h"
#include "tasks/fmnist.h"

namespace qd {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

const char* const kCoco80[80] = {
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors", "teddy bear",
    "hair drier", "toothbrush"};
}  // namespace

Expected<Detector> Detector::create(Engine* engine, DetectorOptions opt) {
  const auto& ins = engine->inputs();
  const auto& outs = engine->outputs();
  if (ins.size() != 1 || ins[0].shape.size() != 4 || ins[0].shape[1] != 3) {
    return invalid("a detector needs one image input [N,3,H,W]; this model's inputs do not look like that");
  }
  Detector d(engine, std::move(opt));
  if (ins[0].shape[2] > 0 && ins[0].shape[3] > 0) {
    d.opt_.letterbox.height = static_cast<int>(ins[0].shape[2]);
    d.opt_.letterbox.width = static_cast<int>(ins[0].shape[3]);
  }
  if (outs.size() == 1 && outs[0].shape.size() == 3 && outs[0].shape[2] > 5) {
    d.num_classes_ = static_cast<int>(outs[0].shape[2] - 5);
  } else if (outs.size() == 3 && outs[0].shape.size() == 4 && outs[0].shape[1] % 3 == 0 && outs[0].shape[1] > 15) {
    d.num_classes_ = static_cast<int>(outs[0].shape[1] / 3 - 5);
    d.heads_ = true;
  } else {
    return invalid("a YOLOv5 detector has one output [N, boxes, 5+nc] or three heads [N, 3*(5+nc), H/s, W/s]; "
                   "this model has " + std::to_string(outs.size()) + " output(s)");
  }
  return d;
}

Expected<Tensor> Detector::preprocess(const std::vector<const Image*>& images, std::vector<LetterboxInfo>* infos) const {
  std::vector<Image> boxed(images.size());
  infos->resize(images.size());
  for (size_t i = 0; i < images.size(); ++i) boxed[i] = QD_TRY(letterbox(*images[i], opt_.letterbox, &(*infos)[i]));
  std::vector<const Image*> ptrs;
  for (const auto& b : boxed) ptrs.push_back(&b);
  return images_to_tensor(ptrs, opt_.tensor);
}

Expected<std::vector<std::vector<Detection>>> Detector::detect(const std::vector<const Image*>& images,
                                                               DetectTimings* timings) {
  if (device_path_) return device_path_(images, timings);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<LetterboxInfo> infos;
  Tensor x = QD_TRY(preprocess(images, &infos));
  const double pre = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> outs = QD_TRY(engine_->run({{engine_->inputs()[0].name, x}}));
  for (size_t k = 0; k < outs.size() && k < engine_->outputs().size(); ++k) {  // e.g. an fp16 output binding
    if (outs[k].dtype() != DType::kFloat32) outs[k] = QD_TRY(from_binding_format(outs[k], engine_->outputs()[k]));
  }
  const double infer = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  auto dets = QD_TRY(postprocess(outs, infos));
  if (timings) {
    timings->preprocess_ms += pre;
    timings->infer_ms += infer;
    timings->postprocess_ms += ms_since(t0);
    timings->images += static_cast<int64_t>(images.size());
    timings->batches += 1;
  }
  return dets;
}

std::string format_timings(const DetectTimings& t, double decode_ms) {
  const bool copies = t.upload_ms > 0 || t.download_ms > 0;  // the GPU pipeline times them apart
  std::string out;
  char buf[320];
  auto line = [&](const std::string& what, double k) {
    if (copies) {
      std::snprintf(buf, sizeof buf, "%s: decode %.3f ms, upload %.3f ms, preprocess %.3f ms, inference %.3f ms, "
                    "postprocess %.3f ms, download %.3f ms\n", what.c_str(), decode_ms / k, t.upload_ms / k,
                    t.preprocess_ms / k, t.infer_ms / k, t.postprocess_ms / k, t.download_ms / k);
    } else {
      std::snprintf(buf, sizeof buf, "%s: decode %.3f ms, preprocess %.3f ms, inference %.3f ms, postprocess %.3f ms\n",
                    what.c_str(), decode_ms / k, t.preprocess_ms / k, t.infer_ms / k, t.postprocess_ms / k);
    }
    out += buf;
  };
  const double n = static_cast<double>(std::max<int64_t>(t.images, 1));
  const double nb = static_cast<double>(std::max<int64_t>(t.batches, 1));
  line("per image (" + std::to_string(t.images) + ")", n);
  std::snprintf(buf, sizeof buf, "per batch (%lld, %.1f images each)", static_cast<long long>(t.batches), n / nb);
  line(buf, nb);
  if (t.infer_ms > 0) {
    const double share = 100 * (t.preprocess_ms + t.postprocess_ms) / t.infer_ms;
    if (copies) {
      std::snprintf(buf, sizeof buf, "pre- + post-processing: %.1f%% of inference (%.1f%% with the copies)\n", share,
                    100 * (t.preprocess_ms + t.postprocess_ms + t.upload_ms + t.download_ms) / t.infer_ms);
    } else {
      std::snprintf(buf, sizeof buf, "pre- + post-processing: %.1f%% of inference\n", share);
    }
    out += buf;
  }
  return out;
}

Expected<std::vector<std::vector<Detection>>> Detector::postprocess(const std::vector<Tensor>& outputs,
                                                                    const std::vector<LetterboxInfo>& infos) const {
  Tensor pred = heads_ ? QD_TRY(decode_yolov5_heads(outputs)) : outputs[0];
  auto dets = QD_TRY(yolov5_postprocess(pred, opt_.post));
  if (dets.size() != infos.size()) return invalid("postprocess: the batch and the letterbox list differ in size");
  for (size_t i = 0; i < dets.size(); ++i) QD_RETURN_IF_ERROR(unletterbox_detections(dets[i], infos[i]));
  return dets;
}

Expected<std::vector<std::string>> class_names(const std::string& names_file, int nc) {
  std::vector<std::string> names;
  if (!names_file.empty()) {
    std::string text = QD_TRY(read_file(names_file, 1 << 20));
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) names.push_back(line);
      pos = end + 1;
    }
    if (static_cast<int>(names.size()) < nc) {
      return invalid(names_file + " has " + std::to_string(names.size()) + " names; the model has " +
                     std::to_string(nc) + " classes");
    }
    return names;
  }
  for (int i = 0; i < nc; ++i) {
    if (nc == 10) names.push_back(fmnist_class_names()[i]);
    else if (nc == 80) names.push_back(kCoco80[i]);
    else names.push_back("class " + std::to_string(i));
  }
  return names;
}

}  // namespace qd
