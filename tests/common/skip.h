// Tests that cannot run on this machine (no CUDA device) say so instead of passing.
#pragma once

#include <iostream>

// Prints the reason on a line that every test's SKIP_REGULAR_EXPRESSION matches (set by
// tests/catch_labels.cmake), so CTest reports the test as skipped, then leaves the test.
#define SHARDIFY_SKIP(reason)                                       \
  do {                                                              \
    std::cout << "[shardify test skipped] " << reason << std::endl; \
    return;                                                         \
  } while (0)
