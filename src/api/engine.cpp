// include/qdeploy/engine.h: the public Engine over the library's (runtime/engine.h).
#include "qdeploy/engine.h"

#include <mutex>

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

Expected<std::unique_ptr<ExecutionContext>> Engine::create_context() const {
  return qd::to_public(impl_->new_context());
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

bool is_plan(const std::string& path) { return qd::is_plan_file(path); }

const char* version() { return QD_VERSION; }

}  // namespace qdeploy
