// Counts the allocations (operator new) of a test program, and can make large ones fail.
// Link alloc_counter.cpp into a program of its own: it replaces the global operator new,
// which the sanitizers own (such programs are not built under them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace shardify::testing {
// Calls of the global operator new since the program started.
uint64_t AllocationCount();
// From now on operator new throws std::bad_alloc for requests of more than `bytes`
// (SIZE_MAX: never, the default), as it does when memory runs out.
void FailAllocationsAbove(size_t bytes);
}  // namespace shardify::testing
