// libFuzzer target: plan bytes -> decode_plan, section decoders, CPU engine load and run (tests/fuzz/plan_harness.h).
// The harness recomputes the checksum, so that the fuzzer's mutations reach the parsers behind it.
#include <cstdlib>

#include "plan_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const qd::Status st = qd::fuzz::plan_one_input(std::string(reinterpret_cast<const char*>(data), size));
  if (st.code() == qd::StatusCode::kInternal) std::abort();  // bad input must be kInvalidArgument / kUnsupported
  return 0;
}
