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
