// NIfTI-1 (348-byte) and NIfTI-2 (540-byte) headers: one parser and one builder, shared
// by the converter (reading volumes) and shardtool (showing and exporting them). Only the
// header: voxels are read and written by their callers. Either byte order is read; what
// is built keeps the byte order it is given.
//
// Nothing here trusts the bytes: every function checks sizes before reading and returns
// Corruption (messages without a file name; callers add theirs) for a header that cannot
// be right. Thread-safe: no state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "format/types.h"

namespace shardify::media {

inline constexpr size_t kNifti1HeaderSize = 348;
inline constexpr size_t kNifti2HeaderSize = 540;

// The header fields shardify reads or writes, NIfTI-1's float and int16 fields widened.
// A header built from this struct has every other byte zero (or as in its base).
struct NiftiHeader {
  int version = 1;               // 1 or 2: sizeof_hdr 348 or 540
  bool big_endian = false;       // byte order of the header (and of the voxels after it)
  bool single_file = true;       // magic "n+1" / "n+2"; false: anything else ("ni1": .hdr/.img)
  std::array<int64_t, 8> dim{};  // dim[0] = rank
  int16_t datatype = 0;
  int16_t bitpix = 0;
  std::array<double, 8> pixdim{};  // pixdim[0] = qfac
  double vox_offset = 0;           // as stored (NIfTI-1: a float); see VoxOffsetBytes
  double scl_slope = 0, scl_inter = 0;
  double cal_max = 0, cal_min = 0;
  int32_t qform_code = 0, sform_code = 0;
  std::array<double, 3> quatern{};              // quatern_b, _c, _d
  std::array<double, 3> qoffset{};              // qoffset_x, _y, _z
  std::array<std::array<double, 4>, 3> srow{};  // srow_x, srow_y, srow_z
  int32_t xyzt_units = 0;
  // Field by field (a NaN field compares unequal, as doubles do).
  bool operator==(const NiftiHeader& o) const;
};

// Parses the header at the start of `data`; `size` may be larger (a file's first bytes).
// Checks sizeof_hdr (348 or 540, either byte order), that `size` holds it, dim[0] in
// 1..7 and dim[1..dim[0]] >= 1; everything else is reported as it is.
Result<NiftiHeader> ParseNiftiHeader(const uint8_t* data, size_t size);

// The 348 or 540 header bytes of `h`, in its byte order. Every field of NiftiHeader is
// written; the other bytes are those of `base` (a header of the same size, e.g. the one
// `h` was parsed from) or zero when `base` is empty. The magic is written unless `base`
// already says what `h.single_file` says. So BuildNiftiHeader(ParseNiftiHeader(b), b)
// == b for every header b that parses (NaN payloads included).
std::vector<uint8_t> BuildNiftiHeader(const NiftiHeader& h, std::vector<uint8_t> base = {});

// A header as a dataset stores it ("<f>.nifti_header"), to write voxels after it:
// exactly 348 or 540 bytes, bitpix a positive multiple of 8, at most 2^40 voxel bytes,
// and, for a single file, vox_offset in [header size, header size + 64 MiB].
Result<NiftiHeader> ParseStoredNiftiHeader(const uint8_t* data, size_t size);

// vox_offset as a byte position: -1 when it is not finite, negative or 1e15 or more.
int64_t VoxOffsetBytes(const NiftiHeader& h);

// bitpix / 8 times dim[1..rank]. Corruption when bitpix is not a positive multiple of 8
// or the product passes 2^40.
Result<uint64_t> NiftiVoxelBytes(const NiftiHeader& h);

// The NIfTI datatype code of a DType (2 u8, 4 i16, 16 f32, ...); 0 for f16, which NIfTI
// cannot hold. DTypeOfNifti is its inverse: nullopt for complex, RGB, uint64, float128.
int16_t NiftiDatatypeOf(DType t);
std::optional<DType> DTypeOfNifti(int64_t datatype);

// Spacing, origin and direction (row-major) of the 3 spatial axes in ITK's convention
// (LPS, x first).
struct NiftiGeometry {
  std::vector<double> spacing, origin, direction;
};
// The geometry the header describes: from the qform when its code is set, else from the
// sform, else pixdim alone (zero origin, identity direction).
NiftiGeometry GeometryOf(const NiftiHeader& h);

// A NIfTI-1 header for an array without a stored one. `shape` is [C, D, H, W],
// [C, H, W] or [H, W] (C > 1 becomes the 4th dimension); spacing/origin/direction are
// in ITK order (empty = unit spacing, zero origin, identity) and go to pixdim and to the
// sform (code 1) after conversion to RAS; units mm. Unsupported for f16; InvalidArgument
// for another rank or a dimension over 32767.
Result<std::vector<uint8_t>> MakeNifti1Header(const Shape& shape, DType dtype, const std::vector<double>& spacing,
                                              const std::vector<double>& origin, const std::vector<double>& direction);

// Whether stored `header` describes an array of `shape` (mapped as MakeNifti1Header maps
// it; trailing dimensions of 1 do not count).
Result<bool> NiftiHeaderFits(const std::vector<uint8_t>& header, const Shape& shape);

// Stored `header` for voxels of `dtype`: datatype and bitpix set; when they change, the
// scaling is dropped (scl_slope and scl_inter 0: the values are stored ones) and cal_min /
// cal_max zeroed. Every other byte is kept, so the file overlays its source exactly.
// Unsupported for f16.
Result<std::vector<uint8_t>> RetypeNiftiHeader(const std::vector<uint8_t>& header, DType dtype);
// The same for voxels whose scaling was applied (they hold stored * scl_slope + scl_inter
// as `dtype`): the scaling is dropped whether or not the dtype changes.
Result<std::vector<uint8_t>> DescaleNiftiHeader(const std::vector<uint8_t>& header, DType dtype);

// Reverses the bytes of each `width`-byte element of data[0, size): the voxels of a
// big-endian file into this machine's (little-endian) order, or back. width < 2: nothing;
// a partial element at the end is left alone.
void SwapElementBytes(uint8_t* data, size_t size, size_t width);

}  // namespace shardify::media
