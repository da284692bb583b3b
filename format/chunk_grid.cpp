#include "format/chunk_grid.h"

#include <algorithm>
#include <cstring>

namespace shardify {

Result<ChunkGrid> MakeChunkGrid(const Shape& shape, const Shape& chunk) {
  if (shape.size() != chunk.size() || shape.empty())
    return InvalidArgument("chunk shape " + ShapeToString(chunk) + " does not fit array shape " + ShapeToString(shape));
  ChunkGrid g{shape, chunk, Shape(shape.size()), 1};
  for (size_t i = 0; i < shape.size(); ++i) {
    if (chunk[i] < 1 || shape[i] < 0) return InvalidArgument("bad chunk shape " + ShapeToString(chunk));
    g.grid[i] = shape[i] == 0 ? 0 : (shape[i] + chunk[i] - 1) / chunk[i];
  }
  ASSIGN_OR_RETURN(g.count, ElementCount(g.grid));
  return g;
}

void ChunkBox(const ChunkGrid& g, uint64_t k, Shape* origin, Shape* extent) {
  const size_t rank = g.shape.size();
  origin->resize(rank);
  extent->resize(rank);
  for (size_t i = rank; i-- > 0;) {
    const int64_t c = static_cast<int64_t>(k % static_cast<uint64_t>(g.grid[i]));
    k /= static_cast<uint64_t>(g.grid[i]);
    (*origin)[i] = c * g.chunk[i];
    (*extent)[i] = std::min(g.chunk[i], g.shape[i] - (*origin)[i]);
  }
}

void CopyBox(const uint8_t* src, const Shape& src_shape, const Shape& src_origin, uint8_t* dst, const Shape& dst_shape,
             const Shape& dst_origin, const Shape& box, size_t elem) {
  const size_t rank = box.size();
  for (int64_t d : box)
    if (d <= 0) return;
  // Strides in elements.
  int64_t src_stride[kMaxRank], dst_stride[kMaxRank];
  int64_t s = 1, t = 1;
  for (size_t i = rank; i-- > 0;) {
    src_stride[i] = s;
    dst_stride[i] = t;
    s *= src_shape[i];
    t *= dst_shape[i];
  }
  const size_t run = static_cast<size_t>(box[rank - 1]) * elem;
  int64_t idx[kMaxRank] = {};
  while (true) {
    int64_t so = 0, dof = 0;
    for (size_t i = 0; i < rank; ++i) {
      so += (src_origin[i] + idx[i]) * src_stride[i];
      dof += (dst_origin[i] + idx[i]) * dst_stride[i];
    }
    std::memcpy(dst + dof * static_cast<int64_t>(elem), src + so * static_cast<int64_t>(elem), run);
    size_t i = rank - 1;  // advance the index over every axis but the last
    while (i-- > 0) {
      if (++idx[i] < box[i]) break;
      idx[i] = 0;
    }
    if (i == static_cast<size_t>(-1)) return;
  }
}

}  // namespace shardify
