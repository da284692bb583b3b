// Resampling of float volumes onto another grid with ITK (internal; see preprocess.h).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "convert/decode/image_io.h"
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

// --- Bit for bit as scipy (zoom.cpp) ---------------------------------------------------
// nnU-Net resamples with scipy's ndimage (skimage's resize calls its zoom); where the result
// is compared with a threshold or rounded (labels, slices), agreeing to float tolerance is
// not enough: these follow scipy's arithmetic operation by operation.

// Linear interpolation of a volume (row-major, shape `from`, 3 axes) onto `to` voxels, as
// scipy's ndimage.zoom(order=1, mode='nearest', grid_mode=True) computes it, so as
// skimage's resize(order=1, mode='edge', anti_aliasing=False) and nnU-Net's
// resize_segmentation compute a label's indicator: per axis the source coordinate
// (j + 0.5) * (n / m) - 0.5, weights 1 - t and 1 - (1 - t) of the voxels either side (the
// edge voxel beyond the edge), each corner's value times the weights of its axes in turn,
// corners summed with the last axis fastest; the axes taken in `order` (array axes), as
// scipy sees them in nnU-Net's transposed array (PreprocessPlan::transpose). An axis whose
// size does not change keeps its voxels exactly.
void ZoomLinear(const std::vector<double>& in, const Shape& from, const Shape& to, const std::array<int, 3>& order,
                std::vector<double>* out);

// The source index that nearest neighbour takes for output index j of an axis of n source
// and m output voxels: floor(c + 0.5) of the coordinate c above (an exact half rounds up),
// clamped to the axis, as scipy's map_coordinates(order=0, mode='nearest') on nnU-Net's
// coordinates.
int64_t NearestSource(int64_t j, int64_t n, int64_t m);

// Nearest neighbour along `axis` of `in` ([channels, from...] elements of `element_size`
// bytes) to `size` voxels, the other axes as they are: nnU-Net's resampling along its
// out-of-plane axis (order_z 0). `out` gets the bytes.
void NearestAlongAxis(const uint8_t* in, size_t element_size, int64_t channels, const Shape& from, int axis,
                      int64_t size, std::vector<uint8_t>* out);

}  // namespace shardify::convert::detail
