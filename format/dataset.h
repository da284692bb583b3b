// Dataset: read access to a shard dataset directory.
//
// Open() reads and verifies only the manifest; shards are mapped lazily on first use and
// at most ReadOptions::max_open_shards stay mapped (least recently used is unmapped).
// A shard is checked completely when it is mapped (ends, footer and index checksums,
// FlatBuffers verifier, every offset, length and shape against the file), so sample
// access afterwards is O(1) and cannot read out of bounds.
//
// Thread-safety: a Dataset may be shared by any number of threads. A SampleView is a
// cheap handle that keeps its shard mapped; use it from one thread at a time. A Decoder
// holds per-thread decompression state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/layout.h"
#include "format/manifest.h"
#include "format/status.h"
#include "format/types.h"

namespace shardify {

struct ReadOptions {
  size_t max_open_shards = 64;  // mapped shards kept at once (>= 1)
  bool verify_checksums = true; // check each blob's XXH3 before decoding it
  // Largest decoded array accepted; guards allocation against hostile sizes.
  uint64_t max_sample_bytes = 4ull << 30;
};

// Per-thread decompression state (a zstd context and a scratch buffer for chunks). Reuse
// it: once its scratch has grown to the largest chunk, decoding allocates nothing.
class Decoder {
 public:
  Decoder();
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
  void* zstd_context() const { return dctx_; }
  // Chunks decompressed by this decoder so far (chunked fields only).
  uint64_t chunks_decoded() const { return chunks_decoded_; }

 private:
  friend class SampleView;
  void* dctx_;
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> shuffled_;  // a filtered blob before its inverse filter
  uint64_t chunks_decoded_ = 0;
};

namespace detail { class MappedShard; }

// The stored form of one ndarray blob.
struct BlobInfo {
  const uint8_t* data = nullptr;  // stored bytes, valid while the SampleView lives
  uint64_t stored_size = 0;
  uint64_t raw_size = 0;          // bytes after decoding
  uint64_t checksum = 0;          // XXH3-64 of the stored bytes
  Codec codec = Codec::kRaw;
};

class Dataset;

// One sample of a dataset. Keeps its shard mapped while alive. Field indices are
// positions in manifest().fields; calling an accessor for a field of another kind, or
// an index out of range, returns InvalidArgument.
class SampleView {
 public:
  SampleView() = default;
  uint64_t index() const { return index_; }
  const std::string& shard_file() const;

  Result<Shape> shape(size_t field) const;        // ndarray
  Result<uint64_t> raw_size(size_t field) const;  // ndarray: bytes of the decoded array
  Result<BlobInfo> blob(size_t field) const;      // ndarray stored as one blob (not chunked)
  Result<uint64_t> num_chunks(size_t field) const;         // chunked ndarray
  Result<BlobInfo> chunk(size_t field, uint64_t k) const;  // chunked ndarray, grid order
  Result<int64_t> int_value(size_t field) const;  // int
  Result<double> float_value(size_t field) const; // float
  Result<std::string_view> bytes_value(size_t field) const;  // string or bytes

  // Decodes ndarray `field` into dst (exactly raw_size bytes; dst_size must be >= it),
  // undoing the field's filter (blob() and chunk() give the stored, filtered bytes).
  // Verifies the checksum when the dataset was opened with verify_checksums.
  // Corruption names the file, sample and field.
  Status Decode(size_t field, void* dst, size_t dst_size, Decoder& decoder) const;

  // Decodes the box [start, start + size) of ndarray `field` into dst (row-major, shape
  // `size`, dst_size >= its bytes). Parts of the box outside the array are filled with
  // `pad_element` (one element of the field's dtype; nullptr = zeros). For a chunked field
  // only the chunks the box touches are decompressed; otherwise the whole blob is.
  Status DecodeRegion(size_t field, const Shape& start, const Shape& size, void* dst, size_t dst_size,
                      Decoder& decoder, const void* pad_element = nullptr) const;

 private:
  Status DecodeChunk(size_t field, uint64_t k, uint8_t* dst, Decoder& decoder) const;
  // Decompresses blob `b` of `field` into dst (b.raw_size bytes), undoing the field's filter.
  Status DecodeStored(size_t field, const BlobInfo& b, void* dst, Decoder& decoder) const;
  std::string Where(size_t field) const;
  friend class Dataset;
  const Dataset* dataset_ = nullptr;
  std::shared_ptr<const detail::MappedShard> shard_;
  uint64_t index_ = 0;
  uint64_t local_ = 0;
};

class Dataset {
 public:
  static Result<std::unique_ptr<Dataset>> Open(const std::string& dir,
                                               const ReadOptions& options = {});
  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  const ReadOptions& options() const { return options_; }
  uint64_t num_samples() const { return manifest_.num_samples; }

  // O(1) (binary search over shards). Maps the shard if needed (which verifies it).
  Result<SampleView> Sample(uint64_t index) const;

  // Maps shard `n` and runs every structural check (not blob checksums). Used by verify.
  Status CheckShard(size_t n) const;

  // Checks, before memory is allocated in proportion to `count` (sample orders, label
  // lists), that the shards holding samples [first, first + count) exist and can hold the
  // sample counts the manifest claims for them: every sample takes at least 8 bytes per
  // field in its shard's index (FORMAT.md). One stat per shard, nothing is mapped.
  // Corruption names the shard, the claim and the file's size.
  Status CheckSampleCounts(uint64_t first, uint64_t count) const;

  // Shards currently mapped (for tests of the mapping cap).
  size_t open_shards() const;

 private:
  struct Impl;
  Dataset(std::string dir, Manifest manifest, ReadOptions options);
  std::string dir_;
  Manifest manifest_;
  ReadOptions options_;
  std::unique_ptr<Impl> impl_;
  friend class SampleView;
};

}  // namespace shardify
