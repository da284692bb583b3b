// shardtool export: one sample's array back to a standard file in its source dtype.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "base/status.h"
#include "format/dataset.h"

namespace shardify::tools {

struct ExportOptions {
  IoMode io = IoMode::kMmap;  // how shards are read (--io mmap|pread)
  std::string field;          // ndarray field to export; empty = the image field
  bool source_grid = false;   // map a preprocessed array back onto its source grid
  bool json = false;          // report as a JSON object {file, sample, field, format, dtype, shape, source_grid}
};

// Writes ndarray `field` of sample `index` to `path`, chosen by its name:
//  - ".png": 2D arrays [C, H, W] or [H, W], C 1..4, dtype u8 or u16 (8- or 16-bit PNG).
//  - ".nii" / ".nii.gz": any array. When the sample has "<field>.nifti_header", that
//    header is written back unchanged and the voxels in its byte order, so the file
//    equals the source voxel for voxel (see nifti.h). Otherwise a NIfTI-1 header is made
//    from "<field>.spacing", ".origin" and ".direction" when present.
// A field converted from another dtype ("<field>.source_dtype") is written in that dtype
// (the source values bit for bit, unless the field was normalized: then as stored).
// With source_grid, an array that shardify cropped or resampled is mapped back onto the
// source grid (reader/source_grid.h; masks by nearest neighbour, others linearly, voxels
// outside the crop box 0, or a normalized 0), so that the file overlays its source: with
// the source's header (retyped when the dtype differs), else a header from "source.*".
// Without source_grid the stored header is used only where it fits the array; a
// preprocessed array gets one from its own spacing, origin and direction.
// The file is written atomically. Reports what was written to `out`.
// Errors: unknown extension or a dtype/shape the format cannot hold (InvalidArgument,
// Unsupported), sample out of range (OutOfRange), I/O errors naming `path`.
Status RunExport(const std::string& dir, uint64_t index, const std::string& path, const ExportOptions& options,
                 std::ostream& out);

}  // namespace shardify::tools
