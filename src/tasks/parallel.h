// A small parallel loop for the data set tools: indices handed out in order to worker threads, the first error (by
// lowest index) returned, optional progress on stderr. Output must not depend on which thread runs an index.
#pragma once

#include <functional>
#include <string>

#include "core/status.h"

namespace qd {

// Runs fn(i) for i in [0, n). threads <= 0: all cores. A non-empty `label` prints "label: k/n" progress on stderr
// (updated in place on a terminal, every 10% otherwise). Stops handing out work after the first error.
Status parallel_for(int n, int threads, const std::string& label, const std::function<Status(int)>& fn);

}  // namespace qd
