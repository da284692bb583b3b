#include "base/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace shardify {

size_t CoreCount() { return std::max(1u, std::thread::hardware_concurrency()); }

size_t WorkerCount(size_t requested, uint64_t items) {
  const size_t want = requested > 0 ? requested : CoreCount();
  return static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(want, items)));
}

size_t ParallelFor(size_t n, size_t threads, const std::function<void(size_t, size_t)>& fn,
                   const std::function<bool(size_t)>& poll, int poll_ms) {
  const size_t workers = WorkerCount(threads, n);
  std::atomic<size_t> next{0}, done{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (size_t i; !stop.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
        fn(i, w);
        done.fetch_add(1);
      }
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
      cv.notify_one();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (finished < workers) {
      cv.wait_for(lock, std::chrono::milliseconds(poll_ms));
      if (poll && finished < workers) {
        lock.unlock();
        if (!poll(done.load())) stop = true;
        lock.lock();
      }
    }
  }
  for (std::thread& t : pool) t.join();
  if (poll) poll(done.load());
  return done.load();
}

}  // namespace shardify
