// Replaces the global operator new/delete of a test program with counting ones that can
// be made to fail. Kept in its own file so that no inlined delete is paired with the
// library's new.
#include "tests/common/alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> g_allocations{0};
std::atomic<size_t> g_fail_above{SIZE_MAX};
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (n > g_fail_above.load(std::memory_order_relaxed)) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace shardify::testing {
uint64_t AllocationCount() { return g_allocations.load(std::memory_order_relaxed); }
void FailAllocationsAbove(size_t bytes) { g_fail_above.store(bytes, std::memory_order_relaxed); }
}  // namespace shardify::testing
