// CudaEngine's contexts behind the public interface (qdeploy::ExecutionContext): a CudaContext with the public
// types at its edges. Streams arrive as void* (cudaStream_t), so that the public header needs no CUDA headers.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_engine.h"
#include "runtime/public_types.h"

namespace qd::cuda {

namespace {

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

class CudaApiContext final : public qdeploy::ExecutionContext {
 public:
  explicit CudaApiContext(const CudaEngine& engine) : engine_(engine), ctx_(engine.create_context()) {}

  qdeploy::Status set_input_shapes(const qdeploy::ShapeMap& shapes) override {
    QD_API_CHECK(ctx_->set_input_shapes(shapes));
    shapes_ = shapes;
    return {};
  }
  std::vector<qdeploy::TensorInfo> outputs() const override {
    std::vector<qdeploy::TensorInfo> out;
    for (const TensorDesc& d : shapes_.empty() ? engine_.outputs() : ctx_->output_descs()) out.push_back(to_public(d));
    return out;
  }
  qdeploy::Status bind(const std::string& name, void* device_ptr) override {
    return to_public(ctx_->bind(name, device_ptr));
  }
  void* device_buffer(const std::string& name) const override { return ctx_->device_buffer(name); }
  qdeploy::Status use_cuda_graph(bool on) override {
    ctx_->use_cuda_graph(on);
    return {};
  }
  qdeploy::Status upload(const std::map<std::string, qdeploy::HostTensor>& inputs, void* stream) override {
    auto in = from_public(inputs);
    if (!in) return to_public(in.status());
    // Kept until the next upload: the copies read them after this returns.
    staged_ = std::move(*in);
    return to_public(ctx_->upload(staged_, as_stream(stream)));
  }
  qdeploy::Status enqueue(void* stream) override { return to_public(ctx_->enqueue(as_stream(stream))); }
  // The waits and signals are stream-ordered around the run (or its graph launch): no host synchronisation.
  qdeploy::Status enqueue(void* stream, const qdeploy::ExternalSync& sync) override {
    if (qdeploy::Status s = qdeploy::enqueue_waits(sync, stream); !s) return s;
    if (qdeploy::Status s = enqueue(stream); !s) return s;
    return qdeploy::enqueue_signals(sync, stream);
  }
  qdeploy::Expected<std::vector<qdeploy::HostTensor>> download(void* stream) override {
    auto out = ctx_->download(as_stream(stream));
    if (!out) return to_public(out.status());
    std::vector<qdeploy::HostTensor> h;
    for (const Tensor& t : *out) h.push_back(to_public(t));
    return h;
  }
  qdeploy::Expected<std::vector<qdeploy::LayerTime>> profile(int iterations, void* stream) override {
    if (iterations < 1) return qdeploy::Status(qdeploy::StatusCode::kInvalidArgument, "profile: iterations < 1");
    return to_public(ctx_->profile(iterations, as_stream(stream)));
  }
  qdeploy::Expected<qdeploy::MemoryReport> memory_report() const override {
    if (shapes_.empty()) {
      return qdeploy::Status(qdeploy::StatusCode::kInvalidArgument, "memory_report: set_input_shapes first");
    }
    return to_public(engine_.memory_report(shapes_));
  }
  std::string batch_split() const override { return ctx_->split(); }

 private:
  const CudaEngine& engine_;
  std::unique_ptr<CudaContext> ctx_;
  qdeploy::ShapeMap shapes_;
  std::map<std::string, Tensor> staged_;
};

}  // namespace

Expected<std::unique_ptr<qdeploy::ExecutionContext>> CudaEngine::new_context() {
  return std::unique_ptr<qdeploy::ExecutionContext>(std::make_unique<CudaApiContext>(*this));
}

}  // namespace qd::cuda
