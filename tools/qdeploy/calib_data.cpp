#include "calib_data.h"

#include "build_flags.h"
#include "core/progress.h"
#include "frontend/frontend.h"

namespace qd::cli {

Status ImageBatches::init() {
  const TensorDesc& in = engine_->inputs()[0];
  if (in.shape.size() != 4 || in.shape[1] != 3) return invalid("expected one image input [N,3,H,W]");
  batch_ = in.shape[0] > 0 ? static_cast<int>(in.shape[0]) : src_.batch_size;
  if (!src_.fmnist.empty()) {
    fm_ = QD_TRY(load_fmnist(src_.fmnist, src_.fmnist_split));
    count_ = fm_.count;
  } else {
    files_ = QD_TRY(list_images(src_.data));
    count_ = static_cast<int>(files_.size());
    DetectorOptions opt;
    opt.letterbox = QD_TRY(letterbox_options(src_.letterbox));
    auto det = Detector::create(engine_, opt);  // not a detector: a classifier (classifier_input)
    if (det) detector_ = std::make_unique<Detector>(std::move(*det));
    // A classifier of dynamic size gets eval --classes' default, 32x32.
    height_ = in.shape[2] > 0 ? static_cast<int>(in.shape[2]) : 32;
    width_ = in.shape[3] > 0 ? static_cast<int>(in.shape[3]) : 32;
  }
  if (in.shape[0] <= 0 && count_ > 0) batch_ = std::min(batch_, count_);  // a dynamic batch: fewer images, one batch
  if (src_.batches > 0) count_ = std::min(count_, src_.batches * batch_);
  if (src_.max_images > 0) count_ = std::min(count_, src_.max_images);
  count_ = count_ / batch_ * batch_;  // whole batches only (the prepared graph has a fixed batch)
  if (count_ == 0) return invalid("not enough images for one batch of " + std::to_string(batch_));
  return Status::ok();
}

Expected<Tensor> ImageBatches::get(int k) const {
  std::vector<Image> imgs;
  if (!files_.empty()) {
    imgs = QD_TRY(read_images({files_.begin() + k * batch_, files_.begin() + (k + 1) * batch_}));
  } else {
    for (int i = k * batch_; i < (k + 1) * batch_; ++i) imgs.push_back(fmnist_image_32(fm_, i));
  }
  std::vector<const Image*> ptrs;
  for (auto& im : imgs) ptrs.push_back(&im);
  if (detector_) {
    std::vector<LetterboxInfo> infos;
    return detector_->preprocess(ptrs, &infos);
  }
  std::vector<Image> resized;  // as eval --classes: an aspect-keeping resize into the inner 7/8, centred
  for (auto& im : imgs) resized.push_back(QD_TRY(classifier_input(im, width_, height_)));
  std::vector<const Image*> rp;
  for (auto& im : resized) rp.push_back(&im);
  return images_to_tensor(rp, TensorOptions{});
}

Expected<CalibCache> calibrate_model(const std::string& model, const ImageBatches& data, const CalibOptions& opt,
                                     const std::string& algo_name, bool quiet, CalibReport* report) {
  Tensor first = QD_TRY(data.get(0));
  Graph g = QD_TRY(load_prepared(model, {{data.input_name(), first.shape()}}));
  Calibrator cal(g, opt);
  const int passes = cal.needs_histograms() ? 2 : 1;
  Progress progress("calibrate (" + algo_name + ", " + std::to_string(passes) + " passes)",
                    static_cast<int64_t>(passes) * data.num_batches());
  for (int pass = 0; pass < passes; ++pass) {
    for (int k = 0; k < data.num_batches(); ++k) {
      Tensor x = k == 0 ? first : QD_TRY(data.get(k));
      QD_RETURN_IF_ERROR(pass == 0 ? cal.observe_range({{data.input_name(), x}})
                                   : cal.observe_histogram({{data.input_name(), x}}));
      if (!quiet) progress.update(static_cast<int64_t>(pass) * data.num_batches() + k + 1, "batches");
    }
  }
  if (report) *report = cal.report();
  return cal.result();
}

}  // namespace qd::cli
