// shardtool info and ls: what a dataset holds, and one row per sample.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "base/status.h"
#include "format/dataset.h"

namespace shardify::tools {

struct InfoOptions {
  IoMode io = IoMode::kMmap;  // how shards are read (--io mmap|pread)
  bool json = false;          // one JSON object instead of text
  bool list_shards = false;   // text: one line per shard (JSON always lists them)
};

// Writes samples per split, fields (dtype, shape, meta), shards, provenance and the
// manifest's statistics at once from the manifest; then, after one pass over the shard
// indices (no blob is decompressed), class counts and stored vs raw bytes.
// JSON members: samples, shards, splits {name: count}, fields [{name, kind, dtype, shape,
// meta}], classes [names], class_counts {name: count}, shard_files, provenance,
// stored_bytes, raw_bytes, ratio.
// Errors: those of Dataset::Open and of mapping a shard (naming it).
Status RunInfo(const std::string& dir, const InfoOptions& options, std::ostream& out);

struct LsOptions {
  IoMode io = IoMode::kMmap;  // how shards are read (--io mmap|pread)
  std::string split;          // empty = every split
  uint64_t offset = 0;        // first row, counted within the split
  uint64_t limit = 0;         // 0 = no limit
  bool json = false;          // a JSON array of {index, split, label, class, shape, stored_bytes, shard}
};

// One row per sample: index, split, label, shape of the image field, stored bytes, shard.
// Streams: each row is written as soon as its shard index is read.
Status RunLs(const std::string& dir, const LsOptions& options, std::ostream& out);

}  // namespace shardify::tools
