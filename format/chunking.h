// Choosing a chunk shape for a chunked ndarray field from the training patch size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/types.h"

namespace shardify {

struct ChunkPolicy {
  uint64_t max_chunk_bytes = 6ull << 20;  // nnU-Net's rule of thumb: chunks of at most ~6 MiB
  double max_patch_ratio = 1.5;           // ... and at most 1.5x the patch along each axis
  int64_t patch_divisor = 4;              // 3D: aim for chunks of a quarter of the patch per axis
};

// A chunk shape for arrays of shape `shape` read in patches of shape `patch` (same rank;
// the leading axes a patch does not span, such as channels, get patch 1). Axes where the
// patch is 1 get chunk 1 (2D slices: one slice per chunk, whole in-plane). Otherwise the
// chunk is patch / divisor per axis (a random patch then decodes about (1 + 1/d)^3 of its
// own size), capped by the policy and by the array.
// Preconditions: same rank, every entry >= 1.
Shape ChooseChunkShape(const Shape& shape, const Shape& patch, size_t elem_size, const ChunkPolicy& policy = {});

}  // namespace shardify
