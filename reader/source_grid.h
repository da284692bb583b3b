// Mapping a preprocessed sample's arrays back onto the grid of its source file.
//
// shardify's preprocessing (--crop nonzero, --spacing) records with every sample where
// its stored arrays came from (docs/fields.md): "source.shape" and "source.crop_box"
// (array axis order), "source.spacing", ".origin", ".direction" (ITK order). The stored
// array covers the physical box of the crop box, resampled to its own size; its voxel j
// along an axis lies at crop-box index (j + 0.5) * n / m - 0.5 for n crop-box voxels and
// m stored ones. ToSourceGrid inverts that: resample back to the crop box, then place the
// box into an array of the source shape.
//
//   ASSIGN_OR_RETURN(auto grid, ReadSourceGrid(ds, sample, decoder));
//   if (grid) ASSIGN_OR_RETURN(bytes, ToSourceGrid(*grid, dtype, shape, bytes, GridInterp::kNearest, {0}, &shape));
//
// Pure functions, thread-safe; no ITK and no LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"
#include "format/types.h"

namespace shardify {

struct SourceGrid {
  Shape shape;                                     // source spatial shape, array axis order
  Shape crop_start, crop_size;                     // the box of the source the stored arrays cover
  std::vector<double> spacing, origin, direction;  // source geometry, ITK order; empty when none
};

// The record of sample `s`: nullopt when the dataset has no "source.shape" field (its
// arrays are on their source grid). Corruption, naming the sample, when the record is
// inconsistent (ranks differ, the box leaves the shape).
Result<std::optional<SourceGrid>> ReadSourceGrid(const Dataset& ds, const SampleView& s, Decoder& d);

// "<field>.source_dtype" of sample `s`; nullopt when the dataset has no such field.
Result<std::optional<DType>> ReadSourceDType(const Dataset& ds, const SampleView& s, const std::string& field);

// An ndarray field of sample `s` as doubles (e.g. "image.normalization"); empty when the
// dataset has no such field.
Result<std::vector<double>> ReadDoubles(const Dataset& ds, const SampleView& s, const std::string& field, Decoder& d);

enum class GridInterp { kNearest, kLinear };

// `array` ([C, spatial...] of `dtype`, stored grid) on the source grid: resampled to the
// crop box with `interp` (linear: separable, clamped at the edges; nearest: the stored
// voxel whose centre is closest, ties to the higher one), then placed at the crop box in
// an array of the source shape whose other voxels are fill[c] (one value for every
// channel, or one per channel). Values are computed in double and stored back in `dtype`
// (integers rounded half away from zero and saturated). `out_shape` gets [C, source...].
Result<std::vector<uint8_t>> ToSourceGrid(const SourceGrid& g, DType dtype, const Shape& shape,
                                          const std::vector<uint8_t>& array, GridInterp interp,
                                          const std::vector<double>& fill, Shape* out_shape);

// Only the placement: `array` ([C, crop_size...] of `dtype`) into the source shape,
// other voxels fill[c].
Result<std::vector<uint8_t>> Uncrop(const SourceGrid& g, DType dtype, const Shape& shape,
                                    const std::vector<uint8_t>& array, const std::vector<double>& fill,
                                    Shape* out_shape);

}  // namespace shardify
