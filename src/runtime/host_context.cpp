// The Engine interface's defaults for engines without a device queue (the CPU): a context that runs synchronously
// through Engine::run, and kUnsupported, with what to use instead, for what only a GPU engine has.
#include <memory>

#include "core/shape.h"

#include "runtime/engine.h"
#include "runtime/public_types.h"

namespace qd {

namespace {

qdeploy::Status gpu_only(const std::string& what) {
  return {qdeploy::StatusCode::kUnsupported, what + " needs a CUDA engine (BuildOptions::device kCuda, or a plan "
                                                    "built with --device cuda); this engine runs on the CPU"};
}

class HostContext final : public qdeploy::ExecutionContext {
 public:
  explicit HostContext(Engine* engine) : engine_(engine) {}

  qdeploy::Status set_input_shapes(const qdeploy::ShapeMap& shapes) override {
    for (const auto& [name, dims] : shapes) {
      const TensorDesc* d = nullptr;
      for (const TensorDesc& in : engine_->inputs()) d = in.name == name ? &in : d;
      if (!d) return to_public(invalid("set_input_shapes: the model has no input '" + name + "'"));
      bool fits = dims.size() == d->shape.size();
      for (size_t i = 0; fits && i < dims.size(); ++i) fits = dims[i] > 0 && (d->shape[i] < 0 || d->shape[i] == dims[i]);
      if (!fits) {
        return to_public(invalid("set_input_shapes: input '" + name + "' is " + shape_str(d->shape) + ", not " +
                                 shape_str(dims) + " (only dims shown as ? may change)"));
      }
    }
    QD_API_CHECK(check_in_profile(engine_->options(), shapes));
    shapes_ = shapes;
    outputs_.clear();
    return {};
  }
  std::vector<qdeploy::TensorInfo> outputs() const override {
    std::vector<qdeploy::TensorInfo> out;
    for (const TensorDesc& d : engine_->outputs()) out.push_back(to_public(d));
    if (!shapes_.empty() && !engine_->inputs().empty()) {  // a dynamic batch follows the first input's
      const auto it = shapes_.find(engine_->inputs()[0].name);
      for (auto& o : out) {
        if (it != shapes_.end() && !it->second.empty() && !o.shape.empty() && o.shape[0] < 0) {
          o.shape[0] = it->second[0];
        }
      }
    }
    for (size_t k = 0; k < out.size() && k < outputs_.size(); ++k) out[k].shape = outputs_[k].shape();
    return out;
  }
  qdeploy::Status bind(const std::string&, void*) override { return gpu_only("binding device memory"); }
  void* device_buffer(const std::string&) const override { return nullptr; }
  qdeploy::Status use_cuda_graph(bool on) override { return on ? gpu_only("a CUDA graph") : qdeploy::Status(); }
  qdeploy::Status upload(const std::map<std::string, qdeploy::HostTensor>& inputs, void* stream) override {
    if (stream) return gpu_only("a stream");
    auto in = from_public(inputs);
    if (!in) return to_public(in.status());
    inputs_ = std::move(*in);
    return {};
  }
  qdeploy::Status enqueue(void* stream) override {
    if (stream) return gpu_only("a stream");
    if (inputs_.empty()) {
      return {qdeploy::StatusCode::kInvalidArgument, "enqueue before upload: the CPU context runs on host inputs"};
    }
    auto out = engine_->run(inputs_);
    if (!out) return to_public(out.status());
    outputs_ = std::move(*out);
    return {};
  }
  qdeploy::Status enqueue(void* stream, const qdeploy::ExternalSync& sync) override {
    if (!sync.empty()) {
      return {qdeploy::StatusCode::kUnsupported,
              "external events and semaphores need a CUDA engine: the CPU engine runs synchronously on the host"};
    }
    return enqueue(stream);
  }
  qdeploy::Expected<std::vector<qdeploy::HostTensor>> download(void* stream) override {
    if (stream) return gpu_only("a stream");
    if (outputs_.empty()) return qdeploy::Status(qdeploy::StatusCode::kInvalidArgument, "download before enqueue");
    std::vector<qdeploy::HostTensor> out;
    for (const Tensor& t : outputs_) out.push_back(to_public(t));
    return out;
  }
  qdeploy::Expected<std::vector<qdeploy::LayerTime>> profile(int, void*) override {
    return gpu_only("a per-layer profile");
  }
  qdeploy::Expected<qdeploy::MemoryReport> memory_report() const override { return gpu_only("a memory report"); }
  std::string batch_split() const override { return "whole"; }

 private:
  Engine* engine_;
  qdeploy::ShapeMap shapes_;
  std::map<std::string, Tensor> inputs_;
  std::vector<Tensor> outputs_;
};

}  // namespace

const std::string& Engine::device_name() const {
  static const std::string kCpu = "cpu";
  return kCpu;
}

Expected<std::unique_ptr<qdeploy::ExecutionContext>> Engine::new_context() {
  return std::unique_ptr<qdeploy::ExecutionContext>(std::make_unique<HostContext>(this));
}

Expected<std::vector<qdeploy::LayerInfo>> Engine::layer_info(const std::map<std::string, Shape>&) const {
  return unsupported("a layer table needs a CUDA engine (--device cuda); `qdeploy inspect` lists the CPU's layers");
}

Expected<qdeploy::MemoryReport> Engine::memory_report(const std::map<std::string, Shape>&) const {
  return unsupported("a memory report needs a CUDA engine (--device cuda)");
}

Expected<std::map<std::string, Tensor>> Engine::read_int8_tensors(const std::map<std::string, Tensor>&) {
  return unsupported("this engine keeps no int8 tensors to read (a CUDA INT8 plan does)");
}

}  // namespace qd
