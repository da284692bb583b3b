// shardtool stats: per field and channel min, max, mean, std; label histogram.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"

namespace shardify::tools {

struct StatsOptions {
  IoMode io = IoMode::kMmap;  // how shards are read (--io mmap|pread)
  std::string split;          // empty = every sample
  uint64_t limit = 0;         // 0 = every sample of the split, else the first `limit`
  size_t threads = 0;         // 0 = all cores
  bool json = false;          // {samples, fields [{name, dtype, channels [...]}], label_histogram}
};

// Running statistics of one channel (merged as format/moments.h's Moments are).
struct ChannelStats {
  uint64_t count = 0;
  double min = 0, max = 0, mean = 0, m2 = 0;  // m2: sum of squared deviations
  uint64_t non_finite = 0;                    // NaN and inf values, left out of the above
  double stddev() const;                      // population standard deviation
  void Add(const ChannelStats& other);
};

struct FieldChannelStats {
  std::string field;
  std::string dtype;
  std::vector<ChannelStats> channels;  // axis 0 of arrays of rank >= 3, else one channel
};

struct StatsReport {
  uint64_t samples = 0;
  std::vector<FieldChannelStats> fields;  // every ndarray field, in schema order
  std::map<int64_t, uint64_t> labels;     // label value -> samples (when a label field exists)
};

// Decodes every ndarray blob of the chosen samples once; memory stays at one sample per
// thread, so datasets larger than RAM work. Errors name the sample and field.
Result<StatsReport> ComputeStats(const std::string& dir, const StatsOptions& options);

// ComputeStats, then a table per field (or the JSON object) on `out`.
Status RunStats(const std::string& dir, const StatsOptions& options, std::ostream& out);

}  // namespace shardify::tools
