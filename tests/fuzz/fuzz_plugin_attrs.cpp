// libFuzzer target: bytes -> plugin attributes and input shapes -> schema check, shape inference, reference
// (plugin_attrs_harness.h). Runs every built-in plugin op; an internal error aborts.
#include <cstdlib>

#include "plugin_attrs_harness.h"
#include "qdeploy/plugin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qdeploy::register_builtin_plugins();
  const qd::Status st = qd::fuzz::plugin_attrs_one_input(std::string(reinterpret_cast<const char*>(data), size));
  if (st.code() == qd::StatusCode::kInternal) std::abort();
  return 0;
}
