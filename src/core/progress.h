// Progress lines for long work on stderr: redrawn in place at most 4 times a second on a terminal, one line per
// tenth of the work otherwise (logs, CI).
#pragma once

#include <chrono>
#include <string>

namespace qd {

class Progress {
 public:
  Progress(std::string label, int64_t total);
  // Reports `done` of `total`; `extra` is appended (e.g. "12.3 img/s"). The call with done == total ends the line.
  void update(int64_t done, const std::string& extra = "");
  double seconds() const;

 private:
  std::string label_;
  int64_t total_;
  bool tty_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace qd
