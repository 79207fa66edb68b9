#include "tasks/parallel.h"

#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace qd {

Status parallel_for(int n, int threads, const std::string& label, const std::function<Status(int)>& fn) {
  if (n <= 0) return Status::ok();
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, n);
  std::atomic<int> next{0}, done{0}, running{threads};
  std::atomic<int> first_error{n};  // lowest failing index so far; indices above it are not started
  std::mutex mu;
  std::condition_variable cv;
  Status error;
  auto worker = [&] {
    for (;;) {
      const int i = next.fetch_add(1);
      if (i >= n || i > first_error.load()) break;
      Status s = fn(i);
      if (!s.is_ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < first_error.load()) {
          first_error.store(i);
          error = std::move(s);
        }
      }
      done.fetch_add(1);
    }
    if (running.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu);
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  if (label.empty()) {
    worker();
  } else {
    // The calling thread reports progress while the others work (one extra worker keeps all cores busy).
    pool.emplace_back(worker);
    Progress progress(label, n);
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::milliseconds(250), [&] { return running.load() == 0; });
      }
      const bool finished = running.load() == 0;
      progress.update(finished ? n : done.load());
      if (finished) break;
    }
  }
  for (auto& t : pool) t.join();
  return error;
}

}  // namespace qd
