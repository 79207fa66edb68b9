// Representative data as model input batches, and calibration on them: the one calibration code path behind
// `qdeploy calibrate`, a build's --calib (build, run, bench, eval, detect) and `qdeploy sensitivity` (its SNR data
// and its calibration on the fly), with the same defaults (CalibDefaults) everywhere.
//   images  preprocessed exactly as inference does (tasks/model_input.h: a --preprocess spec; without one, the
//           detector's letterbox in the style of --letterbox, classifier_input() for other image models,
//           Fashion-MNIST's 32x32 images);
//   tensors .npy files (the model's only input) and .npz archives (input name -> array, as Polygraphy's data loader
//           takes them), one batch per file, or per slice of the model's fixed batch size along the first axis.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "quant/calibrator.h"
#include "runtime/engine.h"
#include "tasks/detector.h"
#include "tasks/fmnist.h"
#include "tasks/model_input.h"

namespace qd::cli {

// The calibration defaults of every command that calibrates (docs/quantization.md, "One calibration for every
// command", has the measurements behind them). mse: the post-training choice that keeps accuracy on the shipped
// models, where entropy loses top-1 on ModelBN and mAP on the detector. 512 batches: 512 images for the shipped
// models (batch 1), enough for stable scales there.
struct CalibDefaults {
  static constexpr const char* kAlgo = "mse";
  static constexpr int kAutoHeldOutBatches = 16;
  static constexpr double kPercentile = 99.99;
  static constexpr int kBatches = 512;
  static constexpr int kBatchSize = 8;
};

struct ImageSource {
  std::vector<std::string> data;       // folders or files: images (jpg/png) or tensors (.npy/.npz)
  std::string fmnist;                  // or a Fashion-MNIST IDX folder
  std::string fmnist_split = "train";
  int batches = CalibDefaults::kBatches;  // use at most this many batches (0: all)
  int batch_size = CalibDefaults::kBatchSize;  // images per batch when the model's batch is dynamic
  int max_images = 0;                  // use at most this many images (0: all)
  int skip_batches = 0;                // pass over this many batches first (held-out data after the calibration's)
  std::string letterbox = kDefaultLetterbox;  // YOLO detectors without a spec: the letterbox style
  PreprocessSpec preprocess;           // --preprocess (not given: the defaults above)
};

// Model inputs from images, Fashion-MNIST or tensor files (the name stays for the images it was first written for).
class ImageBatches {
 public:
  // `engine` (any precision) tells the input names and shapes; it must outlive this object.
  ImageBatches(ImageSource src, Engine* engine) : src_(std::move(src)), engine_(engine) {}
  Status init();
  const std::string& input_name() const { return engine_->inputs()[0].name; }
  int batch() const { return batch_; }
  int num_batches() const { return count_ / batch_; }
  bool tensors() const { return !tensor_batches_.empty(); }
  const FmnistSplit& fmnist() const { return fm_; }  // the labels, when the images come from Fashion-MNIST
  // Batch k (0 <= k < num_batches()) as the model's input tensors, by input name.
  Expected<std::map<std::string, Tensor>> feeds(int k) const;
  // The same, for the model's first input only (image models have one).
  Expected<Tensor> get(int k) const;
  // Up to `batches` batches of the same source after these (same batch size); none when the source has no more.
  Expected<ImageBatches> held_out(int batches) const;

 private:
  Status init_tensors(const std::vector<std::string>& files);
  ImageSource src_;
  Engine* engine_;
  std::unique_ptr<Detector> detector_;
  std::vector<std::string> files_;
  std::vector<std::map<std::string, Tensor>> tensor_batches_;
  FmnistSplit fm_;
  int count_ = 0, batch_ = 1, width_ = 32, height_ = 32;
  int offset_ = 0;  // images passed over (skip_batches)
};

// The FP32 engine (reference backend) whose inputs ImageBatches feeds. A model whose inputs have dynamic dims beyond
// the batch is built for the shapes the data will have: the first tensor file's arrays, or for images the
// --preprocess size (with batch_size images when the batch is dynamic too).
Expected<std::unique_ptr<Engine>> engine_for_data(const std::string& model, const ImageSource& src);

// --preprocess SPEC as a command option, and its parse (an empty text: not given).
void add_preprocess_option(CLI::App* sub, std::string& spec);
Expected<PreprocessSpec> preprocess_from_flag(const std::string& text);

// The detector options of `engine` for the spec (size, values) and the --letterbox style: a YOLO detector's input is
// letterboxed, so the spec's resize may only be left out (the --letterbox style) or `letterbox` (ultralytics').
Expected<DetectorOptions> detector_options_for(const PreprocessSpec& spec, const std::string& letterbox_style,
                                               int default_size = 640);

// Calibrates `model` on every batch of `data` with the reference backend (two passes for the histogram algorithms),
// with progress on stderr unless `quiet`; `report` (optional) gets auto's choices and the detection-head rule's tensors.
// auto then checks the model as a whole (frontend/calibrate.h's HeldOutBatches) on up to kAutoHeldOutBatches of the
// same source after the calibration's; without such data the per-tensor picks stand.
Expected<CalibCache> calibrate_model(const std::string& model, const ImageBatches& data, const CalibOptions& opt,
                                     const std::string& algo_name, bool quiet = false, CalibReport* report = nullptr);

}  // namespace qd::cli
