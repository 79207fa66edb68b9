// A backend as the runtime sees it: a device name and two entry points, one that compiles an imported graph into an
// engine and one that loads the plans it saved. The table of backends a build has is filled in one place above the
// backends and the runtime (src/frontend/frontend.cpp), so that the runtime never calls into a backend library and the
// libraries do not link each other in a cycle (the pattern of ggml's backend registry).
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"
#include "runtime/engine.h"

namespace qd {

struct PlanFile;  // plan/plan_file.h

struct Backend {
  const char* device;  // BuildOptions::device and the plan header's target: "cpu", "cuda"
  // Compiles `g`, as imported (not yet prepared; a QAT model still has its Q/DQ pairs), for opt.precision. The
  // options have passed check_build_options. `source` names the model in messages.
  Expected<std::unique_ptr<Engine>> (*build)(Graph g, const BuildOptions& opt, const std::string& source);
  // Loads a plan whose header names this backend as its target (its format and checksum are checked).
  Expected<std::unique_ptr<Engine>> (*load)(const PlanFile& plan);
  // The options this backend refuses, checked before the model is read (after check_build_options).
  Status (*check)(const BuildOptions& opt);
};

// The CPU reference backend (runtime/cpu_engine.cpp).
const Backend& cpu_backend();
// The CUDA backend (backends/cuda/cuda_engine.cpp); defined only in builds with it (QD_HAVE_CUDA).
const Backend& cuda_backend();

// The backend for `device` in this build, or nullptr (src/frontend/frontend.cpp).
const Backend* find_backend(const std::string& device);

}  // namespace qd
