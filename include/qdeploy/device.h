// A few CUDA runtime services for programs that drive contexts without including CUDA's headers themselves:
// streams, events (timing), pinned host memory, asynchronous copies, and a kernel timeline. In a qdeploy built
// without the CUDA backend every call returns kUnsupported. Programs that use CUDA directly need none of this: a
// cudaStream_t or cudaEvent_t is what these wrap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qdeploy/status.h"

namespace qdeploy {

// A non-blocking stream on the current device (destroyed with the object).
class Stream {
 public:
  static Expected<Stream> create();
  void* handle() const { return handle_.get(); }  // a cudaStream_t
  Status synchronize() const;

 private:
  std::shared_ptr<void> handle_;
};

class Event {
 public:
  static Expected<Event> create(bool timing = true);
  void* handle() const { return handle_.get(); }  // a cudaEvent_t
  Status record(void* stream) const;
  Status synchronize() const;
  // Makes `stream` wait for the work recorded before this event.
  Status wait_on(void* stream) const;
  // Milliseconds between two recorded (and completed) events.
  static Expected<float> elapsed_ms(const Event& start, const Event& end);

 private:
  std::shared_ptr<void> handle_;
};

// Page-locked host memory (asynchronous copies need it to overlap).
class PinnedBuffer {
 public:
  static Expected<PinnedBuffer> create(size_t bytes);
  void* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::shared_ptr<void> data_;
  size_t size_ = 0;
};

// Synchronisation with work outside qdeploy without the host waiting: CUDA events and external semaphores that
// another API (Vulkan, a camera or encoder driver, another process) exported as a file descriptor.
enum class SemaphoreType {
  kOpaqueFd,    // a binary semaphore (VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT)
  kTimelineFd,  // a timeline semaphore (VkSemaphoreTypeCreateInfo timeline, exported as an opaque fd)
};

// A semaphore imported into CUDA (cudaImportExternalSemaphore) on the current device; destroyed with the last copy.
class ExternalSemaphore {
 public:
  // Imports `fd`; on success CUDA owns the descriptor (do not close it), on failure the caller still does.
  static Expected<ExternalSemaphore> import_fd(int fd, SemaphoreType type);
  void* handle() const { return handle_.get(); }  // a cudaExternalSemaphore_t
  SemaphoreType type() const { return type_; }

 private:
  std::shared_ptr<void> handle_;
  SemaphoreType type_ = SemaphoreType::kOpaqueFd;
};

// What a stream waits for before some work and signals after it. Handles are raw so that events and semaphores
// made by other libraries (PyTorch's, CuPy's, cuda-python's) take part: a cudaExternalSemaphore_t with the timeline
// value to wait for or to set (binary semaphores ignore it), a cudaEvent_t.
struct ExternalSync {
  struct Semaphore {
    void* handle = nullptr;
    uint64_t value = 0;
  };
  std::vector<Semaphore> wait_semaphores, signal_semaphores;
  std::vector<void*> wait_events;    // the stream waits for the work recorded before each
  std::vector<void*> signal_events;  // recorded on the stream after the work
  bool empty() const {
    return wait_semaphores.empty() && signal_semaphores.empty() && wait_events.empty() && signal_events.empty();
  }
};
// Enqueue the waits (before the caller's next work on `stream`) or the signals (after the work already there).
Status enqueue_waits(const ExternalSync& sync, void* stream);
Status enqueue_signals(const ExternalSync& sync, void* stream);

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
Status copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream);

// Kernel start and end times, from CUPTI (loaded at run time: libcupti.so from the CUDA toolkit's usual places).
struct KernelSpan {
  std::string name;  // demangled, without the parameter list
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t stream = 0;
};
// The kernels each call run(i), i = 0 .. runs - 1, executed, in start order, one list per call; run returns once its
// work has finished. A CUDA graph instantiated before the recording starts may go unrecorded: run(0) is where the
// caller sets up and warms up. One recording at a time per process.
Expected<std::vector<std::vector<KernelSpan>>> kernel_timeline(const std::function<Status(int)>& run, int runs);

}  // namespace qdeploy
