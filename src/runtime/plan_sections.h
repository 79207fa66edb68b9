// The sections of a CPU plan (runtime-internal): the CPU engine writes them in Engine::save, plan_engine.cpp reads
// them back. A CPU plan holds what rebuilds the exact same engine without the ONNX file or the calibration cache:
//   "io", "layers"    (every target: plan/plan_file.h)
//   "graph"           the imported graph the engine keeps (after stripping Q/DQ pairs), plan/graph_codec.h
//   "build_options"   the BuildOptions it was built with
//   "int8"            INT8 plans: the activation and weight scales and the nodes kept in float (exact names: the
//                     --fp32-layers patterns resolved when the plan was built)
#pragma once

#include <map>
#include <memory>
#include <string>

#include "ir/graph.h"
#include "plan/plan_file.h"
#include "quant/int8.h"
#include "runtime/engine.h"

namespace qd {

// A plan with the header every engine writes (format and qdeploy versions, target, precision, shape profile: the
// --min/--opt/--max range, else the declared shapes) and its "io" section; the engine adds the rest.
PlanFile new_plan(const std::string& target, const BuildOptions& opt, const std::vector<TensorDesc>& inputs,
                  const std::vector<TensorDesc>& outputs);

std::string encode_build_options(const BuildOptions& opt);
// Validates the values (device, precision, int8 mode, shape profile) as build_engine would.
Expected<BuildOptions> decode_build_options(const std::string& data);

// Writes mode, scales and float_node_names; the float_nodes patterns must be resolved into names first (as
// CpuEngine::save does), so that loading a plan never evaluates a regex from a file.
std::string encode_int8_options(const Int8Options& opt);
// Scales must be finite and positive.
Expected<Int8Options> decode_int8_options(const std::string& data);

// A CUDA plan's sections (target "cuda"): "graph", "build_options", "cuda.kernels" (JSON: conv signature -> kernel
// the build chose; "split:..." keys: how a batch runs, CudaEngine::split_choice) and, for INT8 plans, "int8"; decoded and checked without a GPU, for load_cuda_engine and the plan
// fuzzer.
struct CudaPlanParts {
  Graph graph;
  BuildOptions options;
  std::map<std::string, std::string> kernels;
  Int8Options int8;
};
Expected<CudaPlanParts> decode_cuda_plan(const PlanFile& plan);

// The CPU engine of a plan whose header says target "cpu" (cpu_engine.cpp).
Expected<std::unique_ptr<Engine>> load_cpu_engine(const PlanFile& plan);

}  // namespace qd
