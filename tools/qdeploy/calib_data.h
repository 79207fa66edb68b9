// Representative images as model input batches, preprocessed exactly as inference does (tasks/model_input.h: the
// detector's letterbox in the style of --letterbox, classifier_input() for image-folder classifiers, Fashion-MNIST's
// 32x32 images), and calibration on them. Shared by `qdeploy calibrate`, a build's --calib and `qdeploy sensitivity`
// (its SNR data and its on-the-fly calibration), so all of them see what `qdeploy eval` sees.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "quant/calibrator.h"
#include "runtime/engine.h"
#include "tasks/detector.h"
#include "tasks/fmnist.h"
#include "tasks/model_input.h"

namespace qd::cli {

struct ImageSource {
  std::vector<std::string> data;       // folders or image files (jpg/png)
  std::string fmnist;                  // or a Fashion-MNIST IDX folder
  std::string fmnist_split = "train";
  int batches = 0;                     // use at most this many batches (0: all)
  int batch_size = 8;                  // images per batch when the model's batch is dynamic
  int max_images = 0;                  // use at most this many images (0: all)
  std::string letterbox = kDefaultLetterbox;  // detectors: the letterbox style (letterbox_options())
};

class ImageBatches {
 public:
  // `engine` (any precision) tells the input name and shape; it must outlive this object.
  ImageBatches(ImageSource src, Engine* engine) : src_(std::move(src)), engine_(engine) {}
  Status init();
  const std::string& input_name() const { return engine_->inputs()[0].name; }
  int batch() const { return batch_; }
  int num_batches() const { return count_ / batch_; }
  const FmnistSplit& fmnist() const { return fm_; }  // the labels, when the images come from Fashion-MNIST
  // Batch k (0 <= k < num_batches()) as the model's input tensor.
  Expected<Tensor> get(int k) const;

 private:
  ImageSource src_;
  Engine* engine_;
  std::unique_ptr<Detector> detector_;
  std::vector<std::string> files_;
  FmnistSplit fm_;
  int count_ = 0, batch_ = 1, width_ = 32, height_ = 32;
};

// Calibrates `model` on every batch of `data` with the reference backend (two passes for the histogram algorithms),
// with progress on stderr unless `quiet`; `report` (optional) gets auto's choices and the detection-head rule's tensors.
Expected<CalibCache> calibrate_model(const std::string& model, const ImageBatches& data, const CalibOptions& opt,
                                     const std::string& algo_name, bool quiet = false, CalibReport* report = nullptr);

}  // namespace qd::cli
