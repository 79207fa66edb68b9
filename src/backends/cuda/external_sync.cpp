// include/qdeploy/device.h's external synchronisation on the CUDA runtime: semaphores imported from file
// descriptors, and the waits and signals ExecutionContext::enqueue(stream, sync) puts around a run.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "qdeploy/device.h"

namespace qdeploy {

namespace {

Status cuda_error(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return {StatusCode::kInternal, std::string(what) + ": " + cudaGetErrorString(e)};
}

Status check_handles(const std::vector<ExternalSync::Semaphore>& sems, const char* what) {
  for (const auto& s : sems) {
    if (!s.handle) return {StatusCode::kInvalidArgument, std::string(what) + ": a semaphore handle is null"};
  }
  return {};
}

}  // namespace

Expected<ExternalSemaphore> ExternalSemaphore::import_fd(int fd, SemaphoreType type) {
  if (fd < 0) return Status(StatusCode::kInvalidArgument, "ExternalSemaphore::import_fd: invalid file descriptor");
  cudaExternalSemaphoreHandleDesc desc = {};
  desc.type = type == SemaphoreType::kTimelineFd ? cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd
                                                  : cudaExternalSemaphoreHandleTypeOpaqueFd;
  desc.handle.fd = fd;
  cudaExternalSemaphore_t sem = nullptr;
  if (Status st = cuda_error(cudaImportExternalSemaphore(&sem, &desc), "cudaImportExternalSemaphore"); !st) {
    return Status(st.code(), st.message() + " (is the descriptor a semaphore exported as an opaque fd, of the type "
                                            "given, from a device this process can use?)");
  }
  ExternalSemaphore out;
  out.handle_ = std::shared_ptr<void>(sem, [](void* p) {
    cudaDestroyExternalSemaphore(static_cast<cudaExternalSemaphore_t>(p));
  });
  out.type_ = type;
  return out;
}

Status enqueue_waits(const ExternalSync& sync, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  for (void* e : sync.wait_events) {
    if (!e) return {StatusCode::kInvalidArgument, "ExternalSync::wait_events: an event handle is null"};
    if (Status st = cuda_error(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(e), 0), "cudaStreamWaitEvent"); !st) {
      return st;
    }
  }
  if (sync.wait_semaphores.empty()) return {};
  if (Status st = check_handles(sync.wait_semaphores, "ExternalSync::wait_semaphores"); !st) return st;
  std::vector<cudaExternalSemaphore_t> sems;
  std::vector<cudaExternalSemaphoreWaitParams> params(sync.wait_semaphores.size());
  for (size_t i = 0; i < sync.wait_semaphores.size(); ++i) {
    sems.push_back(static_cast<cudaExternalSemaphore_t>(sync.wait_semaphores[i].handle));
    params[i] = {};
    params[i].params.fence.value = sync.wait_semaphores[i].value;  // timeline semaphores; binary ones ignore it
  }
  return cuda_error(cudaWaitExternalSemaphoresAsync(sems.data(), params.data(), sems.size(), s),
                    "cudaWaitExternalSemaphoresAsync");
}

Status enqueue_signals(const ExternalSync& sync, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (!sync.signal_semaphores.empty()) {
    if (Status st = check_handles(sync.signal_semaphores, "ExternalSync::signal_semaphores"); !st) return st;
    std::vector<cudaExternalSemaphore_t> sems;
    std::vector<cudaExternalSemaphoreSignalParams> params(sync.signal_semaphores.size());
    for (size_t i = 0; i < sync.signal_semaphores.size(); ++i) {
      sems.push_back(static_cast<cudaExternalSemaphore_t>(sync.signal_semaphores[i].handle));
      params[i] = {};
      params[i].params.fence.value = sync.signal_semaphores[i].value;
    }
    if (Status st = cuda_error(cudaSignalExternalSemaphoresAsync(sems.data(), params.data(), sems.size(), s),
                               "cudaSignalExternalSemaphoresAsync");
        !st) {
      return st;
    }
  }
  for (void* e : sync.signal_events) {
    if (!e) return {StatusCode::kInvalidArgument, "ExternalSync::signal_events: an event handle is null"};
    if (Status st = cuda_error(cudaEventRecord(static_cast<cudaEvent_t>(e), s), "cudaEventRecord"); !st) return st;
  }
  return {};
}

}  // namespace qdeploy
