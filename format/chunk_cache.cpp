#include "format/chunk_cache.h"

#include <utility>

namespace shardify {

size_t ChunkCache::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.sample * 0x9E3779B97F4A7C15ull;
  h ^= (k.chunk + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2));
  h ^= (uint64_t{k.field} + 0x94D049BB133111EBull + (h << 6) + (h >> 2));
  return static_cast<size_t>(h);
}

ChunkCache::Bytes ChunkCache::Find(uint64_t sample, uint32_t field, uint64_t chunk) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(Key{sample, chunk, field});
  if (it == entries_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  order_.splice(order_.begin(), order_, it->second.at);
  return it->second.bytes;
}

void ChunkCache::Insert(uint64_t sample, uint32_t field, uint64_t chunk, Bytes bytes) {
  if (!bytes || bytes->size() > capacity_) return;
  const Key key{sample, chunk, field};
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.count(key) != 0) return;
  while (bytes_ + bytes->size() > capacity_ && !order_.empty()) {
    const auto old = entries_.find(order_.back());
    bytes_ -= old->second.bytes->size();
    entries_.erase(old);
    order_.pop_back();
  }
  order_.push_front(key);
  bytes_ += bytes->size();
  entries_.emplace(key, Entry{std::move(bytes), order_.begin()});
}

uint64_t ChunkCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

uint64_t ChunkCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t ChunkCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace shardify
