// Choosing a chunk shape for a chunked ndarray field from the training patch size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/types.h"

namespace shardify {

struct ChunkPolicy {
  uint64_t max_chunk_bytes = 6ull << 20;  // nnU-Net's rule of thumb: chunks of at most ~6 MiB
  // Chunks of 3D patches grow to at least this many bytes where the caps allow. Every chunk
  // pays a fixed cost: a zstd frame header and a context reset, an index entry (offset,
  // size, checksum) and a checksum call, and zstd compresses a small input worse (less
  // history to match against). At 4 KiB these rival the work on the data itself; at 64 KiB
  // they are a few percent. 64 KiB is also exactly a 32^3 u16 chunk, so 128^3 patches of
  // u16 and f32 keep their 32^3 chunks (the patch_bench figures in docs/benchmarks.md).
  uint64_t min_chunk_bytes = 64ull << 10;
  double max_patch_ratio = 1.5;  // ... and at most 1.5x the patch along each axis
  int64_t patch_divisor = 4;     // 3D: aim for chunks of a quarter of the patch per axis
};

// A chunk shape for arrays of shape `shape` read in patches of shape `patch` (same rank;
// the leading axes a patch does not span, such as channels, get patch 1). Axes where the
// patch is 1 get chunk 1 (2D slices: one slice per chunk, whole in-plane up to 1.5x the
// patch, never grown further). Otherwise the chunk starts at patch / divisor per axis (a
// random patch then decodes about (1 + 1/d)^3 of its own size), each axis limited to
// max_patch_ratio x patch and to the array. While the chunk is smaller than
// min_chunk_bytes, the smallest spanned axis still below its limit is doubled (clipped to
// the limit), the first such axis on ties; growth stops when no axis can grow or the next
// step would pass max_chunk_bytes. Finally the largest axis is halved until the chunk is
// at most max_chunk_bytes, so that cap always wins. Example, u16: patch 32x64x64 of a
// 32x512x512 array gives 32x32x32 (64 KiB) instead of 8x16x16 (4 KiB); 128^3 gives 32^3.
// Preconditions: same rank, every entry >= 1, elem_size >= 1.
Shape ChooseChunkShape(const Shape& shape, const Shape& patch, size_t elem_size, const ChunkPolicy& policy = {});

}  // namespace shardify
