// NIfTI header parsing and voxel reading (see nifti_internal.h).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>

#include "convert/decode_internal.h"
#include "convert/gz_internal.h"
#include "convert/nifti_internal.h"

namespace shardify::convert::detail {
namespace {

constexpr uint64_t kMaxVoxelBytes = 16ull << 30;


// Reads little- or big-endian values from the header bytes.
class HeaderBytes {
 public:
  HeaderBytes(const uint8_t* p, bool big) : p_(p), big_(big) {}
  uint64_t Raw(size_t off, size_t n) const {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) {
      size_t k = big_ ? i : n - 1 - i;
      v = (v << 8) | p_[off + k];
    }
    return v;
  }
  int64_t I16(size_t off) const { return static_cast<int16_t>(Raw(off, 2)); }
  int64_t I32(size_t off) const { return static_cast<int32_t>(Raw(off, 4)); }
  int64_t I64(size_t off) const { return static_cast<int64_t>(Raw(off, 8)); }
  double F32(size_t off) const {
    uint32_t u = static_cast<uint32_t>(Raw(off, 4));
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  double F64(size_t off) const {
    uint64_t u = Raw(off, 8);
    double d;
    std::memcpy(&d, &u, 8);
    return d;
  }

 private:
  const uint8_t* p_;
  bool big_;
};

Result<DType> NiftiDType(int64_t code, const std::string& path) {
  switch (code) {
    case 2: return DType::kU8;
    case 4: return DType::kI16;
    case 8: return DType::kI32;
    case 16: return DType::kF32;
    case 64: return DType::kF64;
    case 256: return DType::kI8;
    case 512: return DType::kU16;
    case 768: return DType::kU32;
    case 1024: return DType::kI64;
    default:
      return Unsupported(path + ": NIfTI datatype " + std::to_string(code) +
                         " (complex, RGB, uint64 or float128) is not supported");
  }
}

// Header field offsets that differ between NIfTI-1 and NIfTI-2.
struct Offsets {
  size_t dim, datatype, pixdim, vox_offset, qform_code, sform_code, quatern, srow;
  bool wide;  // 8-byte dims / floats
};
constexpr Offsets kN1{40, 70, 76, 108, 252, 254, 256, 280, false};
constexpr Offsets kN2{16, 12, 104, 168, 344, 348, 352, 400, true};

// Geometry as ITK computes it: qform if set, else sform, else pixdim; RAS -> LPS.
Geometry ComputeGeometry(const HeaderBytes& h, const Offsets& o, const double pixdim[4]) {
  auto fl = [&](size_t off, size_t i) { return o.wide ? h.F64(off + 8 * i) : h.F32(off + 4 * i); };
  int64_t qcode = o.wide ? h.I32(o.qform_code) : h.I16(o.qform_code);
  int64_t scode = o.wide ? h.I32(o.sform_code) : h.I16(o.sform_code);
  double m[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  double sp[3] = {pixdim[1], pixdim[2], pixdim[3]};
  double org[3] = {0, 0, 0};
  if (qcode > 0) {
    double b = fl(o.quatern, 0), c = fl(o.quatern, 1), d = fl(o.quatern, 2);
    double a = 1.0 - (b * b + c * c + d * d);
    a = a < 1e-7 ? 0.0 : std::sqrt(a);
    double qfac = pixdim[0] < 0 ? -1.0 : 1.0;
    double r[3][3] = {{a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)},
                      {2 * (b * c + a * d), a * a + c * c - b * b - d * d, 2 * (c * d - a * b)},
                      {2 * (b * d - a * c), 2 * (c * d + a * b), a * a + d * d - c * c - b * b}};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) m[i][j] = r[i][j] * (j == 2 ? qfac : 1.0);
      org[i] = fl(o.quatern + (o.wide ? 24 : 12), i);
    }
  } else if (scode > 0) {
    for (int j = 0; j < 3; ++j) {
      double n = 0;
      for (int i = 0; i < 3; ++i) n += std::pow(fl(o.srow + i * (o.wide ? 32 : 16), j), 2);
      n = std::sqrt(n);
      sp[j] = n;
      for (int i = 0; i < 3; ++i) m[i][j] = n > 0 ? fl(o.srow + i * (o.wide ? 32 : 16), j) / n : (i == j);
    }
    for (int i = 0; i < 3; ++i) org[i] = fl(o.srow + i * (o.wide ? 32 : 16), 3);
  }
  Geometry g;
  for (int i = 0; i < 3; ++i) {
    double flip = i < 2 ? -1.0 : 1.0;
    g.spacing.push_back(sp[i] > 0 ? sp[i] : 1.0);
    g.origin.push_back(flip * org[i]);
    for (int j = 0; j < 3; ++j) g.direction.push_back(flip * m[i][j]);
  }
  return g;
}

Status CheckShape(const HeaderBytes& h, const Offsets& o, NiftiHeader& out, const std::string& path) {
  auto dim = [&](size_t i) { return o.wide ? h.I64(o.dim + 8 * i) : h.I16(o.dim + 2 * i); };
  int64_t ndim = dim(0);
  if (ndim < 1 || ndim > 7) {
    return Corruption(path + ": NIfTI dim[0] is " + std::to_string(ndim) + ", expected 1..7");
  }
  int64_t d[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  for (int64_t i = 1; i <= ndim; ++i) {
    d[i] = dim(static_cast<size_t>(i));
    if (d[i] < 1) {
      return Corruption(path + ": NIfTI dim[" + std::to_string(i) + "] is " + std::to_string(d[i]));
    }
  }
  for (int i = 5; i <= 7; ++i) {
    if (d[i] != 1) return Unsupported(path + ": NIfTI with more than 4 dimensions is not supported");
  }
  out.shape = {d[4], d[3], d[2], d[1]};
  auto bytes = ByteSize(out.shape, out.dtype);
  if (!bytes.ok() || *bytes > kMaxVoxelBytes) {
    return ResourceExhausted(path + ": NIfTI volume " + ShapeToString(out.shape) + " is too large");
  }
  return Status::Ok();
}

}  // namespace

Result<NiftiHeader> ParseNiftiHeader(const uint8_t* data, size_t size, const std::string& path) {
  if (size < 348) {
    return Corruption(path + ": truncated NIfTI header (" + std::to_string(size) + " bytes)");
  }
  NiftiHeader out;
  HeaderBytes le(data, false), be(data, true);
  int64_t sle = le.I32(0), sbe = be.I32(0);
  if (sle == 348 || sbe == 348) {
    out.version = 1;
    out.big_endian = sle != 348;
  } else if (sle == 540 || sbe == 540) {
    out.version = 2;
    out.big_endian = sle != 540;
    if (size < 540) return Corruption(path + ": truncated NIfTI-2 header");
  } else {
    return Corruption(path + ": not a NIfTI file (sizeof_hdr is neither 348 nor 540)");
  }
  const HeaderBytes& h = out.big_endian ? be : le;
  const Offsets& o = out.version == 1 ? kN1 : kN2;
  const char* magic = reinterpret_cast<const char*>(data + (out.version == 1 ? 344 : 4));
  if (std::strncmp(magic, out.version == 1 ? "n+1" : "n+2", 4) != 0) {
    return Unsupported(path + ": not a single-file NIfTI (magic is not n+1 / n+2; .hdr/.img pairs are not supported)");
  }
  out.bytes.assign(data, data + (out.version == 1 ? 348 : 540));
  ASSIGN_OR_RETURN(out.dtype, NiftiDType(h.I16(o.datatype), path));
  RETURN_IF_ERROR(CheckShape(h, o, out, path));
  double vox = o.wide ? static_cast<double>(h.I64(o.vox_offset)) : h.F32(o.vox_offset);
  size_t min_off = out.bytes.size();
  if (!(vox >= static_cast<double>(min_off)) || vox > 1e9) {
    return Corruption(path + ": NIfTI vox_offset " + std::to_string(vox) + " is invalid");
  }
  out.vox_offset = static_cast<uint64_t>(vox);
  double pixdim[4];
  for (size_t i = 0; i < 4; ++i) pixdim[i] = o.wide ? h.F64(o.pixdim + 8 * i) : h.F32(o.pixdim + 4 * i);
  out.geometry = ComputeGeometry(h, o, pixdim);
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

void SwapToLittle(std::vector<uint8_t>& v, size_t width) {
  if (width < 2) return;
  for (size_t i = 0; i + width <= v.size(); i += width) {
    for (size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(v[i + a], v[i + b]);
  }
}

}  // namespace

Result<NiftiHeader> ReadNifti(const std::string& path, std::vector<uint8_t>* voxels, uint64_t max_bytes) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) return IOError(path + ": cannot open: " + std::strerror(errno));
  uint8_t head[540];
  int got = gzread(f.get(), head, sizeof(head));
  if (got < 0) return Corruption(path + ": cannot read NIfTI header (bad gzip stream)");
  ASSIGN_OR_RETURN(NiftiHeader h, ParseNiftiHeader(head, static_cast<size_t>(got), path));
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
  if (h.big_endian) SwapToLittle(*voxels, DTypeSize(h.dtype));
  return h;
}

}  // namespace shardify::convert::detail
