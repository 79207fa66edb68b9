// The build flags every command that takes MODEL|PLAN accepts (DESIGN.md: an ONNX model is built on the fly with
// the same flags `qdeploy build` takes).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "calib_data.h"
#include "runtime/engine.h"
#include "tasks/model_input.h"

namespace qd::cli {

struct BuildFlags {
  std::string device = "cpu";
  std::string precision = "fp32";
  std::vector<std::string> shapes;
  std::string calib_cache;
  std::vector<std::string> calib_data;  // --calib: calibrate at build time on this data (images or tensor files)
  std::string calib_algo = CalibDefaults::kAlgo;  // the defaults of every command that calibrates
  int calib_batches = CalibDefaults::kBatches;
  std::string int8_mode = "exact";
  std::vector<std::string> fp16_layers, fp32_layers;
  std::string precision_config;
  std::vector<std::string> min_shapes, opt_shapes, max_shapes;  // NAME:DIMS (a dynamic-shape profile)
  std::string timing_cache;
  std::vector<std::string> tactic_sources;
  std::vector<std::string> input_formats, output_formats;
  // --preprocess SPEC: how images become the model's input, for --calib and for the command's own images (not a
  // build option: a plan takes it too).
  std::string preprocess;
  std::string kernel_policy;  // --kernel-policy (qdeploy::KernelPolicy::parse's words); QD_* variables add to it
  // Not a flag: the letterbox style of --calib's detector images, set by a command to the style it runs inference
  // with (eval: its --letterbox; detect: ultralytics), so that calibration sees what inference sees.
  std::string calib_letterbox = kDefaultLetterbox;
};

void add_build_flags(CLI::App* sub, BuildFlags& f);
// --letterbox val|ultralytics|cudla (default kDefaultLetterbox), the same option and help wherever a command
// letterboxes detector images (eval, calibrate, sensitivity); tasks/model_input.h's letterbox_options() reads it.
void add_letterbox_option(CLI::App* sub, std::string& style);
// Builds MODEL with the flags, or loads it when it is a plan; prints nothing but --calib's progress. A plan's build
// options are fixed: with a plan, --device / --precision must match it (or be left out) and other build flags are an
// error. --calib DATA calibrates MODEL first (as `qdeploy calibrate` does) and writes the cache to --calib-cache, or to
// a temporary file removed after the build (the plan keeps the scales).
Expected<std::unique_ptr<Engine>> build_from_flags(const std::string& model, const BuildFlags& f);
// The build flags given other than --device, --precision and --preprocess (comma separated; empty when none): what a
// plan refuses, and what takes `run` off the reference backend.
std::string build_flags_given(const BuildFlags& f);
// The check build_from_flags applies to a plan: flags that would have changed it are refused, not ignored.
Status check_flags_for_plan(const std::string& plan_path, const BuildFlags& f);

// The kernel policy of a CUDA build: --kernel-policy's words, then the A/B environment switches (QD_NO_PDL=1,
// QD_ONLY_CONFIG=NAME, QD_SPLIT=lanes2, ...: docs/cpp-api.md#kernelpolicy lists them), which the library itself never
// reads. `set` (optional) gets the variables that were set.
Expected<qdeploy::KernelPolicy> kernel_policy_from_flags(const BuildFlags& f, std::vector<std::string>* set = nullptr);

// Prepares `g` at `shapes` (--shapes) for a command that summarizes or rewrites a model without running it (inspect,
// qat2ptq). An error (prefixed with `model`) when that fails although every input dim is known: the model's nodes
// are invalid. OK when a dim left open made it fail (shapes and MACs stay unknown): *prepared holds that failure.
Status prepare_unless_open(Graph& g, const std::map<std::string, Shape>& shapes, const std::string& model,
                           Status* prepared);

// Image files (jpg/jpeg/png) among `paths`, directories expanded (not recursively), sorted by name.
Expected<std::vector<std::string>> list_images(const std::vector<std::string>& paths);

}  // namespace qd::cli
