// The lowered form of a model for one set of input shapes: tensors, layers and the activation memory plan.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_engine.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/conv.h"
#include "backends/cuda/kernels/generic.h"
#include "backends/cuda/kernels/nhwc.h"
#include "quant/int8.h"

namespace qd::cuda {


// A convolution's weights as the fused kernel reads them: [K][R][S][C padded to 8] fp16, rows padded to 32, with the
// bias (and any folded BatchNormalization) in fp32.
struct PackedConv {
  DeviceBuffer w, bias;
  DeviceBuffer alpha;  // INT8: s_x * s_w[k]
  DeviceBuffer dense;  // fp16 [K][R][S][C] without the row padding, made when a cuDNN kernel needs it
  int K = 0, C = 0, R = 0, S = 0, Kp = 0;
  int64_t acc_bound = INT64_MAX;  // INT8: int8_acc_bound of the weights (ConvParams::small_acc)
};

struct TensorRef {
  DType dtype = DType::kUndefined;
  Shape shape;                 // logical (ONNX) shape
  bool nhwc = false;           // NHWC fp16 view: [N, H, W, ld], channels at [coff, coff + C)
  int ld = 0, coff = 0;
  int buffer = -1;             // arena buffer (BufferLife index); -1 for constants and I/O
  int slot = -1;               // I/O slot (inputs first, then outputs); -1 otherwise
  const void* constant = nullptr;
  size_t bytes = 0;
  float scale = 0.f;           // int8 I/O bindings: the value is q * scale
};

struct Pointers {
  char* arena;
  const std::vector<void*>* io;
  const std::vector<size_t>* offsets;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const = 0;
  LayerInfo info;
  std::vector<int> ins, outs;  // tensor ids
  int workspace = -1;          // arena buffer of scratch memory
  // Two streams (plan/stream_schedule.h): whether it runs on the side stream, and whether its stream first waits for
  // the work enqueued so far on the other one.
  bool side = false, wait = false;
};

class Instance {
 public:
  std::vector<TensorRef> tensors;
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<size_t> buffer_offsets;
  size_t arena_bytes = 0, activation_bytes = 0;
  size_t weight_bytes = 0;   // the packed weights its layers read
  // Arena offsets of the conv workspace (split-K partial sums, cuDNN's scratch) that the main stream's layers share
  // (they run in order), and of the side stream's.
  size_t splitk_offset = 0, side_splitk_offset = 0;
  // Why the batch may not run as parts (CudaContext's lanes; passes.h check_batch_split); empty where it may.
  std::string split_refusal;
  bool uses_cudnn = false;   // some conv runs through cuDNN (a thread needs its handle before capturing a graph)
  std::vector<std::string> slot_names;  // inputs then outputs
  std::vector<int> slot_tensor;
  size_t num_inputs = 0;
  std::vector<TensorDesc> outputs;
  std::vector<std::unique_ptr<DeviceBuffer>> constants;
  // INT8 plans: each quantized tensor (a graph value's int8 copy) and the first layer reading it, for
  // CudaContext::read_int8_tensors.
  struct Int8Probe {
    std::string value;
    int tensor = -1;
    int first_reader = -1;
    bool s2d = false;  // stored as its space-to-depth
  };
  std::vector<Int8Probe> int8_probes;

  void* ptr(int t, const Pointers& p) const {
    const TensorRef& r = tensors[t];
    if (r.constant) return const_cast<void*>(r.constant);
    if (r.slot >= 0) return (*p.io)[r.slot];
    return p.arena + (*p.offsets)[r.buffer];
  }
  NhwcView view(int t, const Pointers& p) const { return {ptr(t, p), tensors[t].ld, tensors[t].coff}; }
  TensorView any_view(int t, const Pointers& p) const {
    const TensorRef& r = tensors[t];
    return {ptr(t, p), r.dtype, r.nhwc, r.ld, r.coff, r.scale};
  }
  size_t slot_bytes(size_t slot) const { return tensors[slot_tensor[slot]].bytes; }
  bool any_side() const {
    return std::any_of(layers.begin(), layers.end(), [](const auto& l) { return l->side; });
  }
};

// Lowers `graph` (imported, not shape-bound) for the input shapes; times kernel candidates for signatures missing
// from `choices` (and records the winners there).
struct LowerInput {
  const Graph* graph;
  const BuildOptions* opt;
  std::map<std::string, Shape> shapes;
  std::map<std::string, std::string>* choices;
  std::map<std::string, std::shared_ptr<PackedConv>>* weights;
  const Int8Options* int8 = nullptr;  // the scales and float nodes (empty unless an INT8 plan); never null
  // INT8 plans: the convs that run in INT8, the same for every shape; filled by the first lowering (lower_int8 on a
  // copy of the graph is too slow to redo for each new batch size).
  std::optional<std::set<std::string>>* int8_convs = nullptr;
  // Time every conv signature without a choice. When false (shapes met at run time inside a plan's profile), a batch
  // size that was not timed takes the nearest timed batch's choice instead.
  bool tune = true;
  // A loaded plan: nothing is timed, whatever the shapes; a conv without a recorded choice takes the nearest timed
  // batch's, else its first candidate (lowering stays deterministic and never stalls to time).
  bool frozen = false;
  // The input bindings' formats (CudaEngine::inputs(): dtype, layout, int8 scale), in graph order; nullptr: the ONNX
  // form. The outputs' come from opt->output_formats, applied to the outputs' types once inferred.
  const std::vector<TensorDesc>* in_formats = nullptr;
};
Expected<std::shared_ptr<Instance>> lower(const LowerInput& in);

}  // namespace qd::cuda
