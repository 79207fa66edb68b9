#include "tasks/cuda/engine_detect.h"

#include <utility>

#include "backends/cuda/cuda_util.h"

namespace qd::cuda {

std::string engine_pipeline_unsupported(const CudaEngine& engine, const Detector& det) {
  if (det.raw_heads()) return "the model outputs raw heads (the GPU post-processing takes the decoded output)";
  if (engine.inputs().size() != 1 || engine.outputs().size() != 1) return "the model needs one input and one output";
  const DType in = engine.inputs()[0].dtype;
  if (in != DType::kFloat32 && in != DType::kFloat16 && in != DType::kInt8) {
    return std::string("the engine input is ") + dtype_name(in) + " (the GPU preprocessing writes fp32, fp16 or int8)";
  }
  const DType out = engine.outputs()[0].dtype;
  if (out != DType::kFloat32 && out != DType::kFloat16) {
    return std::string("the engine output is ") + dtype_name(out) + " (the GPU post-processing reads fp32 or fp16)";
  }
  if (det.input_width() <= 0 || det.input_height() <= 0) return "the network input size is not known";
  return "";
}

Expected<std::unique_ptr<EngineDetectPipeline>> EngineDetectPipeline::create(const CudaEngine& engine,
                                                                             const Detector& det, int max_batch,
                                                                             bool cuda_graph, int last_batch) {
  if (max_batch < 1) return invalid("EngineDetectPipeline: max_batch must be >= 1");
  if (std::string why = engine_pipeline_unsupported(engine, det); !why.empty()) {
    return unsupported("GPU detect pipeline: " + why);
  }
  std::unique_ptr<EngineDetectPipeline> p(new EngineDetectPipeline());
  p->max_batch_ = max_batch;
  QD_CUDA_TRY(cudaSetDevice(engine.options().device_index));
  QD_CUDA_TRY(cudaStreamCreateWithFlags(&p->stream_, cudaStreamNonBlocking));
  p->ctx_ = std::shared_ptr<CudaContext>(engine.create_context());
  p->ctx_->use_cuda_graph(cuda_graph);

  const TensorDesc in = engine.inputs()[0];
  const std::string out_name = engine.outputs()[0].name;
  const int h = det.input_height(), w = det.input_width();
  auto shape_for = [in, h, w](int n) { return std::map<std::string, Shape>{{in.name, Shape{n, 3, h, w}}}; };
  // Learn the output at the largest batch (this also checks that the engine takes that batch and input size).
  Status st = p->ctx_->set_input_shapes(shape_for(max_batch));
  if (!st.is_ok()) return st.prefix("GPU detect pipeline, batch " + std::to_string(max_batch));
  const std::vector<TensorDesc>& outs = p->ctx_->output_descs();
  if (outs.size() != 1 || outs[0].shape.size() != 3 || outs[0].shape[0] != max_batch ||
      outs[0].shape[2] != det.num_classes() + 5) {
    return invalid("GPU detect pipeline: the engine output is " +
                   (outs.empty() ? std::string("missing") : shape_str(outs[0].shape)) + ", expected [" +
                   std::to_string(max_batch) + ", boxes, " + std::to_string(det.num_classes() + 5) + "]");
  }
  DetectPipeline::Config cfg = DetectPipeline::config_for(det, max_batch, outs[0].shape[1], outs[0].dtype);
  // The CPU path's values (the detector's TensorOptions) in the engine input's format: an int8 (NHWC) input binding
  // makes the preprocessing kernel quantize (and lay out) the network input itself.
  cfg.tensor.dtype = in.dtype;
  cfg.tensor.layout = in.layout;
  cfg.tensor.int8_scale = in.scale;

  // The engine step: run on the pipeline's input buffer (bound as the engine's input: the preprocessing kernel
  // writes the network input in place) and hand back the engine's own output buffer. The shapes are set again only
  // when the batch size changes (the last, partial batch); the context recaptures its graph then.
  auto ctx = p->ctx_;
  auto last_n = std::make_shared<int>(max_batch);
  DetectPipeline::InferFn infer = [ctx, shape_for, in, out_name, last_n](void* d_input, int n,
                                                                          cudaStream_t s) -> Expected<const void*> {
    if (n != *last_n) {
      QD_RETURN_IF_ERROR(ctx->set_input_shapes(shape_for(n)));
      *last_n = n;
    }
    if (ctx->device_buffer(in.name) != d_input) QD_RETURN_IF_ERROR(ctx->bind(in.name, d_input));
    QD_RETURN_IF_ERROR(ctx->enqueue(s));
    const void* pred = ctx->device_buffer(out_name);
    if (!pred) return internal("GPU detect pipeline: the engine has no output buffer '" + out_name + "'");
    return pred;
  };
  p->pipe_ = QD_TRY(DetectPipeline::create(cfg, infer, p->stream_));

  // Warm-up on a zeroed input: the last, partial batch's size first (its engine instance and the first calls of its
  // kernels, e.g. cuDNN's per-shape setup), then the largest batch, whose CUDA graph stays captured, so that the
  // timed batches see the steady state.
  {
    Shape s{max_batch, 3, h, w};
    size_t bytes = dtype_size(in.dtype);
    for (int64_t d : s) bytes *= static_cast<size_t>(d);
    QD_CUDA_TRY(cudaMemsetAsync(p->pipe_->input_buffer(), 0, bytes, p->stream_));
  }
  if (last_batch > 0 && last_batch < max_batch) {
    QD_RETURN_IF_ERROR(infer(p->pipe_->input_buffer(), last_batch, p->stream_).status());
  }
  QD_RETURN_IF_ERROR(infer(p->pipe_->input_buffer(), max_batch, p->stream_).status());
  QD_CUDA_TRY(cudaStreamSynchronize(p->stream_));
  return p;
}

EngineDetectPipeline::~EngineDetectPipeline() {
  pipe_.reset();  // synchronizes the stream, frees the input buffer the context has bound
  ctx_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

Expected<std::shared_ptr<EngineDetectPipeline>> attach_engine_pipeline(const CudaEngine& engine, Detector& det,
                                                                       int max_batch, std::string* why,
                                                                       int last_batch) {
  std::string reason = engine_pipeline_unsupported(engine, det);
  if (why) *why = reason;
  if (!reason.empty()) return std::shared_ptr<EngineDetectPipeline>();
  std::shared_ptr<EngineDetectPipeline> p =
      QD_TRY(EngineDetectPipeline::create(engine, det, max_batch, true, last_batch));
  det.set_device_path(p->detect_fn());
  return p;
}

}  // namespace qd::cuda
