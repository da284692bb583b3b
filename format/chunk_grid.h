// Chunk grids of chunked ndarray fields, and n-d box copies between row-major arrays. Used by
// the format itself and by the rooms that assemble or cut volumes (convert/, reader/).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "format/types.h"

namespace shardify {

// The grid of chunks covering an array: grid[i] = ceil(shape[i] / chunk[i]).
struct ChunkGrid {
  Shape shape, chunk, grid;
  uint64_t count = 0;  // number of chunks
};

// Errors when ranks differ, a chunk dimension is < 1 or the count overflows.
Result<ChunkGrid> MakeChunkGrid(const Shape& shape, const Shape& chunk);

// Origin and (edge-clipped) extent of chunk k, row-major over the grid.
void ChunkBox(const ChunkGrid& g, uint64_t k, Shape* origin, Shape* extent);

// Copies the box of size `box` at src_origin in src (shape src_shape) to dst_origin in dst
// (shape dst_shape). Both arrays row-major with elements of `elem` bytes. Preconditions:
// the box lies inside both arrays; rank <= kMaxRank.
void CopyBox(const uint8_t* src, const Shape& src_shape, const Shape& src_origin, uint8_t* dst, const Shape& dst_shape,
             const Shape& dst_origin, const Shape& box, size_t elem);

}  // namespace shardify
