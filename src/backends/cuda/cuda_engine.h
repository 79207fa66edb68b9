// The CUDA engine. An immutable CudaEngine holds the model, its packed weights and the kernel choices; each
// CudaContext (one per stream or thread) holds activation memory, I/O buffers and captured CUDA graphs, and enqueues
// work on the caller's stream so that it composes with the caller's other CUDA work.
//
// Layers: convolutions (group 1, 2-d) with their bias, BatchNormalization, activation and residual Add fused run as
// tensor-core implicit GEMMs on NHWC fp16 (fp16 plans); MaxPool / nearest Resize / Concat between them stay in NHWC
// fp16, and Concat inputs are written in place by their producers. Every other op runs as a generic kernel on NCHW
// tensors in its ONNX dtype (fp32), and fp32 plans run everything that way (exact: no TF32, no fp16).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "quant/int8.h"
#include "runtime/engine.h"
#include "runtime/plan_sections.h"

namespace qd::cuda {

// The layer table, profile and memory report as the public API has them (include/qdeploy/engine.h).
using LayerInfo = qdeploy::LayerInfo;
using LayerTime = qdeploy::LayerTime;
using MemoryReport = qdeploy::MemoryReport;

class Instance;
class CudaContext;

// How a batch runs (CudaEngine::split_choice; runtime/plan_sections.h names them).
using ::qd::kSplitLanes;
using ::qd::kSplitLanesInStep;
using ::qd::kSplitWhole;
struct PackedConv;

class CudaEngine final : public Engine {
 public:
  // graph: imported (not yet shape-bound); opt.device must be cuda. kernel_choices (from a plan) skip timing.
  // INT8 plans take their scales and float nodes in int8 (load_int8_options).
  // frozen: a loaded plan, which never times kernels or writes the timing cache, whatever shapes come in (the
  // kernel choices it recorded, else the nearest timed batch's; LowerInput::frozen).
  static Expected<std::unique_ptr<CudaEngine>> create(Graph graph, const BuildOptions& opt,
                                                      std::map<std::string, std::string> kernel_choices = {},
                                                      Int8Options int8 = {}, bool frozen = false);
  ~CudaEngine() override;

  const std::vector<TensorDesc>& inputs() const override { return inputs_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override;
  Expected<std::vector<Tensor>> run(const std::map<std::string, Tensor>& inputs) override;
  Status save(const std::string& path) const override;

  std::unique_ptr<CudaContext> create_context() const;
  // The logical (ONNX) input shapes of host tensors given to run() or CudaContext::upload (runtime/io_format.h).
  std::map<std::string, Shape> input_shapes(const std::map<std::string, Tensor>& inputs) const;
  // Layer table and memory for the given input shapes (built on first use).
  Expected<std::vector<LayerInfo>> layer_info(const std::map<std::string, Shape>& shapes) const override;
  Expected<MemoryReport> memory_report(const std::map<std::string, Shape>& shapes) const override;
  const BuildOptions& options() const override { return opt_; }
  // A CudaContext behind the public interface (api_context.cpp).
  Expected<std::unique_ptr<qdeploy::ExecutionContext>> new_context() override;
  // The input shapes the build lowered and timed first (--shapes, --opt, else the declared ones).
  const std::map<std::string, Shape>& build_shapes() const override { return build_shapes_; }
  const std::string& device_name() const override { return device_name_; }
  // Through a context of its own (CudaContext::read_int8_tensors).
  Expected<std::map<std::string, Tensor>> read_int8_tensors(const std::map<std::string, Tensor>& inputs) override;

  // Internal: the lowered model for one set of input shapes (cached; thread-safe). tune: time the kernels of conv
  // shapes without a choice (the build does); else, inside a shape profile, an untimed batch size takes the nearest
  // timed one's kernels (LowerInput::tune).
  Expected<std::shared_ptr<const Instance>> instance(const std::map<std::string, Shape>& shapes,
                                                     bool tune = false) const;
  // Internal: kSplitWhole, kSplitLanes or kSplitLanesInStep for a batch of these shapes: recorded (plan, timing
  // cache), else timed (tune, or outside a shape profile), else whole. Lanes need a model that keeps batch items
  // apart (passes.h check_batch_split) and an even batch. KernelPolicy::batch_split forces one (A/B runs).
  Expected<std::string> split_choice(const std::map<std::string, Shape>& shapes, bool tune = false) const;

 private:
  CudaEngine(Graph g, BuildOptions opt) : graph_(std::move(g)), opt_(std::move(opt)) {}
  Status init();
  Expected<std::string> time_splits(const std::map<std::string, Shape>& shapes) const;
  // After the build: choices timed at run time (a batch size outside the build's shapes, its split) written to the
  // timing cache as well, so that the next process reading it picks the same kernels (caller holds mu_).
  void keep_run_time_choices() const;

  Graph graph_;
  BuildOptions opt_;
  Int8Options int8_;
  std::vector<TensorDesc> inputs_, outputs_;
  std::map<std::string, Shape> build_shapes_;
  std::string device_name_;
  int sm_ = 0;
  mutable std::mutex mu_;
  mutable std::map<std::map<std::string, Shape>, std::shared_ptr<const Instance>> instances_;
  // Packed weights shared by all instances (keyed by conv node name), and the kernel chosen per conv signature.
  mutable std::map<std::string, std::shared_ptr<PackedConv>> weights_;
  mutable std::map<std::string, std::string> kernel_choice_;
  bool frozen_ = false;  // loaded from a plan: see create()
  bool built_ = false;  // init() done: later timings go to the timing cache as they come (keep_run_time_choices)
  mutable std::optional<std::set<std::string>> int8_convs_;  // LowerInput::int8_convs (INT8 Conv, Gemm, MatMul nodes)
  mutable std::unique_ptr<CudaContext> default_ctx_;
  mutable std::mutex run_mu_;
  friend class Instance;
};

// Per-stream execution state. Not thread-safe: one context per thread/stream; many may share one engine.
class CudaContext {
  friend class CudaEngine;  // time_splits forces a split

 public:
  explicit CudaContext(const CudaEngine& engine);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  // Chooses the input shapes for the next runs (any batch inside the plan's profile) and allocates what they need.
  Status set_input_shapes(const std::map<std::string, Shape>& shapes);
  const std::vector<TensorDesc>& output_descs() const { return out_descs_; }
  // Device pointers the caller owns for inputs/outputs (by name); unbound ones use buffers of the context.
  Status bind(const std::string& name, void* device_ptr);
  void* device_buffer(const std::string& name) const;
  // Replays the layers as one CUDA graph captured on first use (recaptured when shapes or bindings change).
  void use_cuda_graph(bool on) { use_graph_ = on; }
  // Runs batches as `split` (kSplitWhole, kSplitLanes or kSplitLanesInStep; a model that cannot split runs whole)
  // instead of the engine's choice, from the next set_input_shapes (tests; KernelPolicy::batch_split forces one for
  // every context of an engine).
  void force_split(std::string split) { forced_split_ = std::move(split); }
  // How the batch runs: kSplitWhole, or the lanes' split.
  std::string split() const { return lanes_.empty() ? kSplitWhole : lane_slack_ ? kSplitLanesInStep : kSplitLanes; }

  Status upload(const std::map<std::string, Tensor>& inputs, cudaStream_t stream);
  Status enqueue(cudaStream_t stream);
  Expected<std::vector<Tensor>> download(cudaStream_t stream);
  // Runs the layers one by one `iterations` times with events between them; median per layer.
  Expected<std::vector<LayerTime>> profile(int iterations, cudaStream_t stream);
  // INT8 plans, for checking them against the reference: runs the layers once on `inputs` (synchronously) and
  // returns every quantized tensor's int8 values by graph value name, NCHW int8, copied before their first reader
  // runs (the memory plan reuses their buffers later).
  Expected<std::map<std::string, Tensor>> read_int8_tensors(const std::map<std::string, Tensor>& inputs);

 private:
  // before_layer (optional): called before layer l is enqueued.
  Status enqueue_layers(cudaStream_t stream, std::vector<cudaEvent_t>* marks,
                        const std::function<Status(size_t l)>& before_layer = nullptr);
  // enqueue_layers in steps: begin_layers, enqueue_layer for each layer in order, end_layers (which joins the side
  // stream into `stream`). two: side layers on the side stream; wait (optional): an event the layer's stream waits
  // for first; done (optional): recorded after it.
  Status begin_layers(bool two);
  Status enqueue_layer(size_t l, cudaStream_t stream, bool two, cudaEvent_t wait, cudaEvent_t done);
  Status end_layers(cudaStream_t stream);
  bool forked_ = false;  // a layer ran on the side stream since begin_layers
  void reset_graph();

  const CudaEngine& engine_;
  std::shared_ptr<const Instance> inst_;
  std::vector<TensorDesc> out_descs_;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::map<std::string, void*> own_io_;    // buffers of the context
  std::map<std::string, size_t> own_io_bytes_;
  std::map<std::string, void*> bound_;     // caller's pointers
  std::vector<void*> io_ptrs_;             // per binding slot of the instance
  bool use_graph_ = false;
  cudaGraphExec_t graph_exec_ = nullptr;
  cudaStream_t side_stream_ = nullptr;     // for the layers of Layer::side (made on first use)
  cudaEvent_t side_event_ = nullptr;       // orders the two streams
  std::vector<void*> graph_key_;           // the pointers the captured graph baked in
  // Batch split (CudaEngine::split_choice): the batch runs as lanes_.size() equal parts, each a context of its own
  // over its slice of this context's I/O buffers, enqueued concurrently (lane k on lane_streams_[k]); lane k's layer
  // l waits for the other lane's layer l - lane_slack_ (0: free).
  std::string forced_split_;  // a lane's, or a timing context's: the split instead of the engine's choice
  bool lane_ = false;         // a lane of another context (its shapes are not the caller's)
  int lane_slack_ = 0;
  std::vector<std::unique_ptr<CudaContext>> lanes_;
  std::vector<cudaStream_t> lane_streams_;
  std::vector<cudaEvent_t> lane_events_;  // [0]: the fork; [k + 1]: lane k's end; then each lane's layers' ends
  Status make_lanes(const std::map<std::string, Shape>& shapes, const std::string& split);
  Status ensure_arena();  // the whole batch's activation memory
  Status check_shapes(const std::map<std::string, Shape>& shapes) const;  // against the inputs and the profile
  Status enqueue_lanes(cudaStream_t stream);
};

}  // namespace qd::cuda
