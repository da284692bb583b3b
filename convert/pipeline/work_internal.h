// Threaded work of the pipeline (internal): parallel loops, the ordered encode loop,
// dictionary training and small file helpers.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "convert/convert.h"
#include "convert/sources/schema_internal.h"
#include "format/writer.h"

namespace shardify::convert::detail {

// Runs fn(i) for i in [0, n) on `threads` threads; the calling thread reports progress
// (phase `phase`) and stops handing out work once `cancel` is set (then returns Cancelled).
// fn must not throw.
Status ParallelFor(size_t n, int threads, const std::atomic<bool>* cancel, const char* phase, ProgressSink* progress,
                   const std::function<void(size_t)>& fn);

// Runs fn(); a failed allocation becomes ResourceExhausted naming `input` (see
// CatchAllocationFailure): a sample too large for the memory at hand fails, or is
// skipped, like any bad input.
template <typename Fn>
auto NoThrow(const std::string& input, Fn&& fn) -> decltype(fn()) {
  return CatchAllocationFailure(std::forward<Fn>(fn), [&] {
    return input + ": out of memory while converting it (lower --max-memory or --threads, or free memory)";
  });
}

struct EncodeJob {
  const SourcePlan* plan;
  const Schema* schema;
  const std::vector<size_t>* order;  // cases to write, in output order
  DatasetWriter* writer;
  int threads;
  size_t window;  // 0: 16 per thread
  const std::atomic<bool>* cancel;
  ProgressSink* progress;
  std::vector<std::vector<uint8_t>>* small_files;  // per case, from inspection; consumed
  uint64_t max_sample_bytes;                       // per file decoded, see ConvertOptions
  const PreprocessPlan* preprocess = nullptr;      // applied to every decoded case when set
};

struct CaseFailure {
  std::string input;
  Status status;
};

// Decodes and builds every case of job.order on job.threads threads and appends them
// in order through a bounded reorder window. A case that fails is returned in the list
// when `skip`, else its error ends the run. `written` gets the appended case indices.
Result<std::vector<CaseFailure>> EncodeAll(const EncodeJob& job, bool skip, std::vector<size_t>* written,
                                           uint64_t* bytes_in);

// Decoded bytes of the samples a dictionary learns from, at most (the same on every
// machine, so the output does not depend on its memory).
inline constexpr uint64_t kDictionaryInputBudget = 256ull << 20;

// Trains a dictionary for the image (and mask) field of job.writer from up to
// kDictionaryMaxSamples (format/writer.h) evenly spaced samples of job.order, fewer when
// samples of `max_sample_bytes` would exceed kDictionaryInputBudget; a failure to train
// becomes a warning and the field stays without one.
Status TrainDictionaries(const EncodeJob& job, uint64_t max_sample_bytes, ConvertSummary* sum);

// Size of a file, 0 when it cannot be read.
uint64_t PathBytes(const std::string& path);

}  // namespace shardify::convert::detail
