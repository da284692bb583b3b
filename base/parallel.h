// ParallelFor: the one thread pool of the tools and the converter. Threads are created per
// call and joined before it returns, so no work outlives its caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace shardify {

// The machine's cores (std::thread::hardware_concurrency(), at least 1): the default
// thread count of every program and of the Loader.
size_t CoreCount();

// Threads to use for `items` work items: `requested`, or every core when it is 0; at most
// `items` and at least 1.
size_t WorkerCount(size_t requested, uint64_t items);

// Calls fn(i, worker) once for every i in [0, n), in about increasing order, on
// WorkerCount(threads, n) new threads; `worker` (0 .. workers - 1) names the thread, for
// per-thread state (decoders, buffers, partial sums). Returns the number of calls made.
// While they run, the calling thread calls poll(done) about every `poll_ms` milliseconds
// (done: calls finished so far) and once more after the last one; when poll returns false,
// no further index is started. fn and poll must not throw.
size_t ParallelFor(size_t n, size_t threads, const std::function<void(size_t i, size_t worker)>& fn,
                   const std::function<bool(size_t done)>& poll = nullptr, int poll_ms = 100);

}  // namespace shardify
