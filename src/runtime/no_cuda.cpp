// The CUDA entry points in builds without the CUDA backend (no nvcc, sanitizer and fuzz builds).
#include "qdeploy/device.h"
#include "runtime/engine.h"
#include "tasks/device_pipeline.h"

namespace qd {

Expected<std::unique_ptr<Engine>> build_cuda_engine(const std::string&, const BuildOptions&) {
  return unsupported("--device cuda: this qdeploy was built without the CUDA backend (nvcc not found, or a "
                     "sanitizer build); rebuild with the CUDA toolkit, or use --device cpu");
}

Expected<std::unique_ptr<Engine>> load_cuda_engine(const PlanFile&) {
  return unsupported("this plan was built for a GPU (target cuda), but this qdeploy was built without the CUDA "
                     "backend; run it with a CUDA build of qdeploy, or build a CPU plan with `qdeploy build MODEL -o "
                     "PLAN --device cpu`");
}

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
bool has_cuda() { return false; }

}  // namespace qdeploy
