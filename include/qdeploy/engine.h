// Engines and execution contexts: build an engine from an ONNX model or load a plan file, then run it through
// contexts on the caller's streams. The header needs no CUDA headers: streams are passed as void* (a cudaStream_t;
// nullptr is the legacy default stream), device memory as void*.
//
//   qdeploy::BuildOptions opt;
//   opt.device = qdeploy::Device::kCuda;
//   opt.precision = qdeploy::Precision::kFp16;
//   auto engine = qdeploy::build("model.onnx", opt);          // or qdeploy::load("model.plan")
//   if (!engine) { std::fprintf(stderr, "%s\n", engine.status().message().c_str()); return 2; }
//   auto ctx = engine->create_context();
//   (*ctx)->set_input_shapes({{"images", {8, 3, 640, 640}}});
//   (*ctx)->bind("images", d_images);                         // caller's device memory (optional)
//   (*ctx)->enqueue(stream);                                  // asynchronous on the caller's stream
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qdeploy/device.h"
#include "qdeploy/kernel_policy.h"
#include "qdeploy/status.h"
#include "qdeploy/tensor.h"

namespace qd {
class Engine;  // the implementation (src/runtime/engine.h)
}

namespace qdeploy {

enum class Device { kCpu, kCuda };
enum class Precision { kFp32, kFp16, kInt8 };
// INT8 arithmetic: kExact (integer, as the INT8 contract says), kFake (CPU only: quantize-dequantize in float),
// kBitExact (CUDA: values near a rounding tie computed as the CPU reference does; slower epilogues).
enum class Int8Mode { kExact, kFake, kBitExact };
// Where the GPU's fp16 convolution candidates come from.
enum class TacticSource { kQdeploy, kCudnn };

// A binding's memory format (the dtype is kFloat32, kFloat16 or kInt8).
struct IoFormat {
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;
};

using ShapeMap = std::map<std::string, Dims>;  // input name -> dims

struct BuildOptions {
  Device device = Device::kCpu;
  Precision precision = Precision::kFp32;
  // Binds symbolic input dims (e.g. images -> {1, 3, 640, 640}); the batch dim may still change at run time.
  ShapeMap shapes;
  // A dynamic-shape profile: the engine accepts any input shape between min and max, and is tuned at opt.
  ShapeMap min_shapes, opt_shapes, max_shapes;
  // INT8: activation scales from a calibration cache (TensorRT's text format) and/or a precision JSON (qat2ptq's
  // output); nodes kept in fp16 or fp32 (names or regular expressions).
  std::string calib_cache;
  std::string precision_config;
  Int8Mode int8_mode = Int8Mode::kExact;
  std::vector<std::string> fp16_layers, fp32_layers;
  // CUDA: the device, a file remembering kernel timings between builds ("" = none), the candidate sources (empty =
  // all), the bindings' formats (one per input/output in order, or one for all; empty = fp32 NCHW).
  int device_index = 0;
  std::string timing_cache;
  std::vector<TacticSource> tactic_sources;
  std::vector<IoFormat> input_formats, output_formats;
  KernelPolicy kernel_policy;
};

// One layer of a GPU engine: the ONNX nodes it runs (joined with '+'), what kind of layer, the kernel chosen, its
// precision and memory formats ("nhwc8:fp16", "nchw:fp32"), multiply-accumulates, and its stream (0 main, 1 side).
struct LayerInfo {
  std::string name;
  std::string kind;
  std::string kernel;
  std::string precision;
  std::string in_format, out_format;
  double macs = 0;
  int stream = 0;
};

struct LayerTime {
  LayerInfo layer;
  double ms = 0;  // median over the profiled runs
};

struct MemoryReport {
  size_t arena_bytes = 0;       // planned activation memory (reused between tensors whose lifetimes do not overlap)
  size_t activation_bytes = 0;  // all activation tensors side by side (without reuse)
  size_t weight_bytes = 0;
};

// The state of runs of one engine: activation memory, I/O buffers, a captured CUDA graph. One per thread or stream;
// many may share one engine (a context keeps its engine alive); a context itself is not thread-safe. On the CPU engine the context runs synchronously
// (stream must be nullptr) and the GPU-only calls (bind, device_buffer, CUDA graphs, profile, memory_report) return
// kUnsupported.
class ExecutionContext {
 public:
  virtual ~ExecutionContext() = default;
  // The input shapes of the next runs (any shape inside the engine's profile); allocates what they need.
  virtual Status set_input_shapes(const ShapeMap& shapes) = 0;
  // The outputs at the current input shapes.
  virtual std::vector<TensorInfo> outputs() const = 0;
  // The caller's device memory for an input or output (in the binding's format); unbound ones use the context's own
  // buffers, whose addresses device_buffer gives (nullptr: no such binding, or no shapes set yet).
  virtual Status bind(const std::string& name, void* device_ptr) = 0;
  virtual void* device_buffer(const std::string& name) const = 0;
  // Replays the layers as one CUDA graph, captured on the first enqueue (and again when shapes or bindings change).
  virtual Status use_cuda_graph(bool on) = 0;
  // Copies host inputs (ONNX form: fp32 in the logical shape, converted to the binding's format; or already in the
  // binding's dtype and memory shape) into the input buffers, on `stream`.
  virtual Status upload(const std::map<std::string, HostTensor>& inputs, void* stream) = 0;
  // Enqueues one run on `stream` after the work already there; returns without waiting for it.
  virtual Status enqueue(void* stream) = 0;
  // The same, chained to work outside qdeploy without the host waiting: `stream` first waits for sync's events and
  // semaphores, then runs the engine, then records and signals sync's (CUDA engines; docs/python.md and
  // docs/cpp-api.md show a producer in another process).
  virtual Status enqueue(void* stream, const ExternalSync& sync) = 0;
  // The outputs as host tensors in their bindings' memory (fp32 NCHW unless BuildOptions::output_formats says
  // otherwise); synchronises `stream`.
  virtual Expected<std::vector<HostTensor>> download(void* stream) = 0;
  // Runs the layers one by one `iterations` times with events between them; the median per layer.
  virtual Expected<std::vector<LayerTime>> profile(int iterations, void* stream) = 0;
  virtual Expected<MemoryReport> memory_report() const = 0;
  // How the batch runs: "whole", "lanes2" or "lanes2_step" (KernelPolicy::batch_split); "whole" on the CPU.
  virtual std::string batch_split() const = 0;
};

// A compiled model: immutable, cheap to copy (copies share it), safe to use from several threads through contexts.
class Engine {
 public:
  const std::vector<TensorInfo>& inputs() const;
  // The outputs' dims are -1 where they follow a dynamic input dim.
  const std::vector<TensorInfo>& outputs() const;
  Device device() const;
  // "cpu", or the GPU's name.
  std::string device_name() const;
  // "cuda (NVIDIA H100 80GB HBM3, fp16)", with the INT8 share for INT8 engines.
  std::string describe() const;
  // The options the engine was built with (a loaded plan's, as recorded).
  BuildOptions options() const;
  // The input shapes the build tuned for (BuildOptions::shapes, the profile's opt, else the declared ones).
  ShapeMap build_shapes() const;
  // Writes the engine as a plan file (atomically).
  Status save(const std::string& path) const;
  Expected<std::unique_ptr<ExecutionContext>> create_context() const;
  // Synchronous convenience: host inputs in (as ExecutionContext::upload takes them), host outputs out, one call at a
  // time per engine.
  Expected<std::vector<HostTensor>> run(const std::map<std::string, HostTensor>& inputs) const;
  // GPU engines: the layer table and planned memory at the given input shapes (kUnsupported on the CPU).
  Expected<std::vector<LayerInfo>> layer_info(const ShapeMap& shapes) const;
  Expected<MemoryReport> memory_report(const ShapeMap& shapes) const;

  // The implementation, for code inside qdeploy (src/api/convert.h).
  explicit Engine(std::shared_ptr<qd::Engine> impl);
  const std::shared_ptr<qd::Engine>& impl() const { return impl_; }

 private:
  std::shared_ptr<qd::Engine> impl_;
  std::vector<TensorInfo> inputs_, outputs_;
};

// Imports the ONNX model and compiles it for options.device / options.precision (the GPU build times kernels).
Expected<Engine> build(const std::string& model_path, const BuildOptions& options);
// Loads a plan file written by Engine::save; refuses plans for another GPU or another plan format version.
Expected<Engine> load(const std::string& plan_path);
// The same on GPU `device_index` rather than the one the plan was built on (a server's engine per GPU).
Expected<Engine> load(const std::string& plan_path, int device_index);
// True when the file starts like a plan (so that a MODEL|PLAN argument can tell the two apart).
bool is_plan(const std::string& path);
// The library's version ("0.1.0") and whether it has the CUDA backend.
const char* version();
bool has_cuda();

}  // namespace qdeploy
