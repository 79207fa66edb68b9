#include "calib_data.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "build_flags.h"
#include "core/npy.h"
#include "core/npz.h"
#include "core/progress.h"
#include "frontend/calibrate.h"
#include "frontend/frontend.h"
#include "onnx/importer.h"
#include "runtime/io_format.h"
#include "runtime/model.h"

namespace qd::cli {

namespace {

std::string lower_ext(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext;
}

bool is_tensor_file(const std::filesystem::path& p) {
  const std::string ext = lower_ext(p);
  return ext == ".npy" || ext == ".npz";
}

// The .npy/.npz files among `paths` (folders expanded, sorted by name), or none when they name images.
Expected<std::vector<std::string>> list_tensor_files(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  size_t other = 0;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.is_regular_file() && is_tensor_file(e.path())) found.push_back(e.path().string());
      }
      if (found.empty()) {
        ++other;
        continue;
      }
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (is_tensor_file(p)) {
      out.push_back(p);
    } else {
      ++other;
    }
  }
  if (!out.empty() && other > 0) {
    return invalid("the data mixes tensor files (.npy/.npz) with images or folders of images; give one kind");
  }
  return out;
}

}  // namespace

Expected<std::unique_ptr<Engine>> engine_for_data(const std::string& model, const ImageSource& src) {
  auto engine = build_from_flags(model, BuildFlags{});
  if (engine || is_plan_file(model)) return engine;
  // Only a model with inputs of unknown size fails here; bind them from the data and build again.
  Graph g = QD_TRY(import_onnx_file(model));
  std::map<std::string, Shape> shapes;
  const std::vector<std::string> files = src.fmnist.empty() ? QD_TRY(list_tensor_files(src.data))
                                                            : std::vector<std::string>{};
  if (!files.empty()) {
    if (lower_ext(files[0]) == ".npy") {
      if (g.inputs.size() == 1) shapes[g.values[g.inputs[0]].name] = QD_TRY(read_npy(files[0])).shape();
    } else {
      for (const auto& a : QD_TRY(read_npz(files[0]))) shapes[a.name] = a.tensor.shape();
    }
  } else if (g.inputs.size() == 1 && src.preprocess.width > 0) {
    const Value& in = g.values[g.inputs[0]];
    const bool nhwc = src.preprocess.tensor.layout == TensorLayout::kNHWC;
    if (in.has_shape && in.shape.size() == 4) {
      Shape s = in.shape;
      if (s[0] <= 0) s[0] = src.batch_size;
      s[nhwc ? 1 : 2] = src.preprocess.height;
      s[nhwc ? 2 : 3] = src.preprocess.width;
      if (s[nhwc ? 3 : 1] <= 0) s[nhwc ? 3 : 1] = 3;
      shapes[in.name] = s;
    }
  }
  if (shapes.empty()) {
    return Status(engine.status())
        .prefix("the model's input size is not fixed; give it with --preprocess size=HxW (images) or by the first "
                "tensor file's arrays");
  }
  BuildFlags f;
  for (const auto& [name, shape] : shapes) f.shapes.push_back(name + ":" + shape_str(shape));
  return build_from_flags(model, f);
}

void add_preprocess_option(CLI::App* sub, std::string& spec) {
  sub->add_option("--preprocess", spec,
                  "How images become the model's input: KEY=VALUE,... with size=N|HxW, resize=fit|stretch|"
                  "center-crop|letterbox|none, crop=F (center-crop's fraction), mean=R,G,B, std=R,G,B (of pixel/255), "
                  "order=rgb|bgr, layout=nchw|nhwc, pad=N; a first item 'imagenet' stands for resize=center-crop,"
                  "crop=0.875 and ImageNet's mean and std (docs/quantization.md)");
}

Expected<PreprocessSpec> preprocess_from_flag(const std::string& text) {
  if (text.empty()) return PreprocessSpec{};
  return parse_preprocess_spec(text);
}

Expected<DetectorOptions> detector_options_for(const PreprocessSpec& spec, const std::string& letterbox_style,
                                               int default_size) {
  DetectorOptions opt;
  if (spec.width != spec.height) {
    return invalid("--preprocess size=" + std::to_string(spec.height) + "x" + std::to_string(spec.width) +
                   ": a YOLO detector's letterbox is square");
  }
  const int size = spec.width > 0 ? spec.width : default_size;
  if (spec.resize == ResizeMode::kDefault) {
    opt.letterbox = QD_TRY(letterbox_options(letterbox_style, size));
  } else if (spec.resize == ResizeMode::kLetterbox) {
    opt.letterbox = QD_TRY(letterbox_options("ultralytics", size));
    if (spec.pad >= 0) opt.letterbox.pad_value = static_cast<uint8_t>(spec.pad);
  } else {
    return invalid("a YOLO detector's input is letterboxed (its boxes are mapped back through it): leave out "
                   "--preprocess resize (the --letterbox style) or give resize=letterbox");
  }
  if (spec.tensor.layout != TensorLayout::kNCHW) return invalid("a YOLO detector takes an NCHW input: drop layout=nhwc");
  opt.tensor = spec.tensor;
  return opt;
}

Status ImageBatches::init_tensors(const std::vector<std::string>& files) {
  const std::vector<TensorDesc>& ins = engine_->inputs();
  std::string names;
  for (const auto& d : ins) names += (names.empty() ? "'" : ", '") + d.name + "'";
  for (const auto& file : files) {
    std::map<std::string, Tensor> arrays;
    if (lower_ext(file) == ".npy") {
      if (ins.size() != 1) {
        return invalid(file + ": a .npy holds one array, but the model has " + std::to_string(ins.size()) +
                       " inputs (" + names + "); give .npz files mapping each input name to its array");
      }
      arrays[ins[0].name] = QD_TRY(read_npy(file));
    } else {
      for (auto& a : QD_TRY(read_npz(file))) arrays[a.name] = std::move(a.tensor);
    }
    for (const auto& [name, t] : arrays) {
      const bool known = std::any_of(ins.begin(), ins.end(), [&, &name = name](const TensorDesc& d) { return d.name == name; });
      if (!known) return invalid(file + ": array '" + name + "' is not an input of the model (its inputs: " + names + ")");
    }
    // Slices of the model's fixed batch along the first axis: one file may hold many batches.
    int64_t slices = -1;
    for (const TensorDesc& d : ins) {
      auto it = arrays.find(d.name);
      if (it == arrays.end()) return invalid(file + ": no array for input '" + d.name + "' (the model's inputs: " + names + ")");
      const Tensor& t = it->second;
      const DType want = feed_dtype(d);
      if (t.dtype() != want) {
        return invalid(file + ": input '" + d.name + "' is " + dtype_name(want) + ", the array is " + dtype_name(t.dtype()) +
                       " (save it as " + dtype_name(want) + ")");
      }
      if (t.rank() != d.shape.size()) {
        return invalid(file + ": input '" + d.name + "' is [" + shape_str(d.shape) + "], the array is [" +
                       shape_str(t.shape()) + "]");
      }
      for (size_t i = 1; i < t.rank(); ++i) {
        if (d.shape[i] > 0 && d.shape[i] != t.shape()[i]) {
          return invalid(file + ": input '" + d.name + "' is [" + shape_str(d.shape) + "], the array is [" +
                         shape_str(t.shape()) + "]");
        }
      }
      int64_t n = 1;
      if (t.rank() > 0 && d.shape[0] > 0) {
        if (t.shape()[0] == 0 || t.shape()[0] % d.shape[0] != 0) {
          return invalid(file + ": input '" + d.name + "' has a batch of " + std::to_string(d.shape[0]) +
                         ", the array's first dim (" + std::to_string(t.shape()[0]) + ") is not a multiple of it");
        }
        n = t.shape()[0] / d.shape[0];
      }
      if (slices >= 0 && n != slices) return invalid(file + ": the arrays hold different numbers of batches");
      slices = n;
    }
    for (int64_t s = 0; s < slices; ++s) {
      std::map<std::string, Tensor> feeds;
      for (const TensorDesc& d : ins) {
        const Tensor& t = arrays[d.name];
        if (slices == 1) {
          feeds[d.name] = t;
          continue;
        }
        Shape shape = t.shape();
        shape[0] = d.shape[0];
        Tensor part(t.dtype(), shape);
        const size_t bytes = part.nbytes();
        std::memcpy(part.raw(), static_cast<const char*>(t.raw()) + static_cast<size_t>(s) * bytes, bytes);
        feeds[d.name] = std::move(part);
      }
      // The prepared graph has one set of shapes: every batch must match the first.
      if (!tensor_batches_.empty()) {
        for (const auto& [name, t] : feeds) {
          const Shape& first = tensor_batches_[0].at(name).shape();
          if (t.shape() != first) {
            return invalid(file + ": input '" + name + "' is [" + shape_str(t.shape()) + "], but the first batch's is [" +
                           shape_str(first) + "]; calibration batches must all have one shape");
          }
        }
      }
      tensor_batches_.push_back(std::move(feeds));
      if (src_.batches > 0 && static_cast<int>(tensor_batches_.size()) >= src_.skip_batches + src_.batches) {
        return Status::ok();
      }
    }
  }
  return Status::ok();
}

// A folder holding Fashion-MNIST's IDX files (train split): --data/--calib take it as calibrate's --fmnist.
static bool is_fmnist_folder(const std::vector<std::string>& paths) {
  if (paths.size() != 1) return false;
  std::error_code ec;
  for (const char* f : {"/train-images-idx3-ubyte.gz", "/train-images-idx3-ubyte"}) {
    if (std::filesystem::is_regular_file(paths[0] + f, ec)) return true;
  }
  return false;
}

Status ImageBatches::init() {
  if (src_.fmnist.empty() && is_fmnist_folder(src_.data)) {
    src_.fmnist = src_.data[0];
    src_.data.clear();
  }
  if (src_.fmnist.empty()) {
    const std::vector<std::string> tensor_files = QD_TRY(list_tensor_files(src_.data));
    if (!tensor_files.empty()) {
      QD_RETURN_IF_ERROR(init_tensors(tensor_files));
      const size_t skip = std::min(tensor_batches_.size(), static_cast<size_t>(std::max(0, src_.skip_batches)));
      tensor_batches_.erase(tensor_batches_.begin(), tensor_batches_.begin() + static_cast<std::ptrdiff_t>(skip));
      batch_ = 1;
      count_ = static_cast<int>(tensor_batches_.size());
      if (count_ == 0) return invalid("the tensor files hold no batch");
      return Status::ok();
    }
  }
  if (engine_->inputs().size() != 1) {
    return invalid("images feed a model with one input; this one has " + std::to_string(engine_->inputs().size()) +
                   ": give .npz files mapping each input name to its array");
  }
  const TensorDesc& in = engine_->inputs()[0];
  const PreprocessSpec& spec = src_.preprocess;
  const bool nhwc = spec.tensor.layout == TensorLayout::kNHWC;
  if (in.shape.size() != 4 || in.shape[nhwc ? 3 : 1] != 3) {
    return invalid("expected one image input " + std::string(nhwc ? "[N,H,W,3]" : "[N,3,H,W]") + ", the model's is [" +
                   shape_str(in.shape) + "]");
  }
  batch_ = in.shape[0] > 0 ? static_cast<int>(in.shape[0]) : src_.batch_size;
  if (!src_.fmnist.empty()) {
    fm_ = QD_TRY(load_fmnist(src_.fmnist, src_.fmnist_split));
    count_ = fm_.count;
  } else {
    files_ = QD_TRY(list_images(src_.data));
    count_ = static_cast<int>(files_.size());
    if (Detector::create(engine_, DetectorOptions{})) {  // else a classifier or any other image model
      DetectorOptions opt = QD_TRY(detector_options_for(spec, src_.letterbox));
      detector_ = std::make_unique<Detector>(QD_TRY(Detector::create(engine_, opt)));
    }
  }
  if (!detector_) {
    // A dynamic size the spec does not give is eval --classes' default, 32.
    PreprocessSpec sized = spec;
    if (sized.height == 0 && in.shape[nhwc ? 1 : 2] <= 0) sized.height = 32;
    if (sized.width == 0 && in.shape[nhwc ? 2 : 3] <= 0) sized.width = 32;
    QD_RETURN_IF_ERROR(resolve_input_size(sized, in.shape, &width_, &height_));
  }
  if (in.shape[0] <= 0 && count_ > 0) batch_ = std::min(batch_, count_);  // a dynamic batch: fewer images, one batch
  offset_ = std::min(count_, std::max(0, src_.skip_batches) * batch_);
  count_ -= offset_;
  if (src_.batches > 0) count_ = std::min(count_, src_.batches * batch_);
  if (src_.max_images > 0) count_ = std::min(count_, src_.max_images);
  count_ = count_ / batch_ * batch_;  // whole batches only (the prepared graph has a fixed batch)
  if (count_ == 0) return invalid("not enough images for one batch of " + std::to_string(batch_));
  return Status::ok();
}

Expected<Tensor> ImageBatches::get(int k) const {
  if (!tensor_batches_.empty()) return tensor_batches_[static_cast<size_t>(k)].at(input_name());
  std::vector<Image> imgs;
  if (!files_.empty()) {
    const auto first = files_.begin() + offset_ + k * batch_;
    imgs = QD_TRY(read_images({first, first + batch_}));
  } else {
    for (int i = offset_ + k * batch_; i < offset_ + (k + 1) * batch_; ++i) imgs.push_back(fmnist_image_32(fm_, i));
  }
  std::vector<const Image*> ptrs;
  for (auto& im : imgs) ptrs.push_back(&im);
  if (detector_) {
    std::vector<LetterboxInfo> infos;
    return detector_->preprocess(ptrs, &infos);
  }
  // As eval --classes without a spec: an aspect-keeping resize into the inner 7/8, centred.
  return images_to_model_input(ptrs, src_.preprocess, width_, height_, ResizeMode::kFit);
}

Expected<std::map<std::string, Tensor>> ImageBatches::feeds(int k) const {
  if (!tensor_batches_.empty()) return tensor_batches_[static_cast<size_t>(k)];
  Tensor x = QD_TRY(get(k));
  return std::map<std::string, Tensor>{{input_name(), std::move(x)}};
}

Expected<ImageBatches> ImageBatches::held_out(int batches) const {
  ImageSource src = src_;
  src.skip_batches = src_.skip_batches + num_batches();
  src.batches = batches;
  src.max_images = 0;
  src.batch_size = batch_;
  ImageBatches out(std::move(src), engine_);
  QD_RETURN_IF_ERROR(out.init());
  if (out.batch_ != batch_) return invalid("the held-out data gives batches of another size");
  return out;
}

Expected<CalibCache> calibrate_model(const std::string& model, const ImageBatches& data, const CalibOptions& opt,
                                     const std::string& algo_name, bool quiet, CalibReport* report) {
  std::unique_ptr<Progress> progress;
  CalibProgressFn on_batch;
  if (!quiet) {
    on_batch = [&](int64_t done, int64_t total, int passes) {
      if (!progress) {
        progress = std::make_unique<Progress>("calibrate (" + algo_name + ", " + std::to_string(passes) + " passes)",
                                              total);
      }
      progress->update(done, "batches");
    };
  }
  HeldOutBatches held_out;
  Expected<ImageBatches> held = invalid("not auto");
  if (opt.algo == CalibAlgo::kAuto) held = data.held_out(CalibDefaults::kAutoHeldOutBatches);
  if (held) {  // else no data beyond the calibration's: the per-tensor picks stand (the report says so)
    held_out = {held->num_batches(), [&](int k) { return held->feeds(k); }};
    if (!quiet) std::fprintf(stderr, "auto: the whole model will be checked on %d held-out images\n",
                             held->num_batches() * held->batch());
  }
  return calibrate_batches(
      model, data.num_batches(), [&](int k) { return data.feeds(k); }, opt, on_batch, report, held_out);
}

}  // namespace qd::cli
