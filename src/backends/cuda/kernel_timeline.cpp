#include "backends/cuda/kernel_timeline.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <type_traits>

#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

namespace qd::cuda {

namespace {

// CUPTI's entry points, from the library loaded at run time (decltype names their types without linking them).
struct Cupti {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
};

Expected<Cupti> load_cupti() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("QD_CUPTI_LIB")) paths.push_back(env);
  for (const char* p : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                        "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"}) {
    paths.push_back(p);
  }
  void* lib = nullptr;
  for (const std::string& p : paths) {
    if ((lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  }
  if (!lib) {
    return not_found("no CUPTI library (libcupti.so.13, from the CUDA toolkit) for the kernel timeline; set "
                     "QD_CUPTI_LIB to its path");
  }
  Cupti c;
  const auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    return fn != nullptr;
  };
  if (!sym(c.register_callbacks, "cuptiActivityRegisterCallbacks") || !sym(c.enable, "cuptiActivityEnable") ||
      !sym(c.disable, "cuptiActivityDisable") || !sym(c.flush_all, "cuptiActivityFlushAll") ||
      !sym(c.next_record, "cuptiActivityGetNextRecord") || !sym(c.result_string, "cuptiGetResultString")) {
    return internal("the CUPTI library lacks the activity API's entry points");
  }
  return c;  // the library stays loaded for the process
}

// CUPTI hands completed buffers to a plain function: the spans go to the run being recorded.
std::mutex g_mutex;
std::vector<KernelSpan>* g_sink = nullptr;
Cupti g_cupti;

constexpr size_t kBufferBytes = 4 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

// The kernel's name without its return type, namespaces' anonymous parts and parameter list, demangled where it is a
// C++ name: "qd::cuda::conv_igemm_kernel<128, 64, ...>".
std::string kernel_name(const char* mangled) {
  if (!mangled) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && d ? d : mangled;
  std::free(d);
  for (size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;) name.erase(at, 23);
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  size_t cut = std::string::npos;  // the last '(' outside template brackets: the parameter list
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    depth += name[i] == '<' ? 1 : name[i] == '>' ? -1 : 0;
    if (name[i] == '(' && depth == 0) cut = i;
  }
  return cut == std::string::npos || cut == 0 ? name : name.substr(0, cut);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  while (g_cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || !g_sink) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    g_sink->push_back({kernel_name(k->name), k->start, k->end, k->streamId});
  }
  std::free(buffer);
}

Status cupti_status(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return Status::ok();
  const char* text = nullptr;
  if (g_cupti.result_string) g_cupti.result_string(r, &text);
  return internal(std::string("CUPTI ") + what + ": " + (text ? text : std::to_string(r)));
}

}  // namespace

Expected<std::vector<std::vector<KernelSpan>>> kernel_timeline(const std::function<Status(int)>& run, int runs) {
  if (!g_cupti.enable) g_cupti = QD_TRY(load_cupti());
  // Where another tool holds CUPTI (compute-sanitizer, a profiler), these fail: nothing to record with here.
  Status ready = cupti_status(g_cupti.register_callbacks(buffer_requested, buffer_completed), "callbacks");
  if (ready.is_ok()) ready = cupti_status(g_cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable");
  if (!ready.is_ok()) return unsupported(ready.message() + " (is another profiler or sanitizer attached?)");
  std::vector<std::vector<KernelSpan>> out(runs);
  Status st;
  for (int i = 0; i < runs && st.is_ok(); ++i) {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_sink = &out[i];
    }
    st = run(i);
    if (st.is_ok()) st = cupti_status(g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
  }
  g_cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_sink = nullptr;
  }
  QD_RETURN_IF_ERROR(st);
  for (auto& r : out) {
    std::sort(r.begin(), r.end(), [](const KernelSpan& a, const KernelSpan& b) { return a.start_ns < b.start_ns; });
  }
  return out;
}

}  // namespace qd::cuda
