// The build flags every command that takes MODEL|PLAN accepts (DESIGN.md: an ONNX model is built on the fly with
// the same flags `qdeploy build` takes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/engine.h"

namespace qd::cli {

struct BuildFlags {
  std::string device = "cpu";
  std::string precision = "fp32";
  std::vector<std::string> shapes;
  std::string calib_cache;
  std::string int8_mode = "exact";
  std::vector<std::string> fp16_layers, fp32_layers;
};

void add_build_flags(CLI::App* sub, BuildFlags& f);
// Builds MODEL with the flags; prints nothing.
Expected<std::unique_ptr<Engine>> build_from_flags(const std::string& model, const BuildFlags& f);

// Image files (jpg/jpeg/png) among `paths`, directories expanded (not recursively), sorted by name.
Expected<std::vector<std::string>> list_images(const std::vector<std::string>& paths);

}  // namespace qd::cli
