// KernelPolicy::pdl per engine (pdl.cuh's launch_pdl reads it): plain C++, so that host code which enqueues or times
// layers can switch programmatic dependent launch off without including the device header.
#pragma once

#include <atomic>

namespace qd::cuda {

// Whether the loaded device code waits in pdl_wait (griddepcontrol, sm_90+): conv_igemm_init clears it where it does
// not (kernel_arch.h, has_pdl), and launch_pdl then launches as usual.
inline std::atomic<bool> g_pdl_code{true};

// Set while an engine whose KernelPolicy has pdl off enqueues or times its layers (PdlOff), on the thread doing it:
// the policy is the engine's, and other engines in the process keep theirs.
inline thread_local bool t_pdl_off = false;

// Launches on this thread go without programmatic dependent launch while an object made with off = true lives.
class PdlOff {
 public:
  explicit PdlOff(bool off) : active_(off && !t_pdl_off) {
    if (active_) t_pdl_off = true;
  }
  ~PdlOff() {
    if (active_) t_pdl_off = false;
  }
  PdlOff(const PdlOff&) = delete;
  PdlOff& operator=(const PdlOff&) = delete;

 private:
  bool active_;
};

}  // namespace qd::cuda
