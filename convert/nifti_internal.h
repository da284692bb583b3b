// NIfTI-1 / NIfTI-2 header parsing and voxel reading without ITK (internal).
// ITK's reader applies scl_slope/scl_inter and converts to float; the converter keeps
// the stored dtype, so voxels are read here. Never trusts a header field unchecked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/image_io.h"

namespace shardify::convert::detail {

struct NiftiHeader {
  int version = 1;                  // 1 or 2
  bool big_endian = false;          // byte order of the file
  std::vector<uint8_t> bytes;       // 348 or 540 bytes, as stored
  DType dtype = DType::kU8;
  Shape shape;                      // [T, Z, Y, X]
  uint64_t vox_offset = 0;
  Geometry geometry;                // from qform / sform / pixdim, LPS like ITK
};

// Parses a header from the first `size` bytes of a file. `path` names it in errors.
Result<NiftiHeader> ParseNiftiHeader(const uint8_t* data, size_t size, const std::string& path);

// Reads the header of a .nii or .nii.gz file; with `voxels` non-null also reads the voxel
// data, converted to little-endian. Either way the voxel bytes the header claims are
// checked against `max_bytes` (ResourceExhausted) and against what the file can hold
// (Corruption) before anything is allocated for them.
Result<NiftiHeader> ReadNifti(const std::string& path, std::vector<uint8_t>* voxels, uint64_t max_bytes);

}  // namespace shardify::convert::detail
