// A YOLOv5 detector around an Engine: letterbox + normalize -> run -> decode (+ heads) -> NMS -> original pixels.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "tasks/detection.h"
#include "tasks/image_io.h"
#include "tasks/preprocess.h"
#include "tasks/yolo_decode.h"

namespace qd {

struct DetectorOptions {
  LetterboxOptions letterbox;  // width/height default to the model's input size when it is fixed
  TensorOptions tensor;        // the input's values (--preprocess mean/std/order); default x / 255, RGB, NCHW
  YoloPostprocessOptions post;
};

// Sums over detect() calls. On the CPU path every stage is wall time on the host (the engine's copies count as
// inference). The GPU pipeline times its stages with events on its stream: preprocess and postprocess are then the
// letterbox kernel and the NMS kernels alone, and the host<->device copies around them (decoded pixels up,
// detections down) are upload_ms and download_ms.
struct DetectTimings {
  double preprocess_ms = 0, infer_ms = 0, postprocess_ms = 0;
  double upload_ms = 0, download_ms = 0;
  int64_t images = 0, batches = 0;
};

// Per-image and per-batch lines for `detect` and `eval`: decode (wall, host threads) then every stage, and the share
// of pre- plus post-processing in the inference time.
std::string format_timings(const DetectTimings& t, double decode_ms);

// Another implementation of Detector::detect() (same contract: detections per image in its own pixels, timings
// added to), e.g. cuda::DetectPipeline::detect_fn() (tasks/cuda/detect_pipeline.h): letterbox and NMS on the GPU
// around a CUDA engine that takes device inputs. tasks/ stays free of CUDA: the detector only sees this function.
using DetectFn = std::function<Expected<std::vector<std::vector<Detection>>>(const std::vector<const Image*>&,
                                                                             DetectTimings*)>;

class Detector {
 public:
  // Checks that the engine looks like a YOLOv5 export: one image input [N,3,H,W] and either one decoded output
  // [N, boxes, 5+nc] or three raw heads [N, 3*(5+nc), H/s, W/s].
  static Expected<Detector> create(Engine* engine, DetectorOptions opt);

  int num_classes() const { return num_classes_; }
  // The options with the letterbox size resolved from the model (what a device path must reproduce).
  const DetectorOptions& options() const { return opt_; }
  // True when the model outputs the three raw heads (decoded on the CPU) instead of [N, boxes, 5+nc].
  bool raw_heads() const { return heads_; }
  // Routes detect() through `fn` (an empty function: back to the CPU path). preprocess() and postprocess() stay on
  // the CPU either way (calibration and sensitivity analysis use them).
  void set_device_path(DetectFn fn) { device_path_ = std::move(fn); }
  bool has_device_path() const { return static_cast<bool>(device_path_); }
  int input_width() const { return opt_.letterbox.width; }
  int input_height() const { return opt_.letterbox.height; }
  // Detections per image, boxes in each image's own pixels, best first.
  Expected<std::vector<std::vector<Detection>>> detect(const std::vector<const Image*>& images,
                                                       DetectTimings* timings = nullptr);
  // The letterbox + tensor step alone (also used by calibration, so it sees exactly what inference sees).
  Expected<Tensor> preprocess(const std::vector<const Image*>& images, std::vector<LetterboxInfo>* infos) const;
  // The step after inference alone: decode (heads) + NMS + unletterbox, one list per image of the batch (also used by
  // sensitivity analysis, which runs the graphs itself).
  Expected<std::vector<std::vector<Detection>>> postprocess(const std::vector<Tensor>& outputs,
                                                            const std::vector<LetterboxInfo>& infos) const;

 private:
  Detector(Engine* e, DetectorOptions o) : engine_(e), opt_(std::move(o)) {}
  Engine* engine_;
  DetectorOptions opt_;
  int num_classes_ = 0;
  bool heads_ = false;
  DetectFn device_path_;
};

// Class names for a model with nc classes: Fashion-MNIST's for 10, COCO's for 80, "class N" otherwise; or the lines
// of a text file.
Expected<std::vector<std::string>> class_names(const std::string& names_file, int nc);

}  // namespace qd
