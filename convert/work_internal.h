// Threaded work of the pipeline (internal): parallel loops, the ordered encode loop,
// dictionary training and small file helpers.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/schema_internal.h"
#include "format/writer.h"

namespace shardify::convert::detail {

// Runs fn(i) for i in [0, n) on `threads` threads; the calling thread reports progress
// (phase `phase`) and stops handing out work once `cancel` is set (then returns Cancelled).
// fn must not throw.
Status ParallelFor(size_t n, int threads, const std::atomic<bool>* cancel, const char* phase,
                   ProgressSink* progress, const std::function<void(size_t)>& fn);

struct EncodeJob {
  const SourcePlan* plan;
  const Schema* schema;
  const std::vector<size_t>* order;  // cases to write, in output order
  DatasetWriter* writer;
  int threads;
  size_t window;                      // 0: 16 per thread
  const std::atomic<bool>* cancel;
  ProgressSink* progress;
  std::vector<std::vector<uint8_t>>* small_files;  // per case, from inspection; consumed
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

// Trains a dictionary for the image (and mask) field from an evenly spaced sample of
// `order`; a failure to train becomes a warning and the field stays without one.
Status TrainDictionaries(const SourcePlan& plan, const Schema& schema, const std::vector<size_t>& order,
                         DatasetWriter& writer, ConvertSummary* sum);

// Size of a file, 0 when it cannot be read.
uint64_t PathBytes(const std::string& path);

}  // namespace shardify::convert::detail
