#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

namespace qd {

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)), total_(total), tty_(::isatty(2) != 0), start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::seconds(1)) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done, const std::string& extra) {
  const bool finished = done >= total_;
  const auto now = std::chrono::steady_clock::now();
  const int decile = total_ > 0 ? static_cast<int>(10 * done / total_) : 10;
  if (tty_) {
    if (!finished && now - last_draw_ < std::chrono::milliseconds(250)) return;
  } else if (decile == last_decile_ && !finished) {
    return;
  }
  last_draw_ = now;
  last_decile_ = decile;
  std::fprintf(stderr, "%s%s: %lld/%lld (%.1f s%s%s)%s", tty_ ? "\r" : "", label_.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), seconds(), extra.empty() ? "" : ", ",
               extra.c_str(), tty_ && !finished ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace qd
