// XXH3-64 (seed 0), the one checksum of the format.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shardify {

uint64_t Checksum64(const void* data, size_t size);

// Incremental form, for checksums over non-contiguous ranges.
class Checksum64Stream {
 public:
  Checksum64Stream();
  ~Checksum64Stream();
  Checksum64Stream(const Checksum64Stream&) = delete;
  Checksum64Stream& operator=(const Checksum64Stream&) = delete;
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  void* state_;
};

}  // namespace shardify
