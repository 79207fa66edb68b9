// include/qdeploy/detector.h over tasks/detector.h (and its GPU path, tasks/device_pipeline.h).
#include "qdeploy/detector.h"

#include "runtime/io_format.h"
#include "runtime/public_types.h"
#include "tasks/detector.h"
#include "tasks/device_pipeline.h"
#include "tasks/image_io.h"

namespace qdeploy {

Expected<Image> read_image(const std::string& path) {
  auto img = qd::read_image(path);
  if (!img) return qd::to_public(img.status());
  Image out;
  out.width = img->width;
  out.height = img->height;
  out.rgb = std::move(img->data);
  return out;
}

struct Detector::Impl {
  std::shared_ptr<qd::Engine> engine;  // keeps it alive for the detector
  qd::Detector det;
  std::shared_ptr<void> device;  // the GPU pipeline det.detect() goes through, when there is one
};

namespace {

// A public image as the library's (a copy: the library's detector takes its own type).
Expected<qd::Image> to_image(const Image& im) {
  if (im.width <= 0 || im.height <= 0 || im.rgb.size() != static_cast<size_t>(im.width) * im.height * 3) {
    return Status(StatusCode::kInvalidArgument, "image of " + std::to_string(im.width) + "x" +
                                                    std::to_string(im.height) + " with " +
                                                    std::to_string(im.rgb.size()) + " bytes (want width*height*3)");
  }
  qd::Image out;
  out.width = im.width;
  out.height = im.height;
  out.data = im.rgb;
  return out;
}

Expected<std::vector<qd::Image>> to_images(const std::vector<const Image*>& images) {
  std::vector<qd::Image> out;
  for (const Image* im : images) {
    if (!im) return Status(StatusCode::kInvalidArgument, "null image");
    auto x = to_image(*im);
    if (!x) return x.status();
    out.push_back(std::move(*x));
  }
  return out;
}

std::vector<const qd::Image*> pointers(const std::vector<qd::Image>& v) {
  std::vector<const qd::Image*> p;
  for (const auto& x : v) p.push_back(&x);
  return p;
}

std::vector<std::vector<Detection>> to_public(const std::vector<std::vector<qd::Detection>>& dets) {
  std::vector<std::vector<Detection>> out;
  for (const auto& image : dets) {
    out.emplace_back();
    for (const auto& d : image) out.back().push_back({d.x1, d.y1, d.x2, d.y2, d.score, d.class_id});
  }
  return out;
}

}  // namespace

Detector::Detector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Detector::~Detector() = default;
Detector::Detector(Detector&&) noexcept = default;
Detector& Detector::operator=(Detector&&) noexcept = default;

Expected<Detector> Detector::create(const Engine& engine, const DetectorOptions& options) {
  qd::DetectorOptions o;
  o.post.conf_thres = options.conf_threshold;
  o.post.iou_thres = options.iou_threshold;
  o.post.max_det = options.max_detections;
  o.post.agnostic = options.class_agnostic_nms;
  QD_API_CHECK(qd::check_yolo_options(o.post));
  std::shared_ptr<qd::Engine> e = engine.impl();
  auto det = qd::Detector::create(e.get(), o);
  if (!det) return qd::to_public(det.status());
  auto impl = std::unique_ptr<Impl>(new Impl{e, std::move(*det), nullptr});
  if (options.device_pipeline) {
    const int batch = engine.inputs()[0].shape[0] > 0 ? static_cast<int>(engine.inputs()[0].shape[0]) : 1;
    auto p = qd::attach_device_pipeline(*e, impl->det, batch);
    if (!p) return qd::to_public(p.status());
    impl->device = std::move(*p);
  }
  return Detector(std::move(impl));
}

int Detector::num_classes() const { return impl_->det.num_classes(); }
int Detector::input_width() const { return impl_->det.input_width(); }
int Detector::input_height() const { return impl_->det.input_height(); }

Expected<Letterboxed> Detector::letterbox(const std::vector<const Image*>& images) const {
  auto imgs = to_images(images);
  if (!imgs) return imgs.status();
  std::vector<qd::LetterboxInfo> infos;
  auto x = impl_->det.preprocess(pointers(*imgs), &infos);
  if (!x) return qd::to_public(x.status());
  Letterboxed out;
  out.tensor = qd::to_public(*x);
  for (const auto& i : infos) out.placements.push_back({i.scale, i.pad_x, i.pad_y, i.orig_w, i.orig_h});
  return out;
}

Expected<std::vector<std::vector<Detection>>> Detector::decode(const std::vector<HostTensor>& outputs,
                                                               const Letterboxed& batch) const {
  std::vector<qd::Tensor> outs;
  const auto& descs = impl_->engine->outputs();
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto x = qd::from_public(outputs[k]);
    if (!x) return qd::to_public(x.status());
    if (x->dtype() != qd::DType::kFloat32 && k < descs.size()) {  // an fp16 or int8 output binding
      x = qd::from_binding_format(*x, descs[k]);
      if (!x) return qd::to_public(x.status());
    }
    outs.push_back(std::move(*x));
  }
  std::vector<qd::LetterboxInfo> infos;
  for (const auto& p : batch.placements) infos.push_back({p.scale, p.pad_x, p.pad_y, p.width, p.height});
  auto dets = impl_->det.postprocess(outs, infos);
  if (!dets) return qd::to_public(dets.status());
  return to_public(*dets);
}

Expected<std::vector<std::vector<Detection>>> Detector::detect(const std::vector<const Image*>& images) {
  auto imgs = to_images(images);
  if (!imgs) return imgs.status();
  auto dets = impl_->det.detect(pointers(*imgs));
  if (!dets) return qd::to_public(dets.status());
  return to_public(*dets);
}

std::string class_name(int class_id, int num_classes) {
  auto names = qd::class_names("", num_classes);
  if (!names || class_id < 0 || class_id >= static_cast<int>(names->size())) return "class " + std::to_string(class_id);
  return (*names)[class_id];
}

}  // namespace qdeploy
