// include/qdeploy/device.h on the CUDA runtime (runtime/no_cuda.cpp answers kUnsupported in builds without it).
#include <cuda_runtime.h>

#include "backends/cuda/kernel_timeline.h"
#include "qdeploy/device.h"
#include "runtime/public_types.h"

namespace qdeploy {

namespace {

Status cuda_error(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return {StatusCode::kInternal, std::string(what) + ": " + cudaGetErrorString(e)};
}

}  // namespace

Expected<Stream> Stream::create() {
  cudaStream_t s = nullptr;
  if (Status st = cuda_error(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); !st) return st;
  Stream out;
  out.handle_ = std::shared_ptr<void>(s, [](void* p) { cudaStreamDestroy(static_cast<cudaStream_t>(p)); });
  return out;
}

Status Stream::synchronize() const {
  return cuda_error(cudaStreamSynchronize(static_cast<cudaStream_t>(handle())), "cudaStreamSynchronize");
}

Expected<Event> Event::create(bool timing) {
  cudaEvent_t e = nullptr;
  const unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
  if (Status st = cuda_error(cudaEventCreateWithFlags(&e, flags), "cudaEventCreate"); !st) return st;
  Event out;
  out.handle_ = std::shared_ptr<void>(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  return out;
}

Status Event::record(void* stream) const {
  return cuda_error(cudaEventRecord(static_cast<cudaEvent_t>(handle()), static_cast<cudaStream_t>(stream)),
                    "cudaEventRecord");
}

Status Event::synchronize() const {
  return cuda_error(cudaEventSynchronize(static_cast<cudaEvent_t>(handle())), "cudaEventSynchronize");
}

Status Event::wait_on(void* stream) const {
  return cuda_error(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(handle()), 0),
                    "cudaStreamWaitEvent");
}

Expected<float> Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  const cudaError_t e = cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle()),
                                             static_cast<cudaEvent_t>(end.handle()));
  if (Status st = cuda_error(e, "cudaEventElapsedTime"); !st) return st;
  return ms;
}

Expected<PinnedBuffer> PinnedBuffer::create(size_t bytes) {
  void* p = nullptr;
  if (Status st = cuda_error(cudaMallocHost(&p, bytes ? bytes : 1), "cudaMallocHost"); !st) return st;
  PinnedBuffer out;
  out.data_ = std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
  out.size_ = bytes;
  return out;
}

Status copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) {
  const cudaMemcpyKind k = kind == CopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                             : cudaMemcpyDeviceToDevice;
  return cuda_error(cudaMemcpyAsync(dst, src, bytes, k, static_cast<cudaStream_t>(stream)), "cudaMemcpyAsync");
}

Expected<std::vector<std::vector<KernelSpan>>> kernel_timeline(const std::function<Status(int)>& run, int runs) {
  return qd::to_public(qd::cuda::kernel_timeline([&](int i) { return qd::from_public(run(i)); }, runs));
}

bool has_cuda() { return true; }

}  // namespace qdeploy
