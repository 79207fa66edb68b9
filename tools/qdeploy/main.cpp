// qdeploy: the command-line tool. Dispatches to one subcommand per file (see commands.h).
#include <vector>

#include "commands.h"
#include "qdeploy/engine.h"

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
  // The order here is the order of `qdeploy --help`.
  std::vector<std::pair<CLI::App*, RunFn>> commands;
  for (auto add : {add_inspect, add_build, add_run, add_bench, add_ops, add_detect, add_eval, add_calibrate, add_qat2ptq,
                   add_export, add_sensitivity, add_compare, add_dataset, add_chart, add_help_markdown}) {
    RunFn fn = add(app);
    commands.emplace_back(app.get_subcommands({}).back(), std::move(fn));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  for (auto& [sub, fn] : commands) {
    if (sub->parsed()) return fn();
  }
  return 2;
}
