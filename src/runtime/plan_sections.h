// The sections of a CPU plan (runtime-internal): the CPU engine writes them in Engine::save, plan_engine.cpp reads
// them back. A CPU plan holds what rebuilds the exact same engine without the ONNX file or the calibration cache:
//   "io", "layers"    (every target: plan/plan_file.h)
//   "graph"           the imported graph the engine keeps (after stripping Q/DQ pairs), plan/graph_codec.h
//   "build_options"   the BuildOptions it was built with
//   "int8"            INT8 plans: the activation and weight scales and the nodes kept in float (exact names: the
//                     --fp32-layers patterns resolved when the plan was built)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
// the build chose; "split:n<batch>:<input>=<dims>;..." keys: how a batch of those shapes runs, one of the splits
// below, CudaEngine::split_choice) and, for INT8 plans, "int8"; decoded and checked without a GPU, for
// load_cuda_engine, `qdeploy inspect` and the plan fuzzer.
struct CudaPlanParts {
  Graph graph;
  BuildOptions options;
  std::map<std::string, std::string> kernels;
  Int8Options int8;
};
Expected<CudaPlanParts> decode_cuda_plan(const PlanFile& plan);
// The "cuda.kernels" section alone: a JSON object of strings.
Expected<std::map<std::string, std::string>> decode_cuda_kernels(const std::string& data);

// How a batch runs: whole, or as two halves on two streams (lanes) that overlap, free or held in step (each lane's
// layer l after the other's layer l - 2).
inline constexpr const char* kSplitWhole = "whole";
inline constexpr const char* kSplitLanes = "lanes2";
inline constexpr const char* kSplitLanesInStep = "lanes2_step";
inline constexpr const char* kSplits[] = {kSplitWhole, kSplitLanes, kSplitLanesInStep};
// A split in words ("two halves on two streams, held in step"); null for a value that is none of them.
const char* split_words(const std::string& split);
// The key of a batch's split among the kernel choices (plan and timing cache): "split:n<batch>:" and each input's
// "name=dims;".
std::string batch_split_key(int64_t batch, const std::map<std::string, Shape>& shapes);
// The batch splits among a CUDA plan's kernel choices, by batch: the batch, its inputs ("images=32x3x640x640", comma
// separated) and the split as recorded; keys of another form are left out.
struct BatchSplit {
  int64_t batch = 0;
  std::string inputs, split;
};
std::vector<BatchSplit> batch_splits(const std::map<std::string, std::string>& kernels);

// The CPU engine of a plan whose header says target "cpu" (cpu_engine.cpp).
Expected<std::unique_ptr<Engine>> load_cpu_engine(const PlanFile& plan);

}  // namespace qd
