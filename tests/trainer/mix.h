// Deterministic pseudo-random numbers for trainer fixtures: one splitmix64 step.
#pragma once

#include <cstdint>

namespace shardify::testing {

inline uint64_t Mix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return z ^ (z >> 27);
}

}  // namespace shardify::testing
