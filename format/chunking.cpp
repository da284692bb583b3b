#include "format/chunking.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardify {
namespace {

// Bytes of one chunk, saturating instead of overflowing.
uint64_t ChunkBytes(const Shape& chunk, size_t elem_size) {
  uint64_t b = elem_size;
  for (int64_t c : chunk) {
    const auto u = static_cast<uint64_t>(c);
    if (u != 0 && b > std::numeric_limits<uint64_t>::max() / u) return std::numeric_limits<uint64_t>::max();
    b *= u;
  }
  return b;
}

// Doubles the smallest spanned axis still below its limit until the chunk holds at least
// min_chunk_bytes, no axis can grow, or the next step would pass max_chunk_bytes.
void GrowToMinimum(Shape& chunk, const Shape& patch, const Shape& limit, size_t elem_size, const ChunkPolicy& policy) {
  const size_t rank = chunk.size();
  while (ChunkBytes(chunk, elem_size) < policy.min_chunk_bytes) {
    size_t axis = rank;
    for (size_t i = 0; i < rank; ++i) {
      if (patch[i] > 1 && chunk[i] < limit[i] && (axis == rank || chunk[i] < chunk[axis])) axis = i;
    }
    if (axis == rank) return;
    Shape next = chunk;
    next[axis] = std::min(2 * chunk[axis], limit[axis]);
    if (ChunkBytes(next, elem_size) > policy.max_chunk_bytes) return;
    chunk = std::move(next);
  }
}

}  // namespace

Shape ChooseChunkShape(const Shape& shape, const Shape& patch, size_t elem_size, const ChunkPolicy& policy) {
  const size_t rank = shape.size();
  int spanned = 0;  // axes a patch spans with more than one element
  for (size_t i = 0; i < rank; ++i) spanned += patch[i] > 1 ? 1 : 0;
  Shape chunk(rank, 1), limit(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    if (patch[i] <= 1) continue;
    const auto cap = static_cast<int64_t>(std::floor(policy.max_patch_ratio * static_cast<double>(patch[i])));
    limit[i] = std::min(std::max<int64_t>(cap, 1), std::max<int64_t>(shape[i], 1));
    // 2D: whole slices; 3D: a fraction of the patch.
    const int64_t c = spanned <= 2 ? shape[i] : (patch[i] + policy.patch_divisor - 1) / policy.patch_divisor;
    chunk[i] = std::clamp<int64_t>(c, 1, limit[i]);
  }
  if (spanned > 2) GrowToMinimum(chunk, patch, limit, elem_size, policy);
  while (ChunkBytes(chunk, elem_size) > policy.max_chunk_bytes) {  // halve the largest axis until small enough
    auto it = std::max_element(chunk.begin(), chunk.end());
    if (*it <= 1) break;
    *it = (*it + 1) / 2;
  }
  return chunk;
}

}  // namespace shardify
