// The manifest: plain structs describing a dataset, with symmetric Encode/Decode.
//
// A dataset directory is valid once `manifest.sfm` exists (it is written last, by atomic
// rename). The manifest names every shard with its size, sample range and the checksum of
// its index, so a reader can trust a shard only after it matches. Layout: FORMAT.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/types.h"

namespace shardify {

struct KeyValue {
  std::string key;
  std::string value;
  bool operator==(const KeyValue& o) const { return key == o.key && value == o.value; }
};

// A reversible transform of an ndarray field's bytes applied before compression.
enum class Filter : uint8_t {
  kNone = 0,
  // Byte shuffle (format version 3): a blob of n elements of s bytes is stored as byte 0 of
  // every element, then byte 1 of every element, ...: stored[k * n + i] = raw[i * s + k].
  // Floats and wide integers then compress better: their high bytes vary slowly.
  kByteShuffle = 1,
  // Delta columns (format version 4), for a table: a field of rank 2 with a fixed number of
  // columns, not chunked. Each column is stored as its first value, then the differences of
  // consecutive values (modulo 2^(8 s), elements read as unsigned integers of s bytes),
  // byte-shuffled column by column. Sorted integer tables (mask.fg_locations) then turn into
  // small numbers that compress about half as large.
  kDeltaColumns = 2,
};
// "none", "shuffle", "delta_columns"; "?" for an unknown code.
const char* FilterName(Filter f);

// One field of every sample (image, label, mask, spacing, ...).
struct FieldSpec {
  std::string name;  // unique within the dataset, non-empty
  FieldKind kind = FieldKind::kNdarray;
  DType dtype = DType::kU8;         // ndarray only
  Shape shape;                      // ndarray only; -1 = varies per sample
  std::vector<uint8_t> dictionary;  // ndarray only; empty = no dictionary
  std::vector<KeyValue> meta;       // free-form annotations (roles, units, ...)
  // ndarray only; empty = each sample is one blob. Otherwise (format version 2) each sample
  // is stored as independently compressed chunks of this shape (edge chunks clipped), so a
  // region can be read by decoding only the chunks it touches.
  Shape chunk_shape = {};
  Filter filter = Filter::kNone;  // ndarray only; kNone below version 3
  bool operator==(const FieldSpec& o) const;
  bool variable_shape() const;
  bool chunked() const { return !chunk_shape.empty(); }
};

// Splits are contiguous runs of samples; together they cover [0, num_samples) in order.
struct SplitInfo {
  std::string name;
  uint64_t first_sample = 0;
  uint64_t num_samples = 0;
  bool operator==(const SplitInfo& o) const;
};

struct ShardInfo {
  std::string file_name;      // a plain name inside the dataset directory
  uint64_t size_bytes = 0;    // exact file size
  uint64_t first_sample = 0;  // global index of its first sample
  uint64_t num_samples = 0;
  uint64_t index_checksum = 0;  // XXH3-64 of the shard's index (equals its footer's)
  bool operator==(const ShardInfo& o) const;
};

// Statistics over every element of an ndarray field (all samples, all channels).
struct FieldStats {
  std::string field;
  uint64_t count = 0;  // elements
  double min = 0, max = 0, mean = 0, stddev = 0;
  bool operator==(const FieldStats& o) const;
};

struct Provenance {
  std::string converter;          // e.g. "shardify"
  std::string converter_version;  // e.g. "0.1.0"
  std::string source;             // e.g. the source path as given
  std::vector<KeyValue> options;  // the options that shaped the output
  bool operator==(const Provenance& o) const;
};

struct Manifest {
  uint32_t format_version = 0;  // set by the writer
  std::vector<FieldSpec> fields;
  std::vector<SplitInfo> splits;
  std::vector<std::string> classes;  // class names; label i is classes[i]
  std::vector<ShardInfo> shards;
  Provenance provenance;
  std::vector<FieldStats> stats;
  uint64_t num_samples = 0;
  bool operator==(const Manifest& o) const;

  // Index of the field named `name`, or -1.
  int FindField(const std::string& name) const;
  // The split named `name`, or nullptr.
  const SplitInfo* FindSplit(const std::string& name) const;
};

// A dataset's manifest numbers its samples from 0. A part manifest (`part.sfm`, one part
// of a dataset converted in parts, FORMAT.md section 6) numbers them from the part's first
// sample in the whole dataset: its first shard's (or, without shards, first split's).
enum class ManifestKind { kDataset, kPart };

// Checks the invariants a reader relies on: unique non-empty field names, valid kinds,
// dtypes and ranks, shards contiguous from 0 (a part: from its first sample) and covering
// num_samples, splits likewise, plain shard file names. Messages name the offending entry.
Status ValidateManifest(const Manifest& m, ManifestKind kind = ManifestKind::kDataset);

// The largest manifest file (manifest.sfm, part.sfm) a reader takes: one past it is
// refused before it is read (or fetched) whole.
inline constexpr uint64_t kMaxManifestBytes = 1ull << 30;

// The whole manifest file: head magic, FlatBuffers body, trailer with length and XXH3.
std::vector<uint8_t> EncodeManifestFile(const Manifest& m);
// Inverse of EncodeManifestFile. `path` only names the file in error messages.
// Verifies magic, length, checksum, the FlatBuffers verifier, version and ValidateManifest.
Result<Manifest> DecodeManifestFile(const uint8_t* data, size_t size, const std::string& path,
                                    ManifestKind kind = ManifestKind::kDataset);

}  // namespace shardify
