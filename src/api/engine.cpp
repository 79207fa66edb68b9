// include/qdeploy/engine.h: the public Engine over the library's (runtime/engine.h).
#include "qdeploy/engine.h"

#include <mutex>

#include "frontend/frontend.h"
#include "runtime/engine.h"
#include "runtime/public_types.h"

namespace qdeploy {

Engine::Engine(std::shared_ptr<qd::Engine> impl) : impl_(std::move(impl)) {
  for (const auto& d : impl_->inputs()) inputs_.push_back(qd::to_public(d));
  for (const auto& d : impl_->outputs()) outputs_.push_back(qd::to_public(d));
}

const std::vector<TensorInfo>& Engine::inputs() const { return inputs_; }
const std::vector<TensorInfo>& Engine::outputs() const { return outputs_; }
Device Engine::device() const { return impl_->options().device == "cuda" ? Device::kCuda : Device::kCpu; }
std::string Engine::device_name() const { return impl_->device_name(); }
std::string Engine::describe() const { return impl_->describe(); }

BuildOptions Engine::options() const {
  auto o = qd::to_public(impl_->options());
  return o ? *o : BuildOptions{};  // the library checked them when it built or loaded the engine
}

ShapeMap Engine::build_shapes() const { return impl_->build_shapes(); }
Status Engine::save(const std::string& path) const { return qd::to_public(impl_->save(path)); }

namespace {

// A context that keeps its engine alive (the engines' own contexts refer to it), so that a context may outlive the
// Engine object it came from.
class OwningContext final : public ExecutionContext {
 public:
  OwningContext(std::shared_ptr<qd::Engine> e, std::unique_ptr<ExecutionContext> c)
      : e_(std::move(e)), c_(std::move(c)) {}
  ~OwningContext() override { c_.reset(); }  // before the engine

  Status set_input_shapes(const ShapeMap& shapes) override { return c_->set_input_shapes(shapes); }
  std::vector<TensorInfo> outputs() const override { return c_->outputs(); }
  Status bind(const std::string& name, void* device_ptr) override { return c_->bind(name, device_ptr); }
  void* device_buffer(const std::string& name) const override { return c_->device_buffer(name); }
  Status use_cuda_graph(bool on) override { return c_->use_cuda_graph(on); }
  Status upload(const std::map<std::string, HostTensor>& inputs, void* stream) override {
    return c_->upload(inputs, stream);
  }
  Status enqueue(void* stream) override { return c_->enqueue(stream); }
  Status enqueue(void* stream, const ExternalSync& sync) override { return c_->enqueue(stream, sync); }
  Expected<std::vector<HostTensor>> download(void* stream) override { return c_->download(stream); }
  Expected<std::vector<LayerTime>> profile(int iterations, void* stream) override {
    return c_->profile(iterations, stream);
  }
  Expected<MemoryReport> memory_report() const override { return c_->memory_report(); }
  std::string batch_split() const override { return c_->batch_split(); }

 private:
  std::shared_ptr<qd::Engine> e_;
  std::unique_ptr<ExecutionContext> c_;
};

}  // namespace

Expected<std::unique_ptr<ExecutionContext>> Engine::create_context() const {
  auto c = qd::to_public(impl_->new_context());
  if (!c) return c.status();
  return std::unique_ptr<ExecutionContext>(std::make_unique<OwningContext>(impl_, std::move(*c)));
}

Expected<std::vector<HostTensor>> Engine::run(const std::map<std::string, HostTensor>& inputs) const {
  auto in = qd::from_public(inputs);
  if (!in) return qd::to_public(in.status());
  auto out = impl_->run(*in);
  if (!out) return qd::to_public(out.status());
  std::vector<HostTensor> h;
  for (const qd::Tensor& t : *out) h.push_back(qd::to_public(t));
  return h;
}

Expected<std::vector<LayerInfo>> Engine::layer_info(const ShapeMap& shapes) const {
  return qd::to_public(impl_->layer_info(shapes));
}

Expected<MemoryReport> Engine::memory_report(const ShapeMap& shapes) const {
  return qd::to_public(impl_->memory_report(shapes));
}

Expected<Engine> build(const std::string& model_path, const BuildOptions& options) {
  auto e = qd::build_engine(model_path, qd::from_public(options));
  if (!e) return qd::to_public(e.status());
  return Engine(std::shared_ptr<qd::Engine>(std::move(*e)));
}

Expected<Engine> load(const std::string& plan_path) {
  auto e = qd::load_engine(plan_path);
  if (!e) return qd::to_public(e.status());
  return Engine(std::shared_ptr<qd::Engine>(std::move(*e)));
}

Expected<Engine> load(const std::string& plan_path, int device_index) {
  auto e = qd::load_engine_on_device(plan_path, device_index);
  if (!e) return qd::to_public(e.status());
  return Engine(std::shared_ptr<qd::Engine>(std::move(*e)));
}

bool is_plan(const std::string& path) { return qd::is_plan_file(path); }

const char* version() { return QD_VERSION; }

}  // namespace qdeploy
