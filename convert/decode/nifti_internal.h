// NIfTI-1 / NIfTI-2 volumes for the converter, without ITK (internal): the header through
// media/nifti.h, checked against what the converter supports, and the voxels. ITK's reader
// applies scl_slope/scl_inter and converts to float; the converter keeps the stored dtype,
// so voxels are read here. Never trusts a header field unchecked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/decode/image_io.h"

namespace shardify::convert::detail {

// What the converter takes from a volume's header.
struct NiftiVolume {
  int version = 1;             // 1 or 2
  bool big_endian = false;     // byte order of the file
  std::vector<uint8_t> bytes;  // 348 or 540 bytes, as stored
  DType dtype = DType::kU8;
  Shape shape;  // [T, Z, Y, X]
  uint64_t vox_offset = 0;
  Geometry geometry;  // from qform / sform / pixdim, LPS like ITK
  ValueScaling scaling;
};

// Parses a header from the first `size` bytes of a file and checks that the converter
// can read the volume: a single file, a supported datatype, at most 4 dimensions and
// 16 GiB, a vox_offset after the header. `path` names it in errors.
Result<NiftiVolume> ParseNiftiVolume(const uint8_t* data, size_t size, const std::string& path);

// Reads the header of a .nii or .nii.gz file; with `voxels` non-null also reads the voxel
// data, converted to little-endian. Either way the voxel bytes the header claims are
// checked against `max_bytes` (ResourceExhausted) and against what the file can hold
// (Corruption) before anything is allocated for them.
Result<NiftiVolume> ReadNifti(const std::string& path, std::vector<uint8_t>* voxels, uint64_t max_bytes);

}  // namespace shardify::convert::detail
