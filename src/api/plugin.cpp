// The public plugin API (qdeploy/plugin.h): registration from this program, from plugin libraries (dlopen), and the
// ops qdeploy ships as plugins.
#include "qdeploy/plugin.h"

#include <dlfcn.h>

#include <cassert>
#include <filesystem>
#include <mutex>
#include <set>

#include "dcnv4/dcnv4.h"
#include "ops/plugin_registry.h"

namespace qdeploy {

namespace {

class Registrar final : public PluginRegistrar {
 public:
  explicit Registrar(std::string source) : source_(std::move(source)) {}
  Status add(OpDef def) override {
    auto id = qd::register_plugin_op(std::move(def), source_);
    return id ? Status::ok() : qd::to_plugin_status(id.status());
  }

 private:
  std::string source_;
};

}  // namespace

Status register_op(OpDef def) { return Registrar("program").add(std::move(def)); }

Status load_plugin(const std::string& path) {
  static std::mutex mu;
  static std::set<std::string>* loaded = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  std::error_code ec;
  const std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
  if (ec || !std::filesystem::is_regular_file(canonical, ec)) {
    return Status(StatusCode::kNotFound, "--plugin " + path + ": no such file");
  }
  if (loaded->count(canonical)) return Status::ok();
  // RTLD_LOCAL: a plugin's symbols stay its own; it reaches qdeploy only through the registrar.
  void* lib = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return Status(StatusCode::kInvalidArgument,
                  "--plugin " + path + ": cannot load it (" + (why ? why : "unknown error") + ")");
  }
  auto entry = reinterpret_cast<qd_register_ops_fn>(dlsym(lib, "qd_register_ops"));
  if (!entry) {
    dlclose(lib);
    return Status(StatusCode::kInvalidArgument,
                  "--plugin " + path + ": not a qdeploy plugin (it exports no qd_register_ops; see docs/plugins.md)");
  }
  Registrar registrar(canonical);
  char error[1024] = {0};
  if (entry(&registrar, error, sizeof error) != 0) {
    // The library stays loaded: ops it registered before failing hold pointers into it.
    return Status(StatusCode::kInvalidArgument, "--plugin " + path + ": " + (error[0] ? error : "registration failed"));
  }
  loaded->insert(canonical);
  return Status::ok();
}

void register_builtin_plugins() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A library loaded earlier may already have replaced a built-in op: keep the library's.
    if (!qd::find_plugin_op(qd::plugin_qualified_name(qd_dcnv4::kDomain, qd_dcnv4::kName, qd_dcnv4::kVersion))) {
      const Status st = Registrar("built in").add(qd_dcnv4::op_def());
      assert(st.is_ok() && "the built-in DCNv4 declaration fails its own check (tests/plugins catch this)");
      (void)st;
    }
  });
}

std::vector<std::string> registered_plugin_ops() {
  std::vector<std::string> v;
  for (const qd::PluginOp* p : qd::plugin_ops()) v.push_back(p->qualified + " (" + p->source + ")");
  return v;
}

}  // namespace qdeploy
