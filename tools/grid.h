// shardtool grid: a contact sheet of samples as one PNG.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"

namespace shardify::tools {

struct GridOptions {
  IoMode io = IoMode::kMmap;  // how shards are read (--io mmap|pread)
  size_t count = 16;          // samples drawn (fewer when the split is smaller)
  std::string split;          // empty = every sample
  uint64_t seed = 0;          // which samples: the same seed draws the same ones
  std::string field;          // image field; empty = FindImageField
  uint32_t tile = 96;         // each image is scaled to fit a tile x tile square (16..1024)
  uint32_t columns = 0;       // 0 = ceil(sqrt(count))
  bool json = false;          // report {file, width, height, columns, rows, samples, classes}
};

// Size of the sheet for `count` tiles: columns x rows tiles of tile x (tile + caption)
// pixels, separated and framed by kGridPad pixels.
inline constexpr uint32_t kGridPad = 4;
inline constexpr uint32_t kGridCaption = 11;
struct GridLayout {
  uint32_t columns = 0, rows = 0, width = 0, height = 0;
};
GridLayout ComputeGridLayout(size_t count, uint32_t tile, uint32_t columns);

// The `count` sample indices of [first, end) drawn for `seed`, ascending.
std::vector<uint64_t> DrawSamples(uint64_t first, uint64_t end, size_t count, uint64_t seed);

// Draws the chosen samples (2D images; the middle slice z = D / 2 of volumes), each with
// its class name (or its index when unlabeled) below it; a field named "mask" is drawn
// over its image in colour. Writes an 8-bit RGB PNG to `path` atomically.
Status RunGrid(const std::string& dir, const std::string& path, const GridOptions& options, std::ostream& out);

}  // namespace shardify::tools
