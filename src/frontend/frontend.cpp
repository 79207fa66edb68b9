// The backend table, and the entry points that use it: build_engine imports the model and hands it to the backend
// for opt.device; load_engine hands a plan to the backend its header names. The only file that knows which backends
// a build has, so that neither the runtime nor a backend calls into the other's library.
#include "frontend/frontend.h"

#include "onnx/importer.h"
#include "passes/passes.h"
#include "plan/plan_file.h"
#include "plan/plugin_list.h"
#include "qdeploy/plugin.h"
#include "runtime/backend.h"
#include "runtime/plan_sections.h"

namespace qd {

const Backend* find_backend(const std::string& device) {
  static const Backend* const kBackends[] = {
      &cpu_backend(),
#ifdef QD_HAVE_CUDA
      &cuda_backend(),
#endif
  };
  for (const Backend* b : kBackends) {
    if (device == b->device) return b;
  }
  return nullptr;
}

Expected<std::unique_ptr<Engine>> build_engine(const std::string& model_path, const BuildOptions& opt) {
  QD_RETURN_IF_ERROR(check_build_options(opt));
  const Backend* backend = find_backend(opt.device);
  if (!backend) {
    return unsupported("--device " + opt.device + ": this qdeploy was built without the CUDA backend (nvcc not found, "
                       "or a sanitizer build); rebuild with the CUDA toolkit, or use --device cpu");
  }
  QD_RETURN_IF_ERROR(backend->check(opt));
  qdeploy::register_builtin_plugins();
  Graph g = QD_TRY(import_onnx_file(model_path));
  return backend->build(std::move(g), opt, model_path);
}

namespace {

Expected<std::unique_ptr<Engine>> load_plan(const std::string& plan_path, int device_index) {
  auto plan = read_plan(plan_path);
  if (!plan) return plan.status();
  qdeploy::register_builtin_plugins();
  if (Status st = check_plugin_list(*plan); !st.is_ok()) return st.prefix(plan_path);
  const Backend* backend = find_backend(plan->header.target);
  if (!backend) {
    return unsupported("this plan was built for a GPU (target " + plan->header.target +
                              "), but this qdeploy was built without the CUDA backend; run it with a CUDA build of "
                              "qdeploy, or build a CPU plan with `qdeploy build MODEL -o PLAN --device cpu`")
        .prefix(plan_path);
  }
  if (device_index >= 0) {
    // The plan's recorded device replaced: the backend still refuses a GPU of another model.
    for (PlanSection& s : plan->sections) {
      if (s.name != "build_options") continue;
      BuildOptions opt = QD_TRY(decode_build_options(s.data));
      if (opt.device != "cuda") return invalid("a device index applies to GPU plans only").prefix(plan_path);
      opt.device_index = device_index;
      s.data = encode_build_options(opt);
    }
  }
  auto engine = backend->load(*plan);
  if (!engine) return Status(engine.status()).prefix(plan_path);
  return engine;
}

}  // namespace

Expected<std::unique_ptr<Engine>> load_engine(const std::string& plan_path) { return load_plan(plan_path, -1); }

Expected<std::unique_ptr<Engine>> load_engine_on_device(const std::string& plan_path, int device_index) {
  if (device_index < 0) return invalid("device index " + std::to_string(device_index) + " is negative");
  return load_plan(plan_path, device_index);
}

Expected<Graph> load_prepared(const std::string& path, const std::map<std::string, Shape>& shapes) {
  qdeploy::register_builtin_plugins();
  Graph g = QD_TRY(import_onnx_file(path));
  PrepareOptions opt;
  opt.input_shapes = shapes;
  Status st = prepare_graph(g, opt);
  if (!st.is_ok()) return st.prefix(path);
  return g;
}

}  // namespace qd
