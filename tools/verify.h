// shardtool verify: every checksum and structural check of a dataset, problem by problem.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"

namespace shardify::tools {

struct VerifyOptions {
  IoMode io = IoMode::kMmap;  // how shards are read (--io mmap|pread)
  bool quick = false;         // structure only: file sizes, ends, footer and index checks; no blobs
  size_t threads = 0;         // shards checked at once; 0 = all cores
  bool json = false;          // RunVerify: {ok, shards, samples, blobs, problems [{shard, sample, what}]}
};

struct VerifyProblem {
  std::string shard;               // shard file name, or "manifest.sfm"
  std::optional<uint64_t> sample;  // global sample index, when the problem is in one sample
  std::string what;
  // "shard <file> sample <i>: <what>" ("sample -" when no sample applies).
  std::string ToString() const;
};

struct VerifyReport {
  uint64_t shards = 0;   // shards checked
  uint64_t samples = 0;  // samples whose blobs were decoded
  uint64_t blobs = 0;    // blobs decoded with their checksum verified
  std::vector<VerifyProblem> problems;
  bool ok() const { return problems.empty(); }
};

// Checks the dataset in `dir`: a manifest that fails to decode is one problem (nothing
// else can be checked); for each shard, that the file exists with the size the manifest
// gives, then Dataset::CheckShard, then (unless quick) every ndarray blob of every sample
// is decoded with its checksum verified. Keeps going after a problem. `on_problem`, when
// given, is called on the calling thread for each problem as it is found, in shard order.
// Errors (not problems): a directory without a manifest, or one that cannot be read; and
// an I/O error while reading a shard (kIOError: a refused, failed or stalled transfer of a
// remote shard, a failed read), which ends the check: it says nothing about the data.
Result<VerifyReport> VerifyDataset(const std::string& dir, const VerifyOptions& options,
                                   const std::function<void(const VerifyProblem&)>& on_problem = {});

// VerifyDataset, writing one line per problem as found and a summary (or the JSON object).
// Returns Corruption("<n> problems") when problems were found, so the exit code is 1.
// The dataset is named as storage::ShownLocation shows it (a URL's query as "?...").
Status RunVerify(const std::string& dir, const VerifyOptions& options, std::ostream& out);

}  // namespace shardify::tools
