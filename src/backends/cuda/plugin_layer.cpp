#include "backends/cuda/plugin_layer.h"

#include <algorithm>
#include <sstream>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/device_buffer.h"

namespace qd::cuda {

namespace {

size_t bytes_of(const qdeploy::TensorView& v) {
  const int64_t last = v.shape.empty() ? 1 : v.shape.back();
  const int64_t rows = last ? v.numel() / last : 0;
  return static_cast<size_t>(rows * v.ld()) * dtype_size(from_plugin_dtype(v.dtype));
}

std::string describe(const std::vector<qdeploy::TensorView>& views) {
  std::ostringstream s;
  for (const auto& v : views) {
    s << dtype_name(from_plugin_dtype(v.dtype)) << "[";
    for (size_t i = 0; i < v.shape.size(); ++i) s << (i ? "x" : "") << v.shape[i];
    s << "]/" << v.ld() << " ";
  }
  return s.str();
}

// The node's signature for the choices map: the op, its attributes, and its tensors.
std::string signature(const PluginLayer& l) {
  std::string s = "plugin " + l.op->qualified + " ";
  for (const auto& [name, v] : l.attrs.all()) {
    s += name + "=" + attr_to_string(std::visit([](const auto& x) { return AttrValue(x); }, v)) + " ";
  }
  return s + describe(l.in) + "-> " + describe(l.out);
}

std::string candidate_name(const qdeploy::CudaKernelDef& k, int64_t t) {
  return k.name + "/" + (k.tactic_name ? k.tactic_name(t) : std::to_string(t));
}

}  // namespace

Status PluginLayer::enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const {
  std::vector<qdeploy::TensorView> i = in, o = out;
  for (size_t k = 0; k < i.size(); ++k) i[k].data = static_cast<char*>(inst.ptr(ins[k], ptrs)) + in_offset[k];
  for (size_t k = 0; k < o.size(); ++k) o[k].data = inst.ptr(outs[k], ptrs);
  void* ws = workspace >= 0 ? ptrs.arena + (*ptrs.offsets)[workspace] : nullptr;
  return from_plugin_status(kernel->launch(attrs, tactic, i, o, ws, s));
}

qdeploy::TensorView plugin_view(DType dtype, const Shape& shape, int64_t row_stride) {
  qdeploy::TensorView v;
  v.dtype = to_plugin_dtype(dtype);
  v.shape = shape;
  v.row_stride = row_stride;
  return v;
}

Status plugin_supported(const PluginOp& op, const qdeploy::Attrs& attrs, const std::vector<qdeploy::TensorView>& in,
                        const std::vector<qdeploy::TensorView>& out) {
  if (op.def.cuda_kernels.empty()) {
    return unsupported(op.qualified + " declares no CUDA kernel (plugin " + op.source + "): it runs on --device cpu only");
  }
  std::string why;
  for (const auto& k : op.def.cuda_kernels) {
    const qdeploy::Status st = k.supports(attrs, in, out);
    if (st.is_ok()) return Status::ok();
    why += "\n  " + k.name + ": " + st.message();
  }
  return unsupported("no CUDA kernel of " + op.qualified + " runs " + describe(in) + "->" + why);
}

Status choose_plugin_kernel(PluginLayer* l, std::map<std::string, std::string>* choices, bool frozen) {
  struct Cand {
    const qdeploy::CudaKernelDef* k;
    int64_t t;
  };
  std::vector<Cand> cands;
  for (const auto& k : l->op->def.cuda_kernels) {
    if (!k.supports(l->attrs, l->in, l->out).is_ok()) continue;
    for (int64_t t : k.tactics(l->attrs, l->in, l->out)) cands.push_back({&k, t});
  }
  if (cands.empty()) return plugin_supported(*l->op, l->attrs, l->in, l->out);
  const std::string sig = signature(*l);
  if (auto it = choices->find(sig); it != choices->end()) {
    for (const Cand& c : cands) {
      if (candidate_name(*c.k, c.t) == it->second) {
        l->kernel = c.k;
        l->tactic = c.t;
        return Status::ok();
      }
    }
  }
  if (frozen) {  // a loaded plan times nothing: deterministic, and no stall to time
    l->kernel = cands.front().k;
    l->tactic = cands.front().t;
    return Status::ok();
  }
  // Time every candidate on zeroed scratch tensors with the node's strides and offsets (zero offsets sample a regular
  // grid: the same memory traffic as small learned ones).
  std::vector<DeviceBuffer> bufs(l->in.size() + l->out.size());
  std::vector<qdeploy::TensorView> in = l->in, out = l->out;
  for (size_t k = 0; k < in.size(); ++k) {
    QD_RETURN_IF_ERROR(bufs[k].alloc(std::max<size_t>(bytes_of(in[k]) + l->in_offset[k], 256)));
    QD_CUDA_TRY(cudaMemset(bufs[k].get(), 0, bufs[k].size()));
    in[k].data = static_cast<char*>(bufs[k].get()) + l->in_offset[k];
  }
  for (size_t k = 0; k < out.size(); ++k) {
    DeviceBuffer& b = bufs[in.size() + k];
    QD_RETURN_IF_ERROR(b.alloc(std::max<size_t>(bytes_of(out[k]), 256)));
    out[k].data = b.get();
  }
  DeviceBuffer ws;
  cudaStream_t s;
  QD_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float best = 1e30f;
  const Cand* pick = nullptr;
  Status st;
  for (const Cand& c : cands) {
    const size_t need = c.k->workspace ? c.k->workspace(l->attrs, c.t, l->in, l->out) : 0;
    if (need > ws.size()) st = ws.alloc(need);
    if (!st.is_ok()) break;
    std::vector<float> times;
    bool ok = true;
    for (int rep = 0; rep < 6 && ok; ++rep) {
      cudaEventRecord(e0, s);
      for (int j = 0; j < 3 && ok; ++j) ok = c.k->launch(l->attrs, c.t, in, out, ws.get(), s).is_ok();
      cudaEventRecord(e1, s);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (rep > 0) times.push_back(ms);  // the first round warms up
    }
    if (!ok) {  // a candidate that cannot launch here is no candidate
      cudaStreamSynchronize(s);
      cudaGetLastError();
      continue;
    }
    std::sort(times.begin(), times.end());
    if (times[times.size() / 2] < best) {
      best = times[times.size() / 2];
      pick = &c;
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  QD_RETURN_IF_ERROR(st);
  if (!pick) return internal("no CUDA kernel of " + l->op->qualified + " could run " + describe(l->in));
  l->kernel = pick->k;
  l->tactic = pick->t;
  (*choices)[sig] = candidate_name(*pick->k, pick->t);
  return Status::ok();
}

}  // namespace qd::cuda
