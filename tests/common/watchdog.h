// Runs a call that must not hang with a time limit: a test of a former hang fails fast
// instead of blocking the suite until CTest's own timeout.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>
#include <utility>

namespace shardify::testing {

// Returns fn() when it returns within `seconds`. Otherwise prints what hung and ends the
// test program at once with exit code 3 (the call's thread cannot be stopped).
template <typename Fn>
auto WithinSeconds(double seconds, const char* what, Fn fn) -> decltype(fn()) {
  using R = decltype(fn());
  auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
  std::future<R> done = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (done.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "%s: still running after %.0f s: it hangs\n", what, seconds);
    std::fflush(stderr);
    std::_Exit(3);
  }
  return done.get();
}

}  // namespace shardify::testing
