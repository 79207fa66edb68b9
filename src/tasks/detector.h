// A YOLOv5 detector around an Engine: letterbox + normalize -> run -> decode (+ heads) -> NMS -> original pixels.
#pragma once

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
  YoloPostprocessOptions post;
};

struct DetectTimings {
  double preprocess_ms = 0, infer_ms = 0, postprocess_ms = 0;
};

class Detector {
 public:
  // Checks that the engine looks like a YOLOv5 export: one image input [N,3,H,W] and either one decoded output
  // [N, boxes, 5+nc] or three raw heads [N, 3*(5+nc), H/s, W/s].
  static Expected<Detector> create(Engine* engine, DetectorOptions opt);

  int num_classes() const { return num_classes_; }
  int input_width() const { return opt_.letterbox.width; }
  int input_height() const { return opt_.letterbox.height; }
  // Detections per image, boxes in each image's own pixels, best first.
  Expected<std::vector<std::vector<Detection>>> detect(const std::vector<const Image*>& images,
                                                       DetectTimings* timings = nullptr);
  // The letterbox + tensor step alone (also used by calibration, so it sees exactly what inference sees).
  Expected<Tensor> preprocess(const std::vector<const Image*>& images, std::vector<LetterboxInfo>* infos) const;

 private:
  Detector(Engine* e, DetectorOptions o) : engine_(e), opt_(std::move(o)) {}
  Engine* engine_;
  DetectorOptions opt_;
  int num_classes_ = 0;
  bool heads_ = false;
};

// Class names for a model with nc classes: Fashion-MNIST's for 10, COCO's for 80, "class N" otherwise; or the lines
// of a text file.
Expected<std::vector<std::string>> class_names(const std::string& names_file, int nc);

}  // namespace qd
