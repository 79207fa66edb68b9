// libFuzzer target: see precision_config_harness.h. A kInternal status (a broken invariant) aborts, so libFuzzer records it.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "precision_config_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const qd::Status st = qd::fuzz::precision_config_one_input(std::string(reinterpret_cast<const char*>(data), size));
  if (st.code() == qd::StatusCode::kInternal) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    std::abort();
  }
  return 0;
}
