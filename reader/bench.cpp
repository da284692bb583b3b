#include "reader/bench.h"

#include <chrono>
#include <cstdio>

namespace shardify {
namespace {
double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Result<LoaderBenchResult> RunLoaderBench(const std::string& dir, const LoaderOptions& options) {
  LoaderBenchResult r;
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, Loader::Open(dir, options));
  r.open_seconds = Since(t0);
  r.ring_bytes = loader->ring_bytes();
  while (true) {
    ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, loader->Next());
    if (!batch) break;
    if (r.batches == 0) r.first_batch_seconds = Since(t0);
    ++r.batches;
    r.samples += batch->size();
    for (const BatchField& f : batch->fields) r.bytes += f.bytes;
  }
  r.seconds = Since(t0);
  return r;
}

std::string ToJson(const LoaderBenchResult& r) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "{\"samples\": %llu, \"batches\": %llu, \"bytes\": %llu, \"open_seconds\": %.6f, "
                "\"first_batch_seconds\": %.6f, \"seconds\": %.6f, \"samples_per_second\": %.1f, "
                "\"mb_per_second\": %.2f, \"ring_bytes\": %zu}",
                static_cast<unsigned long long>(r.samples), static_cast<unsigned long long>(r.batches),
                static_cast<unsigned long long>(r.bytes), r.open_seconds, r.first_batch_seconds, r.seconds,
                r.samples_per_second(), r.megabytes_per_second(), r.ring_bytes);
  return line;
}

}  // namespace shardify
