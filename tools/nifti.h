// Writing NIfTI-1 / NIfTI-2 files from a stored header and native voxels, without ITK.
//
// The format keeps a volume's source header bytes (field "<f>.nifti_header") and its
// voxels in native little-endian order. WriteNiftiFile puts both back together so the
// file equals the source voxel for voxel: the header is written unchanged, zero bytes
// fill up to vox_offset (source extensions are not kept), and voxels are byte-swapped
// back when the header is big-endian. A name ending in ".gz" is gzip-compressed.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "format/status.h"
#include "format/types.h"

namespace shardify::tools {

// What shardtool needs to know from a NIfTI-1 (348-byte) or NIfTI-2 (540-byte) header.
struct NiftiHeaderInfo {
  int version = 1;               // 1 or 2
  bool big_endian = false;       // byte order of the header (and of the source voxels)
  bool single_file = true;       // magic "n+1"/"n+2" (vs "ni1"/"ni2", a .hdr/.img pair)
  std::array<int64_t, 8> dim{};  // dim[0] = rank
  int16_t datatype = 0;
  int16_t bitpix = 0;
  std::array<double, 8> pixdim{};
  int64_t vox_offset = 0;
  double scl_slope = 0, scl_inter = 0;
  int32_t qform_code = 0, sform_code = 0;
  size_t header_size = 0;    // 348 or 540
  uint64_t voxel_bytes = 0;  // product of dim[1..rank] * bitpix / 8
};

// Parses and checks a header (sizes, rank 1..7, positive dims, bitpix a multiple of 8).
// Corruption says which value is wrong.
Result<NiftiHeaderInfo> ParseNiftiHeader(const uint8_t* data, size_t size);

// The NIfTI datatype code of a DType (2 u8, 4 i16, 16 f32, ...); 0 for f16, which
// NIfTI cannot hold.
int16_t NiftiDatatypeOf(DType t);

// The complete file image (not compressed): `header` (a pair header is turned into a
// single-file one: magic "n+1"/"n+2" and vox_offset 352/544), zero padding, then
// `voxels` in the header's byte order. `voxels` must hold exactly voxel_bytes bytes of
// elements of `dtype`, whose size must equal bitpix / 8.
Result<std::vector<uint8_t>> BuildNiftiImage(const std::vector<uint8_t>& header, const uint8_t* voxels, size_t size,
                                             DType dtype);

// Whether `header` describes an array of `shape` ([C, D, H, W], [C, H, W] or [H, W], as
// MakeNifti1Header maps it; trailing dimensions of 1 do not count).
Result<bool> NiftiHeaderFits(const std::vector<uint8_t>& header, const Shape& shape);

// `header` for voxels of `dtype`: datatype and bitpix set; when they change, the scaling
// is dropped (scl_slope and scl_inter 0: the values are stored ones) and cal_min/cal_max
// zeroed. Everything else (dims, pixdim, qform, sform and their codes, units, vox_offset)
// is kept, so the file overlays its source exactly. Unsupported for f16.
Result<std::vector<uint8_t>> RetypeNiftiHeader(const std::vector<uint8_t>& header, DType dtype);

// A NIfTI-1 header for an array without a stored one. `shape` is [C, D, H, W],
// [C, H, W] or [H, W] (C > 1 becomes the 4th dimension); spacing/origin/direction are
// in ITK order (LPS, x first; empty = unit spacing, zero origin, identity) and go to the
// sform (code 1) after conversion to RAS.
Result<std::vector<uint8_t>> MakeNifti1Header(const Shape& shape, DType dtype, const std::vector<double>& spacing,
                                              const std::vector<double>& origin, const std::vector<double>& direction);

// Writes `image` to `path` atomically (temporary file, then rename); gzip when `path`
// ends in ".gz". Errors name the path.
Status WriteMaybeGzipped(const std::string& path, const std::vector<uint8_t>& image);

}  // namespace shardify::tools
