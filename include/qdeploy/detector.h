// Object detection with a YOLOv5-style model (one image input [N,3,H,W]; one decoded output [N, boxes, 5+nc] or
// the three raw heads): letterbox, run, decode + NMS, boxes back in the image's pixels. On a CUDA engine whose model
// outputs the decoded tensor, detect() runs letterbox, engine and NMS on the GPU on one stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qdeploy/engine.h"
#include "qdeploy/status.h"
#include "qdeploy/tensor.h"

namespace qdeploy {

// An 8-bit RGB image, rows top to bottom, pixels interleaved R,G,B.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
};
// Reads a JPEG or PNG file.
Expected<Image> read_image(const std::string& path);

// Corners in the original image's pixels.
struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  float score = 0;
  int class_id = 0;
};

struct DetectorOptions {
  float conf_threshold = 0.25f;
  float iou_threshold = 0.45f;
  int max_detections = 300;
  bool class_agnostic_nms = false;
  // The GPU path of detect() on CUDA engines (false: letterbox and NMS on the host around the engine).
  bool device_pipeline = true;
};

// A letterboxed batch: the network input (fp32 NCHW, values in [0, 1]) and where each image went in it.
struct Letterboxed {
  HostTensor tensor;
  struct Placement {
    float scale = 1.f, pad_x = 0.f, pad_y = 0.f;
    int width = 0, height = 0;  // the original image's
  };
  std::vector<Placement> placements;
};

class Detector {
 public:
  // Checks that the engine's model looks like a YOLOv5 export. The detector keeps the engine alive.
  static Expected<Detector> create(const Engine& engine, const DetectorOptions& options = {});
  ~Detector();
  Detector(Detector&&) noexcept;
  Detector& operator=(Detector&&) noexcept;

  int num_classes() const;
  int input_width() const;
  int input_height() const;
  // The steps one by one (for running the engine through a context of your own):
  Expected<Letterboxed> letterbox(const std::vector<const Image*>& images) const;
  // Decode (the raw heads, where the model has them) + NMS + back to each image's pixels; one list per image.
  Expected<std::vector<std::vector<Detection>>> decode(const std::vector<HostTensor>& outputs,
                                                      const Letterboxed& batch) const;
  // All of it: letterbox, run, decode + NMS. One call at a time per detector.
  Expected<std::vector<std::vector<Detection>>> detect(const std::vector<const Image*>& images);

 private:
  struct Impl;
  explicit Detector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "person", ... for 80 classes (COCO), Fashion-MNIST's names for 10, else "class N".
std::string class_name(int class_id, int num_classes);

}  // namespace qdeploy
