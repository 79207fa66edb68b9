// The qdeploy CLI: one file per command. Each add_* function declares its subcommand and options on `app`
// and returns the function that runs it once the arguments are parsed.
#pragma once

#include <functional>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "core/status.h"

namespace qd::cli {

using RunFn = std::function<int()>;

RunFn add_inspect(CLI::App& app);
RunFn add_build(CLI::App& app);
RunFn add_run(CLI::App& app);
RunFn add_bench(CLI::App& app);
RunFn add_ops(CLI::App& app);
RunFn add_detect(CLI::App& app);
RunFn add_classify(CLI::App& app);
RunFn add_calibrate(CLI::App& app);
RunFn add_eval(CLI::App& app);
RunFn add_dataset(CLI::App& app);
RunFn add_qat2ptq(CLI::App& app);
RunFn add_sensitivity(CLI::App& app);
RunFn add_chart(CLI::App& app);
RunFn add_compare(CLI::App& app);
RunFn add_export(CLI::App& app);
// Hidden: prints docs/cli.md from the subcommands declared on `app` before it runs.
RunFn add_help_markdown(CLI::App& app);

// Prints "error: ..." to stderr and returns the exit code for the status (2 bad input, 1 internal).
int report(const Status& s);

}  // namespace qd::cli
