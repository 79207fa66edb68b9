// qdeploy: the command-line tool. Dispatches to one subcommand per file (see commands.h).
#include <vector>

#include "commands.h"
#include "qdeploy/engine.h"
#include "qdeploy/plugin.h"

namespace qd::cli {

int report(const Status& s) {
  if (s.is_ok()) return 0;
  std::cerr << "error: " << s.to_string() << "\n";
  return exit_code(s);
}

}  // namespace qd::cli

int main(int argc, char** argv) {
  using namespace qd::cli;
  CLI::App app{"qdeploy: import, quantize, compile and run CNNs (ONNX) on NVIDIA GPUs and the CPU"};
  app.set_version_flag("--version", std::string("qdeploy ") + qdeploy::version() +  // scripts check it
                                        (qdeploy::has_cuda() ? " (CUDA backend)" : " (CPU only)"));
  app.require_subcommand(1);
  // --plugin LIB.so, on every command (given before or after the command's name): custom ops a model or plan uses.
  std::vector<std::string> plugins;
  app.add_option("--plugin", plugins,
                 "Load a plugin library declaring custom ops (docs/plugins.md); repeatable, on any command that builds "
                 "or loads a model or plan")
      ->type_name("LIB.so");
  app.fallthrough();
  // The order here is the order of `qdeploy --help`.
  std::vector<std::pair<CLI::App*, RunFn>> commands;
  for (auto add : {add_inspect, add_build, add_run, add_bench, add_ops, add_detect, add_classify, add_eval, add_calibrate,
                   add_qat2ptq, add_export, add_sensitivity, add_compare, add_dataset, add_chart, add_help_markdown}) {
    RunFn fn = add(app);
    commands.emplace_back(app.get_subcommands({}).back(), std::move(fn));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // Libraries first: one may replace a built-in op (a newer build of the same plugin).
  for (const auto& p : plugins) {
    const qdeploy::Status st = qdeploy::load_plugin(p);
    if (!st.is_ok()) {
      std::cerr << "error: " << st.message() << "\n";
      return st.code() == qdeploy::StatusCode::kInternal ? 1 : 2;
    }
  }
  qdeploy::register_builtin_plugins();
  for (auto& [sub, fn] : commands) {
    if (sub->parsed()) return fn();
  }
  return 2;
}
