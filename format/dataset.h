// Dataset: read access to a shard dataset directory.
//
// Open() reads and verifies only the manifest; shards are opened lazily on first use and
// at most max_open_shards() stay open (the least recently used is closed). A shard is
// checked completely when it is first opened (ends, footer and index checksums,
// FlatBuffers verifier, every offset, length and shape against the file), and its index is
// kept in memory from then on, also while its file is closed, so sample access is O(1) and
// cannot read out of bounds, and opening the shard again reads only its ends and footer
// (its size and index checksum must still be the manifest's). Memory: the indices of the
// shards read so far (40 bytes a sample per ndarray field, 8 per int or float field,
// strings their bytes and 8), besides the mapped pages, which are page cache the kernel
// reclaims.
//
// Files that change underneath: blobs are read from a shared mapping (IoMode::kMmap) or
// with pread (kPread), and every decode copies the stored bytes before it checks them, so
// what it delivers is what it checked. A shard truncated or rewritten in place after it
// was opened gives an error naming the shard (kIOError for bytes the file no longer holds,
// kCorruption for bytes that no longer match their checksum), never a signal; the Dataset
// then closes that shard, so the next access opens it again and checks it anew.
//
// Thread-safety: a Dataset may be shared by any number of threads. A SampleView is a
// cheap handle that keeps its shard open; use it from one thread at a time. A Decoder
// holds per-thread decompression state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/chunk_cache.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/types.h"
#include "storage/remote.h"

namespace shardify {

// How shard bytes are read.
enum class IoMode : uint8_t {
  kMmap = 0,   // a shared read-only mapping per open shard (fast where pages are cached)
  kPread = 1,  // pread(2) into the destination: no page faults (NFS, FUSE)
};
const char* IoModeName(IoMode m);  // "mmap", "pread"
std::optional<IoMode> ParseIoMode(std::string_view name);

// Shards kept mapped at once by default (ReadOptions::max_open_shards = 0, mmap): a mapping
// costs address space and no file descriptor, so datasets of up to this many shards never
// close one.
inline constexpr size_t kAutomaticMappedShards = 8192;

// What max_open_shards = 0 means for `io`: kAutomaticMappedShards for kMmap; for kPread,
// which holds a file descriptor per open shard, a quarter of the soft RLIMIT_NOFILE (at
// least 16, at most kAutomaticMappedShards). Beyond it, the least recently used shard is
// closed and opened again when next read (its ends and footer read again, about 10 us).
size_t AutomaticMaxOpenShards(IoMode io);

struct ReadOptions {
  size_t max_open_shards = 0;    // shards kept open at once; 0 = AutomaticMaxOpenShards(io)
  bool verify_checksums = true;  // check each blob's XXH3 (of the bytes copied) before decoding it
  IoMode io = IoMode::kMmap;     // how blobs are read; both give the same bytes and checks
  // Largest decoded array accepted; guards allocation against hostile sizes.
  uint64_t max_sample_bytes = 4ull << 30;
  // For a remote dataset (an http:// or https:// location): its cache folder and size
  // limit, and how objects are fetched (storage/remote.h). Open shards are held in the
  // cache, so max_open_shards = 0 keeps no more open than the limit holds; and when the
  // limit is smaller than the dataset, a shard read from the cache stays open only while a
  // view or a batch holds it, so that readers sharing the cache hold only what they read.
  storage::RemoteOptions remote;
};

namespace detail {
class CodecContext;
class Dictionary;
class MappedShard;
}  // namespace detail

// Per-thread decoding state (the codecs' contexts and scratch buffers for stored bytes and
// chunks). Reuse it: once its scratch has grown to the largest blob, decoding allocates
// nothing. When a codec's context cannot be allocated, decoding a blob of that codec
// fails with ResourceExhausted.
class Decoder {
 public:
  Decoder();
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
  // Chunks decompressed by this decoder so far (chunked fields only).
  uint64_t chunks_decoded() const { return chunks_decoded_; }

 private:
  friend class SampleView;
  std::unique_ptr<detail::CodecContext> codecs_;
  std::vector<uint8_t> stored_;  // a compressed or filtered blob as read from the file
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> shuffled_;  // a filtered blob before its inverse filter
  uint64_t chunks_decoded_ = 0;
};

// The stored form of one ndarray blob.
struct BlobInfo {
  // The stored bytes in the shard's mapping, valid while the SampleView lives; nullptr when
  // the dataset reads with IoMode::kPread. Reading them directly checks nothing: bytes the
  // file no longer holds read as zeros (Decode reports that; prefer it).
  const uint8_t* data = nullptr;
  uint64_t offset = 0;  // where the stored bytes start in the shard file
  uint64_t stored_size = 0;
  uint64_t raw_size = 0;  // bytes after decoding
  uint64_t checksum = 0;  // XXH3-64 of the stored bytes
  Codec codec = Codec::kRaw;
};

class Dataset;

// One sample of a dataset. Keeps its shard open while alive (unless it came from
// Dataset::SampleBatch, see there). Field indices are positions in manifest().fields;
// calling an accessor for a field of another kind, or an index out of range, returns
// InvalidArgument.
class SampleView {
 public:
  SampleView() = default;
  uint64_t index() const { return index_; }
  const std::string& shard_file() const;

  Result<Shape> shape(size_t field) const;                   // ndarray
  Result<uint64_t> raw_size(size_t field) const;             // ndarray: bytes of the decoded array
  Result<BlobInfo> blob(size_t field) const;                 // ndarray stored as one blob (not chunked)
  Result<uint64_t> num_chunks(size_t field) const;           // chunked ndarray
  Result<BlobInfo> chunk(size_t field, uint64_t k) const;    // chunked ndarray, grid order
  Result<int64_t> int_value(size_t field) const;             // int
  Result<double> float_value(size_t field) const;            // float
  Result<std::string_view> bytes_value(size_t field) const;  // string or bytes

  // Decodes ndarray `field` into dst (exactly raw_size bytes; dst_size must be >= it),
  // undoing the field's filter (blob() and chunk() give the stored, filtered bytes). A raw
  // blob is copied straight into dst and its checksum computed over dst; other blobs are
  // copied into the decoder's scratch first. Verifies the checksum when the dataset was
  // opened with verify_checksums. Corruption (or IOError, for bytes the file no longer
  // holds) names the file, sample and field.
  Status Decode(size_t field, void* dst, size_t dst_size, Decoder& decoder) const;

  // Decodes the box [start, start + size) of ndarray `field` into dst (row-major, shape
  // `size`, dst_size >= its bytes). Parts of the box outside the array are filled with
  // `pad_element` (one element of the field's dtype; nullptr = zeros). For a chunked field
  // only the chunks the box touches are decompressed; otherwise the whole blob is. With a
  // `cache` (of this dataset), compressed chunks are taken from it, or decoded and kept there.
  Status DecodeRegion(size_t field, const Shape& start, const Shape& size, void* dst, size_t dst_size, Decoder& decoder,
                      const void* pad_element = nullptr, ChunkCache* cache = nullptr) const;

  // The gather loop of a batch: reads field `field` of views[0..n) (of one Dataset) into
  // dst + i * stride. An ndarray field of one fixed shape, not chunked, decodes as Decode
  // does (stride >= its bytes); an int field gives an int64_t, a float field a double.
  // Prefetches the index entries, and the mapped stored bytes, of the samples ahead, so the
  // loop waits on memory for several samples at once. On error, *failed is the position
  // of the failing view and the error names it as Decode's do; views before it are done.
  static Status DecodeBatch(const SampleView* views, size_t n, size_t field, uint8_t* dst, size_t stride,
                            Decoder& decoder, size_t* failed);

 private:
  Status DecodeChunk(size_t field, uint64_t k, uint8_t* dst, Decoder& decoder) const;
  // Reads blob `b` of `field` (a whole blob, or chunk `chunk`), checks it and decodes it
  // into dst (b.raw_size bytes), undoing the field's filter. Errors carry no location.
  Status ReadStored(size_t field, const BlobInfo& b, const char* what, void* dst, Decoder& decoder) const;
  // Raw chunk k of `field` where the mapped shard holds it, checked (its size, and its
  // checksum when verifying), for a region to copy from in place; null when the chunk is
  // compressed or filtered, or the shard is not memory-mapped.
  Result<const uint8_t*> MappedChunk(size_t field, uint64_t k, uint64_t bytes, Decoder& decoder) const;
  std::string Where(size_t field) const;
  // `s` with the location (sample, field, then `part`); closes the shard in the Dataset
  // when its file changed.
  Status Fail(const Status& s, size_t field, const std::string& part) const;
  friend class Dataset;
  const Dataset* dataset_ = nullptr;
  const detail::MappedShard* shard_ = nullptr;
  std::shared_ptr<const detail::MappedShard> owner_;  // empty for views of SampleBatch
  uint64_t index_ = 0;
  uint64_t local_ = 0;
};

class Dataset {
 public:
  // `dir`: a dataset directory, or an http:// or https:// URL of one (its shards are read
  // through a local cache, see ReadOptions::remote).
  static Result<std::unique_ptr<Dataset>> Open(const std::string& dir, const ReadOptions& options = {});
  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  const ReadOptions& options() const { return options_; }
  uint64_t num_samples() const { return manifest_.num_samples; }

  // O(1) (binary search over shards). Opens the shard if needed (which verifies it).
  Result<SampleView> Sample(uint64_t index) const;

  // Views of many samples at once, for loaders that look up a batch on one thread and
  // decode it on others: one lock for the batch, one shard lookup per change of shard, and
  // no reference count per sample. out[i] views indices[i] (out holds n views). These
  // views do not keep their shards open themselves: one reference per distinct shard is
  // appended to `pins` (none when max_open_shards() covers every shard: no shard is then
  // closed while the Dataset lives), and the views are valid while `pins` holds it. On error `out` is
  // partly filled and the error names the first sample that failed.
  Status SampleBatch(const uint64_t* indices, size_t n, SampleView* out,
                     std::vector<std::shared_ptr<const void>>* pins) const;

  // Opens shard `n` and runs every structural check (not blob checksums). Used by verify.
  Status CheckShard(size_t n) const;

  // Checks, before memory is allocated in proportion to `count` (sample orders, label
  // lists), that the shards holding samples [first, first + count) exist and can hold the
  // sample counts the manifest claims for them: every sample takes at least 8 bytes per
  // field in its shard's index (FORMAT.md). One stat per shard, nothing is mapped.
  // Corruption names the shard, the claim and the file's size.
  Status CheckSampleCounts(uint64_t first, uint64_t count) const;

  // Shards currently open (for tests of the cap), and the cap itself (ReadOptions'
  // max_open_shards, or what 0 chose).
  size_t open_shards() const;
  size_t max_open_shards() const;

  // A remote dataset's objects and cache (an http(s):// location), or null.
  const storage::RemoteDataset* remote() const;
  // The shard holding sample `index` (< num_samples()).
  size_t ShardOfSample(uint64_t index) const;
  // Remote datasets: fetches shard `n` into the cache unless it is open or cached, and
  // holds nothing (a reader ahead of the sampler's order calls it). Local: nothing.
  Status Prefetch(size_t n) const;

 private:
  struct Impl;
  Dataset(std::string dir, Manifest manifest, ReadOptions options);
  std::string dir_;
  Manifest manifest_;
  ReadOptions options_;
  std::unique_ptr<Impl> impl_;
  // Closes shard `shard` (when it is still the open one) after its file changed.
  void Forget(const detail::MappedShard* shard) const;
  // The zstd dictionary of field `field`, or null.
  const detail::Dictionary* dictionary(size_t field) const;
  friend class SampleView;
};

}  // namespace shardify
