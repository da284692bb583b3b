// A 2D view of an image or volume sample, for previews and contact sheets. Internal.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "format/types.h"

namespace shardify::tools::detail {

// Channel-first values of one 2D plane as doubles: value(c, y, x) = v[(c*h + y)*w + x].
struct Plane {
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t channels = 0;
  std::vector<double> v;
  double at(uint32_t c, uint32_t y, uint32_t x) const { return v[(size_t(c) * height + y) * width + x]; }
};

// Shapes accepted: [H, W], [C, H, W] and [C, D, H, W] (the middle slice, z = D / 2).
// At most 4 channels are kept; planes over 2^26 pixels are Unsupported. `data` holds ByteSize(shape, dtype) bytes.
Result<Plane> ExtractPlane(const uint8_t* data, size_t size, DType dtype, const Shape& shape);

// Maps a plane's channels to 8-bit gray or RGB for display: u8 data reaching 128 or
// more is shown as is, anything else is windowed to the plane's own [min, max] (so label
// maps and dark volumes stay visible). Returns width*height*3 bytes.
std::vector<uint8_t> ToRgb8(const Plane& p, DType dtype);

}  // namespace shardify::tools::detail
