// Engine: a model compiled for a device, run with named tensors. The CPU engine executes the prepared IR with the
// reference kernels; the CUDA engine (GPU issue) implements the same interface.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/precision.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "qdeploy/engine.h"

namespace qd {

struct PlanFile;    // plan/plan_file.h
struct Int8Report;  // quant/int8.h

struct BuildOptions {
  std::string device = "cpu";      // cpu | cuda
  Precision precision = Precision::kFp32;  // --precision fp32 | fp16 | int8 (core/precision.h reads the words)
  // Binds symbolic input dims (e.g. images:1x3x640x640). The batch dim may still change at run time.
  std::map<std::string, Shape> shapes;
  // INT8: activation scales from a calibration cache (TensorRT text format); exact integer arithmetic or fake quant.
  std::string calib_cache;
  // exact | fake (CPU) | bitexact (CUDA: values near a rounding tie computed as the reference does, so that the plan's
  // INT8 tensors are the reference's to the bit; slower epilogues. On the CPU the same as exact.)
  std::string int8_mode = "exact";
  // Nodes kept in higher precision (names or regexes).
  std::vector<std::string> fp16_layers, fp32_layers;
  // JSON with per-tensor INT8 scales and per-node precisions (qat2ptq's output format).
  std::string precision_config;
  // Dynamic-shape profile (--min/--opt/--max): the plan accepts any input shape between min and max.
  std::map<std::string, Shape> min_shapes, opt_shapes, max_shapes;
  // CUDA: the device, and a file remembering kernel timings between builds ("" = none).
  int device_index = 0;
  std::string timing_cache;
  // CUDA fp16 convolutions: where the timed kernel candidates come from, "qdeploy" (its own kernels) and/or "cudnn"
  // (cuDNN's algorithms, when libcudnn.so.9 loads); empty = both.
  std::vector<std::string> tactic_sources;
  // CUDA: the memory format of the input and output bindings ("fp16:nhwc", "int8:nchw", ...; runtime/io_format.h):
  // one per input (output) in order, or one for all; empty = fp32:nchw, the ONNX form.
  std::vector<std::string> input_formats, output_formats;
  // CUDA: the kernel families and scheduling features the build may use (include/qdeploy/kernel_policy.h); recorded
  // in the plan and part of the timing cache's key.
  qdeploy::KernelPolicy kernel_policy;
};

struct TensorDesc {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;  // the ONNX (logical) shape, -1 where the dim is chosen at run time
  // The binding's memory (--input-format / --output-format): kNHWC holds the 4-d tensor as [N, H, W, C]; an int8
  // binding of a float tensor holds q = saturate(round_half_even(x / scale)) with this scale.
  TensorLayout layout = TensorLayout::kNCHW;
  float scale = 0.f;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const std::vector<TensorDesc>& inputs() const = 0;
  virtual const std::vector<TensorDesc>& outputs() const = 0;
  // "cpu (reference, fp32)"; for INT8 also how much of the model runs in INT8.
  virtual std::string describe() const = 0;
  // INT8 engines: which Conv/Gemm layers run in INT8 and which stay in float (nullptr otherwise).
  virtual const Int8Report* int8_report() const { return nullptr; }
  // Runs once; input shapes may differ from the declared ones only in dims declared dynamic (-1).
  virtual Expected<std::vector<Tensor>> run(const std::map<std::string, Tensor>& inputs) = 0;
  // Writes the engine as a plan file (atomically).
  virtual Status save(const std::string& path) const = 0;

  // The options it was built with (a loaded plan's, as recorded) and the input shapes the build prepared.
  virtual const BuildOptions& options() const = 0;
  virtual const std::map<std::string, Shape>& build_shapes() const = 0;
  // "cpu", or the GPU's name.
  virtual const std::string& device_name() const;
  // A context for runs on the caller's streams (include/qdeploy/engine.h). The default runs synchronously through
  // run() and answers kUnsupported for the GPU-only calls (host_context.cpp); GPU engines implement their own.
  virtual Expected<std::unique_ptr<qdeploy::ExecutionContext>> new_context();
  // GPU engines: the layer table and planned memory at these input shapes; kUnsupported by default.
  virtual Expected<std::vector<qdeploy::LayerInfo>> layer_info(const std::map<std::string, Shape>& shapes) const;
  virtual Expected<qdeploy::MemoryReport> memory_report(const std::map<std::string, Shape>& shapes) const;
  // GPU INT8 engines: the int8 tensors one run of `inputs` computes, by name (values q of the plan's scales), as the
  // plan runs them (its fused layers): what `qdeploy compare` reads. kUnsupported by default.
  virtual Expected<std::map<std::string, Tensor>> read_int8_tensors(const std::map<std::string, Tensor>& inputs);
};

// Imports and compiles MODEL (ONNX) for opt.device / opt.precision. Defined with the backend table in src/frontend/
// (the library above the runtime and the backends; runtime/backend.h).
Expected<std::unique_ptr<Engine>> build_engine(const std::string& model_path, const BuildOptions& opt);
// Loads a plan file written by Engine::save (any device); refuses plans for another GPU or format version. Defined in
// src/frontend/ as well.
Expected<std::unique_ptr<Engine>> load_engine(const std::string& plan_path);
// True when the file starts with the plan magic (so MODEL|PLAN arguments can tell the two apart); a damaged magic
// still counts, so that load_engine says what is wrong with the plan.
bool is_plan_file(const std::string& path);

// The inputs an engine built with `opt` takes (-1 where chosen at run time: a symbolic batch, dims that differ
// between --min and --max) and the shapes it is prepared at (--shapes, --opt, else the declared ones with a symbolic
// batch of 1). Errors for --min/--opt/--max names that are not inputs.
Expected<std::vector<TensorDesc>> engine_inputs(const Graph& g, const BuildOptions& opt,
                                                std::map<std::string, Shape>* build_shapes);
// Inputs outside a --min/--max profile are refused (engines choose kernels and memory for the profile).
Status check_in_profile(const BuildOptions& opt, const std::map<std::string, Shape>& shapes);

// Parses --device / --precision values.
Status check_build_options(const BuildOptions& opt);

}  // namespace qd
