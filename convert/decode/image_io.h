// Image and volume decoding for the converter, behind a header free of ITK.
//
// Supported inputs (chosen by file name, then checked against the file's magic bytes):
//   PNG (1/2/4/8/16-bit gray, gray+alpha, RGB, RGBA, palette), JPEG, NIfTI-1 and NIfTI-2
//   as .nii or .nii.gz (2D to 4D, any integer or float datatype, either byte order).
// Decoded pixels are planar and row-major with x fastest: 2D images have shape
// [C, H, W]; volumes [C, D, H, W] (C = 1 for 3D, the 4th NIfTI axis otherwise).
// Pixels keep their source dtype and are stored little-endian. NIfTI voxels are the
// stored values (scl_slope / scl_inter are not applied; they stay in the header bytes);
// ScaleImage gives them the values the scaling says, for code that interprets them.
//
// Thread-safety: every function may be called from any number of threads at once.
// Errors never throw; messages start with the file path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/types.h"

namespace shardify::convert {

enum class ImageKind { kUnknown, kPng, kJpeg, kNifti };

// Kind from the file name (case-insensitive: .png, .jpg, .jpeg, .nii, .nii.gz).
ImageKind KindFromName(const std::string& path);

// Spatial geometry in ITK order (x, y, z). Empty vectors when the source has none.
struct Geometry {
  std::vector<double> spacing;    // [S]
  std::vector<double> origin;     // [S]
  std::vector<double> direction;  // [S*S], row-major
  bool operator==(const Geometry& o) const {
    return spacing == o.spacing && origin == o.origin && direction == o.direction;
  }
};

// A NIfTI header's value scaling: a voxel means stored * slope + inter. As the header
// gives it; slope 0 (the NIfTI-1 standard's "none") or NaN means none, as nibabel and ITK
// read it.
struct ValueScaling {
  double slope = 0, inter = 0;
  // Whether values differ from the stored ones: a slope that is not 0 or NaN, and not
  // (slope 1, inter 0).
  bool applies() const;
};

// What a header says, without decoding pixels.
struct ImageInfo {
  ImageKind kind = ImageKind::kUnknown;
  DType dtype = DType::kU8;
  Shape shape;              // [C, H, W] or [C, D, H, W]
  Geometry geometry;        // volumes only (S = 3)
  uint64_t file_bytes = 0;  // size of the source file, when the reader knows it
  ValueScaling scaling;     // NIfTI only
};

struct DecodedImage {
  ImageInfo info;
  std::vector<uint8_t> pixels;        // ElementCount(shape) * DTypeSize(dtype) bytes
  std::vector<uint8_t> nifti_header;  // NIfTI only: the header bytes as stored (348 or 540)
};

// Decoded bytes one image may have unless the caller allows more: the default of
// shardify's per-sample memory limit (--max-sample-memory).
inline constexpr uint64_t kDefaultMaxImageBytes = 2ull << 30;

// Reads only the header. When `small_file` is non-null and reading the header read the
// whole file (a PNG of at most 4 KiB), the file's bytes are stored there (else it is
// left empty); hand them to ReadImage to decode without reading the file again.
// What the header claims is checked before anything is allocated for pixels: an image
// that would decode to more than `max_bytes` is ResourceExhausted; dimensions the file
// cannot hold (a short .nii, a PNG or gzip stream that could not inflate to them) are
// Corruption. So a hostile header costs neither time nor memory, also in a dry run.
Result<ImageInfo> ReadImageInfo(const std::string& path, std::vector<uint8_t>* small_file = nullptr,
                                uint64_t max_bytes = kDefaultMaxImageBytes);
// Reads header and pixels, with the same checks first; `file_bytes`, when non-null and
// non-empty, are the contents of `path` as returned through ReadImageInfo's `small_file`.
Result<DecodedImage> ReadImage(const std::string& path, const std::vector<uint8_t>* file_bytes = nullptr,
                               uint64_t max_bytes = kDefaultMaxImageBytes);

// Values as readers that apply the scaling give them (nibabel's get_fdata, ITK's NIfTI
// reader; so nnU-Net's readers): stored * slope + inter, computed in double and stored as
// f32, nnU-Net's dtype. Where info.scaling applies, ScaleInfo makes `info` f32 and
// ScaleImage converts the pixels and drops the scaling from the stored NIfTI header (so
// the header describes the values kept); elsewhere both leave the image as it is. A scaling
// the readers disagree on (an infinite slope, a slope under 2^-52 in magnitude, an
// intercept that is not finite) is InvalidArgument naming `path`.
Status ScaleInfo(const std::string& path, ImageInfo* info);
Status ScaleImage(const std::string& path, DecodedImage* image);

// Writes a 2D image given planar [C, H, W] pixels (C = 1..4; u8 or u16 for PNG, u8 for
// JPEG). The format follows the file name. Used by idx2png and by tests.
Status WriteImage2D(const std::string& path, DType dtype, const Shape& shape, const std::vector<uint8_t>& pixels);

// Writes a NIfTI-1 volume of shape [C, D, H, W] (C > 1 gives a 4D file) with the given
// geometry (S = 3). Used by tests and benchmarks to make fixtures.
Status WriteNifti(const std::string& path, DType dtype, const Shape& shape, const std::vector<uint8_t>& pixels,
                  const Geometry& geometry);

}  // namespace shardify::convert
