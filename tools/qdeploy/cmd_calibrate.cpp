// qdeploy calibrate MODEL --data DIR|FILES --algo minmax|entropy|percentile|mse --cache out.cache
// Runs representative images through the reference backend (preprocessed exactly as inference does: letterbox for
// detectors, resize for classifiers) and writes per-tensor INT8 scales in TensorRT's calibration cache format.
#include <chrono>
#include <cstdio>

#include "build_flags.h"
#include "core/progress.h"
#include "commands.h"
#include "quant/calibrator.h"
#include "runtime/model.h"
#include "tasks/detector.h"
#include "tasks/fmnist.h"

namespace qd::cli {

namespace {

struct CalibrateArgs {
  std::string model;
  std::vector<std::string> data;
  std::string fmnist;
  std::string algo = "entropy";
  double percentile = 99.99;
  int batches = 0;  // 0: all the data
  int batch_size = 8;
  std::string cache;
  std::string header;
};

// Makes batch k of the calibration data as the model's input tensor; nullopt-like empty tensor when exhausted.
class CalibData {
 public:
  CalibData(const CalibrateArgs& a, Engine* engine) : a_(a), engine_(engine) {}

  Status init() {
    const TensorDesc& in = engine_->inputs()[0];
    if (in.shape.size() != 4 || in.shape[1] != 3) return invalid("calibration expects one image input [N,3,H,W]");
    batch_ = in.shape[0] > 0 ? static_cast<int>(in.shape[0]) : a_.batch_size;
    if (!a_.fmnist.empty()) {
      fm_ = QD_TRY(load_fmnist(a_.fmnist, "train"));
      count_ = fm_.count;
    } else {
      files_ = QD_TRY(list_images(a_.data));
      count_ = static_cast<int>(files_.size());
      auto det = Detector::create(engine_, DetectorOptions{});
      if (det) detector_ = std::make_unique<Detector>(std::move(*det));
      height_ = in.shape[2] > 0 ? static_cast<int>(in.shape[2]) : 640;
      width_ = in.shape[3] > 0 ? static_cast<int>(in.shape[3]) : 640;
    }
    if (a_.batches > 0) count_ = std::min(count_, a_.batches * batch_);
    count_ = count_ / batch_ * batch_;  // whole batches only (the prepared graph has a fixed batch)
    if (count_ == 0) return invalid("not enough calibration images for one batch of " + std::to_string(batch_));
    return Status::ok();
  }
  int batch() const { return batch_; }
  int num_batches() const { return count_ / batch_; }

  Expected<Tensor> get(int k) const {
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
    std::vector<Image> resized;
    for (auto& im : imgs) {
      resized.push_back(im.width == width_ && im.height == height_ ? im : QD_TRY(resize_linear(im, width_, height_)));
    }
    std::vector<const Image*> rp;
    for (auto& im : resized) rp.push_back(&im);
    return images_to_tensor(rp, TensorOptions{});
  }

 private:
  const CalibrateArgs& a_;
  Engine* engine_;
  std::unique_ptr<Detector> detector_;
  std::vector<std::string> files_;
  FmnistSplit fm_;
  int count_ = 0, batch_ = 1, width_ = 32, height_ = 32;
};

int run_calibrate(const CalibrateArgs& a) {
  if (a.data.empty() == a.fmnist.empty()) return report(invalid("give the calibration images: --data DIR|FILES or --fmnist DIR"));
  if (a.batch_size < 1 || a.batch_size > 256) return report(invalid("--batch-size must be in 1..256"));
  if (!(a.percentile > 0 && a.percentile <= 100)) return report(invalid("--percentile must be in (0, 100]"));
  auto algo = parse_calib_algo(a.algo);
  if (!algo) return report(algo.status());
  CalibCache header;
  if (!a.header.empty()) {
    if (Status s = parse_cache_header(a.header, &header); !s) return report(s.prefix("--cache-header"));
  }
  BuildFlags fp32;
  auto engine = build_from_flags(a.model, fp32);
  if (!engine) return report(engine.status());
  CalibData data(a, engine->get());
  if (Status s = data.init(); !s) return report(s);
  const TensorDesc& in = (*engine)->inputs()[0];
  auto first = data.get(0);
  if (!first) return report(first.status());
  auto g = load_prepared(a.model, {{in.name, first->shape()}});
  if (!g) return report(g.status());
  CalibOptions opt;
  opt.algo = *algo;
  opt.percentile = a.percentile;
  Calibrator cal(*g, opt);
  const int passes = cal.needs_histograms() ? 2 : 1;
  Progress progress("calibrate (" + a.algo + ", " + std::to_string(passes) + " passes)",
                    static_cast<int64_t>(passes) * data.num_batches());
  for (int pass = 0; pass < passes; ++pass) {
    for (int k = 0; k < data.num_batches(); ++k) {
      auto x = k == 0 ? first : data.get(k);
      if (!x) return report(x.status());
      Status s = pass == 0 ? cal.observe_range({{in.name, *x}}) : cal.observe_histogram({{in.name, *x}});
      if (!s) return report(s);
      progress.update(static_cast<int64_t>(pass) * data.num_batches() + k + 1, "batches");
    }
  }
  CalibCache cache = cal.result();
  if (!a.header.empty()) {
    cache.version = header.version;
    cache.algorithm = header.algorithm;
  }
  if (Status s = write_calib_cache(a.cache, cache); !s) return report(s);
  std::printf("wrote %zu tensor scales (%s, %d images) to %s\n", cache.scales.size(), a.algo.c_str(),
              data.num_batches() * data.batch(), a.cache.c_str());
  return 0;
}

}  // namespace

RunFn add_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* sub = app.add_subcommand("calibrate", "INT8 calibration: per-tensor scales into a TensorRT-format cache");
  sub->add_option("model", a->model, "ONNX model")->required();
  sub->add_option("--data", a->data, "Calibration images: folders or files (jpg/png)");
  sub->add_option("--fmnist", a->fmnist, "Calibrate a classifier on the Fashion-MNIST train split (IDX folder)");
  sub->add_option("--algo", a->algo, "minmax, entropy, percentile or mse")->capture_default_str();
  sub->add_option("--percentile", a->percentile, "For --algo percentile")->capture_default_str();
  sub->add_option("--batches", a->batches, "Use at most this many batches (0: all)")->capture_default_str();
  sub->add_option("--batch-size", a->batch_size, "Images per batch when the model's batch is dynamic")
      ->capture_default_str();
  sub->add_option("--cache", a->cache, "Output calibration cache")->required();
  sub->add_option("--cache-header", a->header, "Header to write, e.g. TRT-8600-EntropyCalibration2");
  return [a] { return run_calibrate(*a); };
}

}  // namespace qd::cli
