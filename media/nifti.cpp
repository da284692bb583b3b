#include "media/nifti.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace shardify::media {
namespace {

constexpr int64_t kMaxExtensionBytes = 64 << 20;

// Where the fields of NiftiHeader lie in each version (NIfTI-1: dims, datatype and codes
// are int16, reals float, xyzt_units a byte; NIfTI-2: dims int64, codes int32, reals double).
struct Layout {
  size_t size, magic, dim, datatype, bitpix, pixdim, vox_offset, scl_slope, scl_inter, cal_max, cal_min;
  size_t qform_code, sform_code, quatern, qoffset, srow, xyzt_units;
  size_t int_width, code_width, real_width, units_width;
  const char* single_magic;  // with its NUL; NIfTI-2 has 4 more fixed bytes
  const char* pair_magic;
  size_t magic_size;
};
constexpr Layout kNifti1{348, 344, 40,  70,  72,  76, 108, 112, 116, 124,   128,   252,
                         254, 256, 268, 280, 123, 2,  2,   4,   1,   "n+1", "ni1", 4};
constexpr Layout kNifti2{540,
                         4,
                         16,
                         12,
                         14,
                         104,
                         168,
                         176,
                         184,
                         192,
                         200,
                         344,
                         348,
                         352,
                         376,
                         400,
                         500,
                         8,
                         4,
                         8,
                         4,
                         "n+2\0\r\n\032\n",
                         "ni2\0\r\n\032\n",
                         8};

// Floats widen to doubles and back bit for bit, NaN payloads included.
double Widen(float f) {
  if (!std::isnan(f)) return f;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint64_t d = (uint64_t(u >> 31) << 63) | (uint64_t(0x7FF) << 52) | (uint64_t(u & 0x7FFFFF) << 29);
  double out;
  std::memcpy(&out, &d, 8);
  return out;
}

// The inverse of Widen; a finite double beyond float's range saturates.
float Narrow(double v) {
  if (std::isnan(v)) {
    uint64_t d;
    std::memcpy(&d, &v, 8);
    uint32_t mantissa = static_cast<uint32_t>((d >> 29) & 0x7FFFFF);
    if (mantissa == 0) mantissa = 0x400000;  // low payload bits only: still a NaN
    const uint32_t u = (static_cast<uint32_t>(d >> 63) << 31) | 0x7F800000u | mantissa;
    float out;
    std::memcpy(&out, &u, 4);
    return out;
  }
  if (std::isinf(v)) return static_cast<float>(v);
  return static_cast<float>(std::clamp(v, double(-FLT_MAX), double(FLT_MAX)));
}

int64_t SaturateToInt64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Reads the header's fields (Visit with a Reader fills a NiftiHeader).
class Reader {
 public:
  Reader(const uint8_t* p, const Layout& l, bool big) : p_(p), l_(l), big_(big) {}
  template <typename T>
  void Int(size_t off, size_t width, T& v) const {
    uint64_t u = 0;
    for (size_t i = 0; i < width; ++i) u = (u << 8) | p_[off + (big_ ? i : width - 1 - i)];
    int64_t s = width == 1 ? static_cast<int64_t>(u) : static_cast<int64_t>(u << (64 - 8 * width)) >> (64 - 8 * width);
    v = static_cast<T>(s);
  }
  void Real(size_t off, double& v) const {
    if (l_.real_width == 8) {
      uint64_t u;
      Int(off, 8, u);
      std::memcpy(&v, &u, 8);
    } else {
      uint32_t u;
      Int(off, 4, u);
      float f;
      std::memcpy(&f, &u, 4);
      v = Widen(f);
    }
  }

 private:
  const uint8_t* p_;
  const Layout& l_;
  bool big_;
};

// Writes them (Visit with a Writer stores a NiftiHeader).
class Writer {
 public:
  Writer(uint8_t* p, const Layout& l, bool big) : p_(p), l_(l), big_(big) {}
  template <typename T>
  void Int(size_t off, size_t width, const T& v) const {
    const auto u = static_cast<uint64_t>(ToInt(v));
    for (size_t i = 0; i < width; ++i) p_[off + (big_ ? width - 1 - i : i)] = static_cast<uint8_t>(u >> (8 * i));
  }
  void Real(size_t off, const double& v) const {
    if (l_.real_width == 8) {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      Int(off, 8, u);
    } else {
      const float f = Narrow(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      Int(off, 4, u);
    }
  }

 private:
  static int64_t ToInt(double v) { return SaturateToInt64(v); }
  template <typename T>
  static int64_t ToInt(T v) {
    return static_cast<int64_t>(v);
  }
  uint8_t* p_;
  const Layout& l_;
  bool big_;
};

// The one list of fields: Reader and Writer see the same offsets and widths.
template <typename Header, typename Access>
void Visit(const Layout& l, Header& h, const Access& a) {
  for (size_t i = 0; i < 8; ++i) a.Int(l.dim + l.int_width * i, l.int_width, h.dim[i]);
  a.Int(l.datatype, 2, h.datatype);
  a.Int(l.bitpix, 2, h.bitpix);
  for (size_t i = 0; i < 8; ++i) a.Real(l.pixdim + l.real_width * i, h.pixdim[i]);
  if (l.int_width == 8) {
    a.Int(l.vox_offset, 8, h.vox_offset);
  } else {
    a.Real(l.vox_offset, h.vox_offset);
  }
  a.Real(l.scl_slope, h.scl_slope);
  a.Real(l.scl_inter, h.scl_inter);
  a.Real(l.cal_max, h.cal_max);
  a.Real(l.cal_min, h.cal_min);
  a.Int(l.qform_code, l.code_width, h.qform_code);
  a.Int(l.sform_code, l.code_width, h.sform_code);
  for (size_t i = 0; i < 3; ++i) a.Real(l.quatern + l.real_width * i, h.quatern[i]);
  for (size_t i = 0; i < 3; ++i) a.Real(l.qoffset + l.real_width * i, h.qoffset[i]);
  for (size_t r = 0; r < 3; ++r) {
    for (size_t c = 0; c < 4; ++c) a.Real(l.srow + l.real_width * (4 * r + c), h.srow[r][c]);
  }
  a.Int(l.xyzt_units, l.units_width, h.xyzt_units);
}

bool SaysSingleFile(const uint8_t* data, const Layout& l) {
  return std::memcmp(data + l.magic, l.single_magic, 4) == 0;
}

}  // namespace

bool NiftiHeader::operator==(const NiftiHeader& o) const {
  return version == o.version && big_endian == o.big_endian && single_file == o.single_file && dim == o.dim &&
         datatype == o.datatype && bitpix == o.bitpix && pixdim == o.pixdim && vox_offset == o.vox_offset &&
         scl_slope == o.scl_slope && scl_inter == o.scl_inter && cal_max == o.cal_max && cal_min == o.cal_min &&
         qform_code == o.qform_code && sform_code == o.sform_code && quatern == o.quatern && qoffset == o.qoffset &&
         srow == o.srow && xyzt_units == o.xyzt_units;
}

Result<NiftiHeader> ParseNiftiHeader(const uint8_t* data, size_t size) {
  if (size < kNifti1HeaderSize) return Corruption("truncated NIfTI header (" + std::to_string(size) + " bytes)");
  NiftiHeader h;
  int32_t le = 0, be = 0;
  Reader(data, kNifti1, false).Int(0, 4, le);
  Reader(data, kNifti1, true).Int(0, 4, be);
  if (le == 348 || be == 348) {
    h.version = 1;
    h.big_endian = le != 348;
  } else if (le == 540 || be == 540) {
    h.version = 2;
    h.big_endian = le != 540;
    if (size < kNifti2HeaderSize) return Corruption("truncated NIfTI-2 header");
  } else {
    return Corruption("not a NIfTI header (sizeof_hdr is neither 348 nor 540)");
  }
  const Layout& l = h.version == 1 ? kNifti1 : kNifti2;
  Visit(l, h, Reader(data, l, h.big_endian));
  h.single_file = SaysSingleFile(data, l);
  if (h.dim[0] < 1 || h.dim[0] > 7) {
    return Corruption("NIfTI dim[0] is " + std::to_string(h.dim[0]) + ", expected 1..7");
  }
  for (int64_t i = 1; i <= h.dim[0]; ++i) {
    if (h.dim[i] < 1) return Corruption("NIfTI dim[" + std::to_string(i) + "] is " + std::to_string(h.dim[i]));
  }
  return h;
}

std::vector<uint8_t> BuildNiftiHeader(const NiftiHeader& h, std::vector<uint8_t> base) {
  const Layout& l = h.version == 2 ? kNifti2 : kNifti1;
  const bool keep_magic = base.size() == l.size && SaysSingleFile(base.data(), l) == h.single_file;
  base.resize(l.size, 0);
  Writer(base.data(), l, h.big_endian).Int(0, 4, static_cast<int32_t>(l.size));
  Visit(l, h, Writer(base.data(), l, h.big_endian));
  if (!keep_magic) std::memcpy(base.data() + l.magic, h.single_file ? l.single_magic : l.pair_magic, l.magic_size);
  return base;
}

int64_t VoxOffsetBytes(const NiftiHeader& h) {
  const double v = h.vox_offset;
  return std::isfinite(v) && v >= 0 && v < 1e15 ? static_cast<int64_t>(v) : -1;
}

Result<uint64_t> NiftiVoxelBytes(const NiftiHeader& h) {
  if (h.bitpix <= 0 || h.bitpix % 8 != 0) {
    return Corruption("NIfTI header: bitpix = " + std::to_string(h.bitpix) + ", expected a multiple of 8");
  }
  uint64_t n = static_cast<uint64_t>(h.bitpix / 8);
  for (int64_t i = 1; i <= h.dim[0] && i < 8; ++i) {
    if (h.dim[i] <= 0 || static_cast<uint64_t>(h.dim[i]) > (uint64_t(1) << 40) / n) {
      return Corruption("NIfTI header: dim[" + std::to_string(i) + "] = " + std::to_string(h.dim[i]) +
                        " is out of range");
    }
    n *= static_cast<uint64_t>(h.dim[i]);
  }
  return n;
}

Result<NiftiHeader> ParseStoredNiftiHeader(const uint8_t* data, size_t size) {
  if (size != kNifti1HeaderSize && size != kNifti2HeaderSize) {
    return Corruption("NIfTI header has " + std::to_string(size) + " bytes, expected 348 or 540");
  }
  ASSIGN_OR_RETURN(NiftiHeader h, ParseNiftiHeader(data, size));
  if ((h.version == 1 ? kNifti1HeaderSize : kNifti2HeaderSize) != size) {
    return Corruption("NIfTI header: sizeof_hdr does not match its " + std::to_string(size) + " bytes");
  }
  RETURN_IF_ERROR(NiftiVoxelBytes(h).status());
  const int64_t vox = VoxOffsetBytes(h);
  if (h.single_file && (vox < static_cast<int64_t>(size) || vox > static_cast<int64_t>(size) + kMaxExtensionBytes)) {
    return Corruption("NIfTI header: vox_offset " + std::to_string(vox) + " is outside [" + std::to_string(size) +
                      ", header + 64 MiB]");
  }
  return h;
}

namespace {

// DType <-> NIfTI datatype code, one row each.
struct DatatypeRow {
  DType dtype;
  int16_t code;
};
constexpr DatatypeRow kDatatypes[] = {{DType::kU8, 2},    {DType::kI16, 4},   {DType::kI32, 8},
                                      {DType::kF32, 16},  {DType::kF64, 64},  {DType::kI8, 256},
                                      {DType::kU16, 512}, {DType::kU32, 768}, {DType::kI64, 1024}};

}  // namespace

int16_t NiftiDatatypeOf(DType t) {
  for (const DatatypeRow& r : kDatatypes) {
    if (r.dtype == t) return r.code;
  }
  return 0;
}

std::optional<DType> DTypeOfNifti(int64_t datatype) {
  for (const DatatypeRow& r : kDatatypes) {
    if (r.code == datatype) return r.dtype;
  }
  return std::nullopt;
}

NiftiGeometry GeometryOf(const NiftiHeader& h) {
  double m[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  double sp[3] = {h.pixdim[1], h.pixdim[2], h.pixdim[3]};
  double org[3] = {0, 0, 0};
  if (h.qform_code > 0) {
    const double b = h.quatern[0], c = h.quatern[1], d = h.quatern[2];
    double a = 1.0 - (b * b + c * c + d * d);
    a = a < 1e-7 ? 0.0 : std::sqrt(a);
    const double qfac = h.pixdim[0] < 0 ? -1.0 : 1.0;
    const double r[3][3] = {{a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)},
                            {2 * (b * c + a * d), a * a + c * c - b * b - d * d, 2 * (c * d - a * b)},
                            {2 * (b * d - a * c), 2 * (c * d + a * b), a * a + d * d - c * c - b * b}};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) m[i][j] = r[i][j] * (j == 2 ? qfac : 1.0);
      org[i] = h.qoffset[i];
    }
  } else if (h.sform_code > 0) {
    for (int j = 0; j < 3; ++j) {
      double n = 0;
      for (int i = 0; i < 3; ++i) n += std::pow(h.srow[i][j], 2);
      n = std::sqrt(n);
      sp[j] = n;
      for (int i = 0; i < 3; ++i) m[i][j] = n > 0 ? h.srow[i][j] / n : (i == j);
    }
    for (int i = 0; i < 3; ++i) org[i] = h.srow[i][3];
  }
  NiftiGeometry g;
  for (int i = 0; i < 3; ++i) {
    const double flip = i < 2 ? -1.0 : 1.0;  // NIfTI's RAS to ITK's LPS
    g.spacing.push_back(sp[i] > 0 ? sp[i] : 1.0);
    g.origin.push_back(flip * org[i]);
    for (int j = 0; j < 3; ++j) g.direction.push_back(flip * m[i][j]);
  }
  return g;
}

namespace {

// A double from disk bound for a float field: NaN stays NaN, anything else is clamped
// to float's range (a plain cast of an out-of-range value is undefined).
double ToFloatRange(double v) {
  if (std::isnan(v)) return std::numeric_limits<double>::quiet_NaN();
  return std::clamp(v, double(-FLT_MAX), double(FLT_MAX));
}

// Element (r, c) of an n x n ITK direction matrix (row-major), identity when none is given.
double Dir(const std::vector<double>& d, size_t n, size_t r, size_t c) {
  if (d.size() == n * n) return d[r * n + c];
  return r == c ? 1.0 : 0.0;
}

// NIfTI dimensions of an array: x, y, z, t from [C, D, H, W] ([C, H, W]: z = 1, t = C).
std::vector<int64_t> NiftiDims(const Shape& shape) {
  std::vector<int64_t> dims(shape.rbegin(), shape.rend());
  if (shape.size() == 3) dims = {shape[2], shape[1], 1, shape[0]};
  return dims;
}

}  // namespace

Result<std::vector<uint8_t>> MakeNifti1Header(const Shape& shape, DType dtype, const std::vector<double>& spacing,
                                              const std::vector<double>& origin, const std::vector<double>& direction) {
  const int16_t code = NiftiDatatypeOf(dtype);
  if (code == 0) return Unsupported(std::string("NIfTI cannot hold ") + DTypeName(dtype));
  if (shape.size() < 2 || shape.size() > 4) {
    return InvalidArgument("cannot write an array of shape " + ShapeToString(shape) + " as NIfTI");
  }
  std::vector<int64_t> dims = NiftiDims(shape);
  while (dims.size() > 3 && dims.back() == 1) dims.pop_back();
  NiftiHeader h;
  h.dim[0] = static_cast<int64_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= 0 || dims[i] > 32767) {
      return InvalidArgument("NIfTI-1 dimension out of range in " + ShapeToString(shape));
    }
    h.dim[i + 1] = dims[i];
  }
  h.datatype = code;
  h.bitpix = static_cast<int16_t>(DTypeSize(dtype) * 8);
  h.pixdim[0] = 1.0;
  for (size_t i = 0; i < 7; ++i) h.pixdim[i + 1] = ToFloatRange(i < spacing.size() ? spacing[i] : 1.0);
  h.vox_offset = 352;
  h.sform_code = 1;  // scanner coordinates
  const size_t n = std::min<size_t>(3, spacing.empty() ? 3 : spacing.size());
  for (size_t r = 0; r < 3; ++r) {
    const double flip = r < 2 ? -1.0 : 1.0;  // ITK's LPS to NIfTI's RAS
    for (size_t c = 0; c < 3; ++c) {
      double v = 0;
      if (r < n && c < n) {
        v = Dir(direction, n, r, c) * (c < spacing.size() ? spacing[c] : 1.0);
      } else if (r == c) {
        v = 1.0;
      }
      h.srow[r][c] = ToFloatRange(flip * v);
    }
    h.srow[r][3] = ToFloatRange(flip * (r < origin.size() ? origin[r] : 0.0));
  }
  h.xyzt_units = 2;  // millimetres
  return BuildNiftiHeader(h);
}

Result<bool> NiftiHeaderFits(const std::vector<uint8_t>& header, const Shape& shape) {
  ASSIGN_OR_RETURN(const NiftiHeader h, ParseStoredNiftiHeader(header.data(), header.size()));
  std::vector<int64_t> dims(h.dim.begin() + 1, h.dim.begin() + 1 + h.dim[0]);
  std::vector<int64_t> want = NiftiDims(shape);
  for (auto* d : {&dims, &want}) {
    while (d->size() > 1 && d->back() == 1) d->pop_back();
  }
  return dims == want;
}

namespace {

Result<std::vector<uint8_t>> Retype(const std::vector<uint8_t>& header, DType dtype, bool descale) {
  ASSIGN_OR_RETURN(NiftiHeader h, ParseStoredNiftiHeader(header.data(), header.size()));
  const int16_t code = NiftiDatatypeOf(dtype);
  if (code == 0) return Unsupported(std::string("NIfTI cannot hold ") + DTypeName(dtype));
  if (code == h.datatype && !descale) return header;
  h.datatype = code;
  h.bitpix = static_cast<int16_t>(DTypeSize(dtype) * 8);
  h.scl_slope = h.scl_inter = h.cal_max = h.cal_min = 0;
  return BuildNiftiHeader(h, header);
}

}  // namespace

Result<std::vector<uint8_t>> RetypeNiftiHeader(const std::vector<uint8_t>& header, DType dtype) {
  return Retype(header, dtype, false);
}

Result<std::vector<uint8_t>> DescaleNiftiHeader(const std::vector<uint8_t>& header, DType dtype) {
  return Retype(header, dtype, true);
}

void SwapElementBytes(uint8_t* data, size_t size, size_t width) {
  if (width < 2) return;
  for (size_t k = 0; k + width <= size; k += width) std::reverse(data + k, data + k + width);
}

}  // namespace shardify::media
