// Counts the allocations (operator new) of the reader test program.
#pragma once

#include <cstdint>

namespace shardify::testing {
// Calls of the global operator new since the program started.
uint64_t AllocationCount();
}  // namespace shardify::testing
