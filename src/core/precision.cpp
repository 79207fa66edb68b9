#include "core/precision.h"

namespace qd {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp16: return "fp16";
    case Precision::kInt8: return "int8";
    case Precision::kFp32: break;
  }
  return "fp32";
}

Expected<Precision> parse_precision(const std::string& word) {
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kInt8}) {
    if (word == precision_name(p)) return p;
  }
  return invalid("--precision must be fp32, fp16 or int8, got '" + word + "'");
}

}  // namespace qd
