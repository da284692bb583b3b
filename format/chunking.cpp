#include "format/chunking.h"

#include <algorithm>
#include <cmath>

namespace shardify {

Shape ChooseChunkShape(const Shape& shape, const Shape& patch, size_t elem_size, const ChunkPolicy& policy) {
  const size_t rank = shape.size();
  int spanned = 0;  // axes a patch spans with more than one element
  for (size_t i = 0; i < rank; ++i) spanned += patch[i] > 1 ? 1 : 0;
  Shape chunk(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    if (patch[i] <= 1) continue;
    int64_t c = spanned <= 2 ? patch[i] : (patch[i] + policy.patch_divisor - 1) / policy.patch_divisor;
    if (spanned <= 2) c = shape[i];  // 2D: whole slices
    const auto cap = static_cast<int64_t>(std::floor(policy.max_patch_ratio * static_cast<double>(patch[i])));
    c = std::min({c, std::max<int64_t>(cap, 1), std::max<int64_t>(shape[i], 1)});
    chunk[i] = std::max<int64_t>(c, 1);
  }
  auto bytes = [&] {
    uint64_t b = elem_size;
    for (int64_t c : chunk) b *= static_cast<uint64_t>(c);
    return b;
  };
  while (bytes() > policy.max_chunk_bytes) {  // halve the largest axis until small enough
    auto it = std::max_element(chunk.begin(), chunk.end());
    if (*it <= 1) break;
    *it = (*it + 1) / 2;
  }
  return chunk;
}

}  // namespace shardify
