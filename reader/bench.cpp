#include "reader/bench.h"

#include <chrono>

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

}  // namespace shardify
