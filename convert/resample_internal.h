// Resampling of float volumes onto another grid with ITK (internal; see preprocess.h).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "convert/image_io.h"
#include "format/types.h"

namespace shardify::convert::detail {

// A 3D grid: `size` in array axis order (z, y, x), geometry in ITK order (x, y, z).
struct Grid {
  Shape size;
  Geometry geometry;
};

// The grid of `size` voxels over the same physical box as `from` (the outer faces of its
// voxels), in the same direction: along each axis the spacing becomes spacing * n / m for
// n source and m output voxels, and output voxel j lies at continuous source index
// (j + 0.5) * n / m - 0.5 (as skimage's resize and torch's interpolate with
// align_corners=False map them). An axis whose size does not change keeps its voxels.
Grid ResampledGrid(const Grid& from, const Shape& size);

// cubic: third-order B-spline, its coefficients those of the volume extended by copies of
// its edge voxels (as scipy's zoom with mode 'nearest', and so skimage's resize with
// mode='edge', computes them); linear and nearest take the edge voxel beyond the edge.
enum class Interpolator { kNearest, kLinear, kCubic };

// Resamples `channels` volumes of `in` (row-major [channels, D, H, W] on grid `from`) onto
// grid `to` with `interp`, one channel at a time, on the calling thread; `out` gets
// channels x to.size values. Points outside the source (none, for ResampledGrid's grids)
// are 0. ITK's exceptions become errors.
Status ResampleFloat(const std::vector<float>& in, int64_t channels, const Grid& from, const Grid& to,
                     Interpolator interp, std::vector<float>* out);

}  // namespace shardify::convert::detail
