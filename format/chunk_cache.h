// ChunkCache: decoded chunks of chunked ndarray fields, kept for the regions that touch
// them again. Random training patches come back to the same volumes many times an epoch,
// and each patch touches tens of chunks; decoding each chunk once turns most patch reads
// into copies.
//
// Bounded in bytes: inserting beyond the capacity drops the least recently used chunks
// (a chunk larger than the capacity is not kept). Keys are (sample, field, chunk) of one
// dataset: a cache must serve one Dataset only. Chunks are checked (checksums when the
// dataset verifies them) before they are inserted, by SampleView::DecodeRegion.
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace shardify {

class ChunkCache {
 public:
  using Bytes = std::shared_ptr<const std::vector<uint8_t>>;

  explicit ChunkCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // The decoded chunk, or null (and counted as a miss).
  Bytes Find(uint64_t sample, uint32_t field, uint64_t chunk);
  // Keeps `bytes` for the key (replacing nothing: a key already present stays).
  void Insert(uint64_t sample, uint32_t field, uint64_t chunk, Bytes bytes);

  uint64_t capacity() const { return capacity_; }
  uint64_t bytes() const;
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Key {
    uint64_t sample, chunk;
    uint32_t field;
    bool operator==(const Key& o) const { return sample == o.sample && chunk == o.chunk && field == o.field; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  using Order = std::list<Key>;  // most recently used first
  struct Entry {
    Bytes bytes;
    Order::iterator at;
  };

  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
  Order order_;
  uint64_t bytes_ = 0, hits_ = 0, misses_ = 0;
};

}  // namespace shardify
