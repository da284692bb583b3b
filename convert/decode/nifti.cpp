// NIfTI volumes: header checks and voxel reading (see nifti_internal.h).
#include "media/nifti.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "convert/decode/decode_internal.h"
#include "convert/decode/gz_internal.h"
#include "convert/decode/nifti_internal.h"
#include "format/elements.h"

namespace shardify::convert::detail {
namespace {

constexpr uint64_t kMaxVoxelBytes = 16ull << 30;

}  // namespace

Result<NiftiVolume> ParseNiftiVolume(const uint8_t* data, size_t size, const std::string& path) {
  Result<media::NiftiHeader> parsed = media::ParseNiftiHeader(data, size);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  const media::NiftiHeader& h = *parsed;
  if (!h.single_file) {
    return Unsupported(path + ": not a single-file NIfTI (magic is not n+1 / n+2; .hdr/.img pairs are not supported)");
  }
  const std::optional<DType> dtype = media::DTypeOfNifti(h.datatype);
  if (!dtype) {
    return Unsupported(path + ": NIfTI datatype " + std::to_string(h.datatype) +
                       " (complex, RGB, uint64 or float128) is not supported");
  }
  for (int64_t i = 5; i <= h.dim[0]; ++i) {
    if (h.dim[i] != 1) return Unsupported(path + ": NIfTI with more than 4 dimensions is not supported");
  }
  auto dim = [&](int64_t i) { return i <= h.dim[0] ? h.dim[i] : int64_t{1}; };
  NiftiVolume out;
  out.version = h.version;
  out.big_endian = h.big_endian;
  out.dtype = *dtype;
  out.shape = {dim(4), dim(3), dim(2), dim(1)};
  auto bytes = ByteSize(out.shape, out.dtype);
  if (!bytes.ok() || *bytes > kMaxVoxelBytes) {
    return ResourceExhausted(path + ": NIfTI volume " + ShapeToString(out.shape) + " is too large");
  }
  out.bytes.assign(data, data + (h.version == 1 ? media::kNifti1HeaderSize : media::kNifti2HeaderSize));
  const double vox = h.vox_offset;
  if (!(vox >= static_cast<double>(out.bytes.size())) || vox > 1e9) {
    return Corruption(path + ": NIfTI vox_offset " + std::to_string(vox) + " is invalid");
  }
  out.vox_offset = static_cast<uint64_t>(vox);
  media::NiftiGeometry g = media::GeometryOf(h);
  out.geometry = Geometry{std::move(g.spacing), std::move(g.origin), std::move(g.direction)};
  out.scaling = ValueScaling{h.scl_slope, h.scl_inter};
  return out;
}

namespace {

Status ReadExactly(gzFile_s* f, uint8_t* dst, uint64_t n, const std::string& path, const char* what) {
  ASSIGN_OR_RETURN(const uint64_t done, GzReadUpTo(f, dst, n, path, what));
  if (done < n) {
    return Corruption(path + ": truncated " + what + ": expected " + std::to_string(n) + " bytes, got " +
                      std::to_string(done));
  }
  return Status::Ok();
}

}  // namespace

Result<NiftiVolume> ReadNifti(const std::string& path, std::vector<uint8_t>* voxels, uint64_t max_bytes) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) return IOError(path + ": cannot open: " + std::strerror(errno));
  uint8_t head[540];
  int got = gzread(f.get(), head, sizeof(head));
  if (got < 0) return Corruption(path + ": cannot read NIfTI header (bad gzip stream)");
  ASSIGN_OR_RETURN(NiftiVolume h, ParseNiftiVolume(head, static_cast<size_t>(got), path));
  ASSIGN_OR_RETURN(uint64_t n, ByteSize(h.shape, h.dtype));
  RETURN_IF_ERROR(CheckFileCanHold(path, f.get(), h.vox_offset, n, "NIfTI voxel data"));
  RETURN_IF_ERROR(CheckDecodedSize(path, h.shape, h.dtype, max_bytes));
  if (voxels == nullptr) return h;
  uint64_t pos = static_cast<uint64_t>(got);
  voxels->assign(n, 0);
  if (h.vox_offset >= pos) {
    std::vector<uint8_t> skip(h.vox_offset - pos);
    RETURN_IF_ERROR(ReadExactly(f.get(), skip.data(), skip.size(), path, "NIfTI extensions"));
    RETURN_IF_ERROR(ReadExactly(f.get(), voxels->data(), n, path, "NIfTI voxel data"));
  } else {
    // The voxels start inside the bytes already read.
    uint64_t have = std::min<uint64_t>(pos - h.vox_offset, n);
    std::memcpy(voxels->data(), head + h.vox_offset, have);
    RETURN_IF_ERROR(ReadExactly(f.get(), voxels->data() + have, n - have, path, "NIfTI voxel data"));
  }
  if (h.big_endian) media::SwapElementBytes(voxels->data(), voxels->size(), DTypeSize(h.dtype));
  return h;
}

}  // namespace shardify::convert::detail

namespace shardify::convert {

bool ValueScaling::applies() const { return slope != 0 && !std::isnan(slope) && (slope != 1 || inter != 0); }

namespace {

// The smallest slope magnitude ITK applies (its MustRescale compares with the machine
// epsilon); nibabel applies any.
constexpr double kMinSlope = 0x1p-52;

Status CheckScaling(const std::string& path, const ValueScaling& s) {
  const bool bad_slope = std::isinf(s.slope) || std::fabs(s.slope) <= kMinSlope;
  if (!bad_slope && std::isfinite(s.inter)) return Status::Ok();
  char b[256];
  std::snprintf(b, sizeof b,
                "NIfTI scl_slope %g, scl_inter %g: readers disagree on what the values are (nibabel and ITK read "
                "them differently); fix the header, or convert without preprocessing and --dtype to keep the "
                "stored values",
                s.slope, s.inter);
  return InvalidArgument(path + ": " + b);
}

}  // namespace

Status ScaleInfo(const std::string& path, ImageInfo* info) {
  if (!info->scaling.applies()) return Status::Ok();
  RETURN_IF_ERROR(CheckScaling(path, info->scaling));
  info->dtype = DType::kF32;
  return Status::Ok();
}

Status ScaleImage(const std::string& path, DecodedImage* image) {
  ImageInfo& info = image->info;
  if (!info.scaling.applies()) return Status::Ok();
  RETURN_IF_ERROR(CheckScaling(path, info.scaling));
  const size_t es = DTypeSize(info.dtype);
  const size_t n = image->pixels.size() / es;
  std::vector<uint8_t> out(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const auto v = static_cast<float>(ElementAsDouble(&image->pixels[i * es], info.dtype) * info.scaling.slope +
                                      info.scaling.inter);
    std::memcpy(&out[i * sizeof(float)], &v, sizeof(float));
  }
  if (!image->nifti_header.empty()) {
    Result<std::vector<uint8_t>> header = media::DescaleNiftiHeader(image->nifti_header, DType::kF32);
    if (!header.ok()) return header.status().WithContext(path);
    image->nifti_header = std::move(header).value();
  }
  image->pixels = std::move(out);
  info.dtype = DType::kF32;
  info.scaling = ValueScaling{};
  return Status::Ok();
}

}  // namespace shardify::convert
