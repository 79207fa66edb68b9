#include "tasks/cuda/detect_pipeline.h"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_util.h"

namespace qd::cuda {

DetectPipeline::Config DetectPipeline::config_for(const Detector& det, int max_batch, int64_t boxes,
                                                  DType output_dtype) {
  Config c;
  c.detector = det.options();
  c.tensor = det.options().tensor;  // the values Detector::preprocess packs (x / 255 RGB unless --preprocess says)
  c.max_batch = max_batch;
  c.boxes = boxes;
  c.num_classes = det.num_classes();
  c.output_dtype = output_dtype;
  return c;
}

Expected<std::unique_ptr<DetectPipeline>> DetectPipeline::create(const Config& config, InferFn infer,
                                                                 cudaStream_t stream) {
  if (!infer) return invalid("DetectPipeline: no inference step given");
  std::unique_ptr<DetectPipeline> p(new DetectPipeline());
  p->cfg_ = config;
  p->infer_ = std::move(infer);
  p->stream_ = stream;
  p->pre_ = QD_TRY(ImagePreprocessor::create(config.detector.letterbox, config.tensor));
  YoloGpuConfig post;
  post.max_batch = config.max_batch;
  post.boxes = config.boxes;
  post.num_classes = config.num_classes;
  post.dtype = config.output_dtype;
  post.post = config.detector.post;
  post.max_candidates = config.max_candidates;
  p->post_ = QD_TRY(YoloPostprocessor::create(post));
  QD_CUDA_TRY(cudaMalloc(&p->input_, p->pre_->output_bytes(config.max_batch)));
  for (cudaEvent_t& e : p->ev_) QD_CUDA_TRY(cudaEventCreate(&e));
  return p;
}

DetectPipeline::~DetectPipeline() {
  if (input_) {
    cudaStreamSynchronize(stream_);  // the last batch may still read it
    cudaFree(input_);
  }
  for (cudaEvent_t e : ev_) {
    if (e) cudaEventDestroy(e);
  }
}

Expected<std::vector<std::vector<Detection>>> DetectPipeline::detect(const std::vector<const Image*>& images,
                                                                     DetectTimings* timings) {
  std::vector<std::vector<Detection>> all;
  all.reserve(images.size());
  const size_t step = static_cast<size_t>(cfg_.max_batch);
  for (size_t start = 0; start < images.size(); start += step) {
    const std::vector<const Image*> batch(images.begin() + static_cast<std::ptrdiff_t>(start),
                                          images.begin() + static_cast<std::ptrdiff_t>(std::min(images.size(), start + step)));
    const int n = static_cast<int>(batch.size());
    std::vector<LetterboxInfo> infos;
    QD_RETURN_IF_ERROR(pre_->run(batch, input_, stream_, &infos, ev_));
    QD_CUDA_TRY(cudaEventRecord(ev_[2], stream_));
    const void* pred = QD_TRY(infer_(input_, n, stream_));
    QD_CUDA_TRY(cudaEventRecord(ev_[3], stream_));
    QD_RETURN_IF_ERROR(post_->enqueue(pred, n, infos.data(), stream_, ev_[4]));
    QD_CUDA_TRY(cudaEventRecord(ev_[5], stream_));
    auto dets = QD_TRY(post_->collect());
    for (size_t i = 0; i < dets.size(); ++i) {
      for (Detection& d : dets[i]) d.image = static_cast<int64_t>(start + i);
      all.push_back(std::move(dets[i]));
    }
    if (timings) {
      float ms[5] = {};
      QD_CUDA_TRY(cudaEventSynchronize(ev_[5]));  // collect() waited for the copy, not for this later event
      for (int k = 0; k < 5; ++k) QD_CUDA_TRY(cudaEventElapsedTime(&ms[k], ev_[k], ev_[k + 1]));
      timings->upload_ms += ms[0];
      timings->preprocess_ms += ms[1];
      timings->infer_ms += ms[2];
      timings->postprocess_ms += ms[3];
      timings->download_ms += ms[4];
      timings->images += n;
      timings->batches += 1;
    }
  }
  return all;
}

DetectFn DetectPipeline::detect_fn() {
  return [this](const std::vector<const Image*>& images, DetectTimings* t) { return detect(images, t); };
}

}  // namespace qd::cuda
