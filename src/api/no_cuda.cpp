// The CUDA entry points of the API in builds without the CUDA backend (no nvcc, sanitizer and fuzz builds).
#include "qdeploy/device.h"
#include "tasks/device_pipeline.h"

namespace qd {

Expected<std::shared_ptr<void>> attach_device_pipeline(Engine&, Detector&, int, std::string* why, int) {
  if (why) why->clear();
  return std::shared_ptr<void>();
}

}  // namespace qd

// include/qdeploy/device.h without the CUDA backend: every call says so.
namespace qdeploy {

namespace {

Status no_cuda() {
  return {StatusCode::kUnsupported,
          "this qdeploy was built without the CUDA backend (nvcc not found, or a sanitizer build): no streams, "
          "events or device memory; rebuild with the CUDA toolkit"};
}

}  // namespace

Expected<Stream> Stream::create() { return no_cuda(); }
Status Stream::synchronize() const { return no_cuda(); }
Expected<Event> Event::create(bool) { return no_cuda(); }
Status Event::record(void*) const { return no_cuda(); }
Status Event::synchronize() const { return no_cuda(); }
Status Event::wait_on(void*) const { return no_cuda(); }
Expected<float> Event::elapsed_ms(const Event&, const Event&) { return no_cuda(); }
Expected<PinnedBuffer> PinnedBuffer::create(size_t) { return no_cuda(); }
Status copy_async(void*, const void*, size_t, CopyKind, void*) { return no_cuda(); }
Expected<std::vector<std::vector<KernelSpan>>> kernel_timeline(const std::function<Status(int)>&, int) {
  return no_cuda();
}
Expected<ExternalSemaphore> ExternalSemaphore::import_fd(int, SemaphoreType) { return no_cuda(); }
Status enqueue_waits(const ExternalSync& sync, void*) { return sync.empty() ? Status() : no_cuda(); }
Status enqueue_signals(const ExternalSync& sync, void*) { return sync.empty() ? Status() : no_cuda(); }
bool has_cuda() { return false; }

}  // namespace qdeploy
