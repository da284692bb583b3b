// shardtool bench: how fast a dataset can be read.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "format/status.h"

namespace shardify::tools {

struct BenchOptions {
  std::string split;    // empty = the first split
  size_t batch = 64;    // samples per batch (>= 1)
  size_t threads = 0;   // decode threads; 0 = all cores
  uint64_t epochs = 1;  // passes over the split (>= 1)
  uint64_t seed = 0;    // shuffle seed
  bool direct = false;  // Dataset + SampleView::Decode on the threads, without the Loader
  bool json = false;    // {mode, samples, bytes, seconds, samples_per_s, bytes_per_s, ...}
};

struct BenchResult {
  std::string mode;      // "loader" or "direct"
  uint64_t samples = 0;  // samples read, all epochs
  uint64_t bytes = 0;    // decoded bytes of every ndarray field read
  double seconds = 0;    // wall clock, including opening
  double samples_per_s() const { return seconds > 0 ? samples / seconds : 0; }
  double bytes_per_s() const { return seconds > 0 ? bytes / seconds : 0; }
};

// Reads every sample of the split `epochs` times in a seeded shuffled order and times
// it: through the streaming Loader (batches of `batch`, pinned ring, prefetch), or
// directly (`direct`, or when this build has no reader). Checksums are verified, as in
// training.
Result<BenchResult> Bench(const std::string& dir, const BenchOptions& options);

// Bench, then a line with samples/s and MB/s (or the JSON object) on `out`.
Status RunBench(const std::string& dir, const BenchOptions& options, std::ostream& out);

}  // namespace shardify::tools
