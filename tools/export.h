// shardtool export: one sample's array back to a standard file in its source dtype.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "format/dataset.h"
#include "format/status.h"

namespace shardify::tools {

struct ExportOptions {
  IoMode io = IoMode::kMmap;  // how shards are read (--io mmap|pread)
  std::string field;  // ndarray field to export; empty = the image field
  bool json = false;  // report as a JSON object {file, sample, field, format, dtype, shape}
};

// Writes ndarray `field` of sample `index` to `path`, chosen by its name:
//  - ".png": 2D arrays [C, H, W] or [H, W], C 1..4, dtype u8 or u16 (8- or 16-bit PNG).
//  - ".nii" / ".nii.gz": any array. When the sample has "<field>.nifti_header", that
//    header is written back unchanged and the voxels in its byte order, so the file
//    equals the source voxel for voxel (see nifti.h). Otherwise a NIfTI-1 header is made
//    from "<field>.spacing", ".origin" and ".direction" when present.
// The file is written atomically. Reports what was written to `out`.
// Errors: unknown extension or a dtype/shape the format cannot hold (InvalidArgument,
// Unsupported), sample out of range (OutOfRange), I/O errors naming `path`.
Status RunExport(const std::string& dir, uint64_t index, const std::string& path, const ExportOptions& options,
                 std::ostream& out);

}  // namespace shardify::tools
