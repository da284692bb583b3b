#include "base/parallel.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace shardify;

TEST_CASE("parallel: every index runs once, on workers numbered from 0") {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    std::vector<std::atomic<int>> hits(n);
    std::mutex mu;
    std::set<size_t> workers;
    size_t last_done = 0;
    const size_t calls = ParallelFor(
        n, 3,
        [&](size_t i, size_t w) {
          hits[i].fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          workers.insert(w);
        },
        [&](size_t done) {
          last_done = done;
          return true;
        });
    CHECK(calls == n);
    CHECK(last_done == n);  // the last poll comes after every call
    for (auto& h : hits) CHECK(h.load() == 1);
    CHECK(workers.size() <= std::min<size_t>(3, std::max<size_t>(n, 1)));
    for (size_t w : workers) CHECK(w < 3);
  }
  CHECK(WorkerCount(4, 2) == 2);
  CHECK(WorkerCount(4, 0) == 1);
  CHECK(WorkerCount(0, 1000) >= 1);
}

TEST_CASE("parallel: a poll that returns false starts no further index") {
  // 1000 calls of 1 ms on 2 threads take about 0.5 s; the first poll, after 1 ms, stops them.
  std::atomic<size_t> started{0};
  const size_t calls = ParallelFor(
      1000, 2,
      [&](size_t, size_t) {
        started.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      [](size_t) { return false; }, /*poll_ms=*/1);
  CHECK(calls == started.load());
  CHECK(calls < 1000);
}
