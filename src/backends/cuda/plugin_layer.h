// Plugin ops on the GPU: the layer that launches a plugin's CUDA kernel (qdeploy/plugin.h's CudaKernelDef), and the
// choice among the kernels and launch configurations ("tactics") the plugin declares: each candidate that supports
// the node's tensors is timed on scratch memory laid out like the real run, and the fastest is recorded under the
// node's signature in the choices the plan and the timing cache keep (a plan loads without timing).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/instance.h"
#include "ops/plugin_registry.h"

namespace qd::cuda {

class PluginLayer final : public Layer {
 public:
  const PluginOp* op = nullptr;
  qdeploy::Attrs attrs;
  const qdeploy::CudaKernelDef* kernel = nullptr;
  int64_t tactic = 0;
  // What the kernel sees of each input and output (dtype, shape, row stride; data filled at launch), and the byte
  // offset of each into its tensor (a column slice of a wider row read in place).
  std::vector<qdeploy::TensorView> in, out;
  std::vector<size_t> in_offset;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override;
};

// The tensor descriptions a node gives a plugin: dense unless a row stride is given.
qdeploy::TensorView plugin_view(DType dtype, const Shape& shape, int64_t row_stride = 0);
// Whether some CUDA kernel of `op` supports these inputs and outputs (answerable without a GPU); the reasons
// otherwise.
Status plugin_supported(const PluginOp& op, const qdeploy::Attrs& attrs, const std::vector<qdeploy::TensorView>& in,
                        const std::vector<qdeploy::TensorView>& out);
// Picks the kernel and tactic for the layer (from `choices`, or by timing every candidate and recording the winner
// there) and sets them on the layer. `frozen` (a loaded plan): nothing is timed; without a recorded choice the first
// candidate runs.
Status choose_plugin_kernel(PluginLayer* layer, std::map<std::string, std::string>* choices, bool frozen);

}  // namespace qd::cuda
