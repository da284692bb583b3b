// Throughput of the Loader over a dataset: what `loader_bench` and `shardtool bench` print.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "reader/loader.h"

namespace shardify {

struct LoaderBenchResult {
  uint64_t samples = 0;  // samples handed out, all epochs
  uint64_t batches = 0;
  uint64_t bytes = 0;              // decoded bytes handed out (every batched field)
  double open_seconds = 0;         // Loader::Open until it returned
  double seconds = 0;              // Loader::Open until the last batch, wall clock
  double first_batch_seconds = 0;  // Loader::Open until the first batch
  size_t ring_bytes = 0;
  double samples_per_second() const { return seconds > 0 ? samples / seconds : 0; }
  double megabytes_per_second() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

// Opens a Loader over `dir` with `options`, drains every batch of every epoch (releasing
// each at once) and times it. Errors are those of Loader::Open and Loader::Next.
Result<LoaderBenchResult> RunLoaderBench(const std::string& dir, const LoaderOptions& options);

}  // namespace shardify
