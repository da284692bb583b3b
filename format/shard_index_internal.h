// The shard index: building it (writer) and checking + reading it (reader).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/layout.h"
#include "format/manifest.h"

namespace shardify::fb {
struct ShardIndex;
struct Column;
struct BlobRef;
}  // namespace shardify::fb

namespace shardify::detail {

struct BlobEntry {
  uint64_t offset = 0, stored_size = 0, raw_size = 0, checksum = 0;
  Codec codec = Codec::kRaw;
};

// Accumulates one shard's index in memory, column by column.
class ShardIndexBuilder {
 public:
  explicit ShardIndexBuilder(const std::vector<FieldSpec>* fields);
  void Reset(uint64_t first_sample);
  void AddBlob(size_t field, const BlobEntry& blob, const Shape& shape);
  // A chunked field's sample: its chunks in grid order.
  void AddChunks(size_t field, const std::vector<BlobEntry>& chunks, const Shape& shape);
  void AddInt(size_t field, int64_t v);
  void AddFloat(size_t field, double v);
  void AddData(size_t field, const std::string& payload);
  void EndSample() { ++num_samples_; }
  uint64_t num_samples() const { return num_samples_; }
  // Serializes the index (FlatBuffers, identifier "SFYI").
  std::vector<uint8_t> Finish() const;

 private:
  struct Column {
    std::vector<BlobEntry> blobs, chunks;
    std::vector<uint64_t> chunk_starts;
    std::vector<int64_t> dims, ints;
    std::vector<double> floats;
    std::vector<uint8_t> data;
    std::vector<uint64_t> data_offsets;
  };
  const std::vector<FieldSpec>* fields_;
  std::vector<Column> columns_;
  uint64_t first_sample_ = 0;
  uint64_t num_samples_ = 0;
};

// Pointers into a verified index. Valid while the index bytes are.
struct ColumnView {
  const fb::BlobRef* blobs = nullptr;   // ndarray
  const fb::BlobRef* chunks = nullptr;  // chunked ndarray
  const uint64_t* chunk_starts = nullptr;
  const int64_t* dims = nullptr;  // variable-shape ndarray: rank per sample
  const int64_t* ints = nullptr;
  const double* floats = nullptr;
  const uint8_t* data = nullptr;
  const uint64_t* data_offsets = nullptr;
};

// Runs the FlatBuffers verifier and checks every entry against the manifest fields and the
// blob region [kShardHeaderSize, blob_end): counts, offsets, alignment, codecs, shapes,
// raw sizes (<= max_sample_bytes). `where` names the shard in errors. On success fills
// one ColumnView per field.
Status CheckShardIndex(const uint8_t* index, uint64_t length, const std::vector<FieldSpec>& fields,
                       uint64_t first_sample, uint64_t num_samples, uint64_t blob_end, uint64_t max_sample_bytes,
                       const std::string& where, std::vector<ColumnView>* columns);

// Sets the first_sample of a shard index in place (the length stays, so the shard's blobs
// and alignment stay): after running the FlatBuffers verifier, which is all this needs of
// it. An index that does not store the field (a first sample of 0 is left out) can only
// keep 0. `where` names the shard in errors.
Status SetIndexFirstSample(std::vector<uint8_t>* index, uint64_t first_sample, const std::string& where);

// Accessors for one BlobRef, inline because a batch reads one per sample, without the
// generated header: a BlobRef is a FlatBuffers struct of fixed layout, little-endian
// (offset, stored_size, raw_size, checksum: u64 each; codec: u8; padded to 40 bytes),
// which shard_index.cpp checks against the generated code at compile time.
inline constexpr size_t kBlobRefBytes = 40;
inline constexpr size_t kBlobRefCodecAt = 32;

inline BlobEntry ReadBlobRef(const fb::BlobRef* base, uint64_t i) {
  const auto* p = reinterpret_cast<const uint8_t*>(base) + i * kBlobRefBytes;
  BlobEntry e;
  std::memcpy(&e.offset, p, 8);
  std::memcpy(&e.stored_size, p + 8, 8);
  std::memcpy(&e.raw_size, p + 16, 8);
  std::memcpy(&e.checksum, p + 24, 8);
  e.codec = static_cast<Codec>(p[kBlobRefCodecAt]);
  return e;
}
// Where BlobRef i lies (for prefetching), without reading it.
inline const void* BlobRefAddress(const fb::BlobRef* base, uint64_t i) {
  return reinterpret_cast<const uint8_t*>(base) + i * kBlobRefBytes;
}

}  // namespace shardify::detail
