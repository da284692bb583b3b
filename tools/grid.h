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
  bool json = false;          // report {file, width, height, columns, rows, samples, captions, title, mask_labels}
};

// Size of the sheet for `count` tiles: a title line, then columns x rows tiles of
// tile x (tile + caption) pixels, separated and framed by kGridPad pixels, then, with
// `legend` (a mask is drawn), a line naming the mask labels' colours.
inline constexpr uint32_t kGridPad = 4;
inline constexpr uint32_t kGridCaption = 11;
inline constexpr uint32_t kGridLine = 7 + 2 * kGridPad;  // a line of text (the title, the legend)
struct GridLayout {
  uint32_t columns = 0, rows = 0, width = 0, height = 0;
  uint32_t tiles_top = 0;   // the first row of tiles
  uint32_t legend_top = 0;  // the legend's line (0: none)
};
GridLayout ComputeGridLayout(size_t count, uint32_t tile, uint32_t columns, bool legend = false);

// The `count` sample indices of [first, end) drawn for `seed`, ascending.
std::vector<uint64_t> DrawSamples(uint64_t first, uint64_t end, size_t count, uint64_t seed);

// Draws the chosen samples (2D images; the middle slice z = D / 2 of volumes), each with
// its class name (or its index when unlabeled) below it, under a title naming the dataset,
// split, field and samples; a field named "mask" is drawn over its image in colour, with
// a legend of the labels drawn. Writes an 8-bit RGB PNG to `path` atomically.
Status RunGrid(const std::string& dir, const std::string& path, const GridOptions& options, std::ostream& out);

}  // namespace shardify::tools
