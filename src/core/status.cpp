#include "core/status.h"

namespace qd {

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string where;
  if (!node_.empty() || !op_.empty()) {
    where = "node '" + node_ + "' (" + op_ + "): ";
  }
  return where + message_;
}

int exit_code(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInternal: return 1;
    default: return 2;
  }
}

}  // namespace qd
