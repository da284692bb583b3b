#include "tools/nifti.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

namespace shardify::tools {
namespace {

constexpr size_t kNifti1Size = 348;
constexpr size_t kNifti2Size = 540;
constexpr int64_t kMaxExtensionBytes = 64 << 20;

// Reads integers and floats of either byte order from a header.
class HeaderReader {
 public:
  HeaderReader(const uint8_t* p, bool big) : p_(p), big_(big) {}
  template <typename T>
  T Get(size_t off) const {
    uint8_t b[sizeof(T)];
    std::memcpy(b, p_ + off, sizeof(T));
    if (big_) std::reverse(b, b + sizeof(T));
    T v;
    std::memcpy(&v, b, sizeof(T));
    return v;
  }

 private:
  const uint8_t* p_;
  bool big_;
};

template <typename T>
void Put(uint8_t* p, size_t off, T v, bool big) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  if (big) std::reverse(b, b + sizeof(T));
  std::memcpy(p + off, b, sizeof(T));
}

void ReadNifti1(const HeaderReader& r, const uint8_t* data, NiftiHeaderInfo& h) {
  h.version = 1;
  h.header_size = kNifti1Size;
  for (int i = 0; i < 8; ++i) h.dim[i] = r.Get<int16_t>(40 + 2 * i);
  h.datatype = r.Get<int16_t>(70);
  h.bitpix = r.Get<int16_t>(72);
  for (int i = 0; i < 8; ++i) h.pixdim[i] = r.Get<float>(76 + 4 * i);
  const float vox = r.Get<float>(108);
  h.vox_offset = std::isfinite(vox) && vox >= 0 && vox < 1e15f ? static_cast<int64_t>(vox) : -1;
  h.scl_slope = r.Get<float>(112);
  h.scl_inter = r.Get<float>(116);
  h.qform_code = r.Get<int16_t>(252);
  h.sform_code = r.Get<int16_t>(254);
  h.single_file = std::memcmp(data + 344, "n+1", 4) == 0;
}

void ReadNifti2(const HeaderReader& r, const uint8_t* data, NiftiHeaderInfo& h) {
  h.version = 2;
  h.header_size = kNifti2Size;
  h.datatype = r.Get<int16_t>(12);
  h.bitpix = r.Get<int16_t>(14);
  for (int i = 0; i < 8; ++i) h.dim[i] = r.Get<int64_t>(16 + 8 * i);
  for (int i = 0; i < 8; ++i) h.pixdim[i] = r.Get<double>(104 + 8 * i);
  h.vox_offset = r.Get<int64_t>(168);
  h.scl_slope = r.Get<double>(176);
  h.scl_inter = r.Get<double>(184);
  h.qform_code = r.Get<int32_t>(344);
  h.sform_code = r.Get<int32_t>(348);
  h.single_file = std::memcmp(data + 4, "n+2", 4) == 0;
}

Status CheckDims(NiftiHeaderInfo& h) {
  if (h.dim[0] < 1 || h.dim[0] > 7) {
    return Corruption("NIfTI header: dim[0] = " + std::to_string(h.dim[0]) + ", expected 1..7");
  }
  if (h.bitpix <= 0 || h.bitpix % 8 != 0) {
    return Corruption("NIfTI header: bitpix = " + std::to_string(h.bitpix) + ", expected a multiple of 8");
  }
  uint64_t n = static_cast<uint64_t>(h.bitpix / 8);
  for (int i = 1; i <= h.dim[0]; ++i) {
    if (h.dim[i] <= 0 || static_cast<uint64_t>(h.dim[i]) > (uint64_t(1) << 40) / n) {
      return Corruption("NIfTI header: dim[" + std::to_string(i) + "] = " + std::to_string(h.dim[i]) +
                        " is out of range");
    }
    n *= static_cast<uint64_t>(h.dim[i]);
  }
  h.voxel_bytes = n;
  return Status::Ok();
}

}  // namespace

Result<NiftiHeaderInfo> ParseNiftiHeader(const uint8_t* data, size_t size) {
  if (size != kNifti1Size && size != kNifti2Size) {
    return Corruption("NIfTI header has " + std::to_string(size) + " bytes, expected 348 or 540");
  }
  NiftiHeaderInfo h;
  int32_t le;
  std::memcpy(&le, data, 4);
  h.big_endian = le != static_cast<int32_t>(size);
  HeaderReader r(data, h.big_endian);
  if (r.Get<int32_t>(0) != static_cast<int32_t>(size)) {
    return Corruption("NIfTI header: sizeof_hdr does not match its " + std::to_string(size) + " bytes");
  }
  if (size == kNifti1Size) {
    ReadNifti1(r, data, h);
  } else {
    ReadNifti2(r, data, h);
  }
  RETURN_IF_ERROR(CheckDims(h));
  if (h.single_file &&
      (h.vox_offset < static_cast<int64_t>(size) || h.vox_offset > static_cast<int64_t>(size) + kMaxExtensionBytes)) {
    return Corruption("NIfTI header: vox_offset " + std::to_string(h.vox_offset) + " is outside [" +
                      std::to_string(size) + ", header + 64 MiB]");
  }
  return h;
}

int16_t NiftiDatatypeOf(DType t) {
  switch (t) {
    case DType::kU8:
      return 2;
    case DType::kI16:
      return 4;
    case DType::kI32:
      return 8;
    case DType::kF32:
      return 16;
    case DType::kF64:
      return 64;
    case DType::kI8:
      return 256;
    case DType::kU16:
      return 512;
    case DType::kU32:
      return 768;
    case DType::kI64:
      return 1024;
    case DType::kF16:
      return 0;
  }
  return 0;
}

Result<std::vector<uint8_t>> BuildNiftiImage(const std::vector<uint8_t>& header, const uint8_t* voxels, size_t size,
                                             DType dtype) {
  ASSIGN_OR_RETURN(NiftiHeaderInfo h, ParseNiftiHeader(header.data(), header.size()));
  const size_t es = DTypeSize(dtype);
  if (es * 8 != static_cast<size_t>(h.bitpix)) {
    return InvalidArgument(std::string("voxels of type ") + DTypeName(dtype) + " do not match the header's bitpix " +
                           std::to_string(h.bitpix));
  }
  if (size != h.voxel_bytes) {
    return InvalidArgument("the header describes " + std::to_string(h.voxel_bytes) + " voxel bytes, the array has " +
                           std::to_string(size));
  }
  std::vector<uint8_t> head = header;
  if (!h.single_file) {  // a .hdr/.img pair header: make it describe one file
    h.vox_offset = h.version == 1 ? 352 : 544;
    if (h.version == 1) {
      std::memcpy(head.data() + 344, "n+1", 4);
      Put<float>(head.data(), 108, 352.0f, h.big_endian);
    } else {
      std::memcpy(head.data() + 4, "n+2", 4);
      Put<int64_t>(head.data(), 168, 544, h.big_endian);
    }
  }
  std::vector<uint8_t> out(static_cast<size_t>(h.vox_offset) + size, 0);
  std::memcpy(out.data(), head.data(), head.size());
  uint8_t* dst = out.data() + h.vox_offset;
  std::memcpy(dst, voxels, size);
  if (h.big_endian && es > 1) {
    for (size_t k = 0; k < size; k += es) std::reverse(dst + k, dst + k + es);
  }
  return out;
}

namespace {

// NIfTI dimensions of an array: x, y, z, t from [C, D, H, W] (see MakeNifti1Header),
// without trailing ones.
std::vector<int64_t> NiftiDims(const Shape& shape) {
  std::vector<int64_t> dims(shape.rbegin(), shape.rend());
  if (shape.size() == 3) dims = {shape[2], shape[1], 1, shape[0]};  // [C, H, W]
  while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
  return dims;
}

}  // namespace

Result<bool> NiftiHeaderFits(const std::vector<uint8_t>& header, const Shape& shape) {
  ASSIGN_OR_RETURN(NiftiHeaderInfo h, ParseNiftiHeader(header.data(), header.size()));
  std::vector<int64_t> dims(h.dim.begin() + 1, h.dim.begin() + 1 + h.dim[0]);
  while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
  return dims == NiftiDims(shape);
}

Result<std::vector<uint8_t>> RetypeNiftiHeader(const std::vector<uint8_t>& header, DType dtype) {
  ASSIGN_OR_RETURN(NiftiHeaderInfo h, ParseNiftiHeader(header.data(), header.size()));
  const int16_t code = NiftiDatatypeOf(dtype);
  if (code == 0) return Unsupported(std::string("NIfTI cannot hold ") + DTypeName(dtype));
  std::vector<uint8_t> out = header;
  if (code == h.datatype) return out;
  uint8_t* p = out.data();
  const auto bitpix = static_cast<int16_t>(DTypeSize(dtype) * 8);
  if (h.version == 1) {
    Put<int16_t>(p, 70, code, h.big_endian);
    Put<int16_t>(p, 72, bitpix, h.big_endian);
    for (size_t off : {112, 116, 124, 128}) Put<float>(p, off, 0.0f, h.big_endian);  // scl_*, cal_max, cal_min
  } else {
    Put<int16_t>(p, 12, code, h.big_endian);
    Put<int16_t>(p, 14, bitpix, h.big_endian);
    for (size_t off : {176, 184, 192, 200}) Put<double>(p, off, 0.0, h.big_endian);
  }
  return out;
}

namespace {

// A double from disk as a float, saturated (a plain cast of an out-of-range value is undefined).
float ToFloat(double v) {
  if (std::isnan(v)) return NAN;
  return static_cast<float>(std::clamp(v, double(-FLT_MAX), double(FLT_MAX)));
}

// Row r of the ITK direction matrix (row-major), identity when none is given.
double Dir(const std::vector<double>& d, size_t n, size_t r, size_t c) {
  if (d.size() == n * n) return d[r * n + c];
  return r == c ? 1.0 : 0.0;
}

void PutSform(uint8_t* p, const std::vector<double>& spacing, const std::vector<double>& origin,
              const std::vector<double>& direction) {
  const size_t n = std::min<size_t>(3, spacing.empty() ? 3 : spacing.size());
  for (size_t r = 0; r < 3; ++r) {
    const double flip = r < 2 ? -1.0 : 1.0;  // ITK's LPS to NIfTI's RAS
    for (size_t c = 0; c < 3; ++c) {
      double v = 0;
      if (r < n && c < n)
        v = Dir(direction, n, r, c) * (c < spacing.size() ? spacing[c] : 1.0);
      else if (r == c)
        v = 1.0;
      Put<float>(p, 280 + 16 * r + 4 * c, ToFloat(flip * v), false);
    }
    const double o = r < origin.size() ? origin[r] : 0.0;
    Put<float>(p, 280 + 16 * r + 12, ToFloat(flip * o), false);
  }
}

}  // namespace

Result<std::vector<uint8_t>> MakeNifti1Header(const Shape& shape, DType dtype, const std::vector<double>& spacing,
                                              const std::vector<double>& origin, const std::vector<double>& direction) {
  const int16_t code = NiftiDatatypeOf(dtype);
  if (code == 0) return Unsupported(std::string("NIfTI cannot hold ") + DTypeName(dtype));
  if (shape.size() < 2 || shape.size() > 4) {
    return InvalidArgument("cannot write an array of shape " + ShapeToString(shape) + " as NIfTI");
  }
  // NIfTI dims are x, y, z, t: the reverse of [C, D, H, W] with C last.
  std::vector<int64_t> dims(shape.rbegin(), shape.rend());
  if (shape.size() == 3) dims = {shape[2], shape[1], 1, shape[0]};  // [C, H, W]
  while (dims.size() > 3 && dims.back() == 1) dims.pop_back();
  std::vector<uint8_t> h(kNifti1Size, 0);
  uint8_t* p = h.data();
  Put<int32_t>(p, 0, 348, false);
  Put<int16_t>(p, 40, static_cast<int16_t>(dims.size()), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= 0 || dims[i] > 32767)
      return InvalidArgument("NIfTI-1 dimension out of range in " + ShapeToString(shape));
    Put<int16_t>(p, 42 + 2 * i, static_cast<int16_t>(dims[i]), false);
  }
  Put<int16_t>(p, 70, code, false);
  Put<int16_t>(p, 72, static_cast<int16_t>(DTypeSize(dtype) * 8), false);
  Put<float>(p, 76, 1.0f, false);
  for (size_t i = 0; i < 7; ++i) {
    Put<float>(p, 80 + 4 * i, ToFloat(i < spacing.size() ? spacing[i] : 1.0), false);
  }
  Put<float>(p, 108, 352.0f, false);
  Put<int16_t>(p, 254, 1, false);  // sform_code: scanner coordinates
  PutSform(p, spacing, origin, direction);
  p[123] = 2;  // xyzt_units: millimetres
  std::memcpy(p + 344, "n+1", 4);
  return h;
}

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Result<std::vector<uint8_t>> Gzip(const std::vector<uint8_t>& in) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Internal("zlib deflateInit2 failed");
  }
  std::vector<uint8_t> out(deflateBound(&z, in.size()) + 64);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Internal("zlib deflate failed");
  return out;
}

}  // namespace

Status WriteMaybeGzipped(const std::string& path, const std::vector<uint8_t>& image) {
  if (image.size() > (uint64_t(1) << 32) - 1024) return Unsupported(path + ": over 4 GiB");
  std::vector<uint8_t> gz;
  const std::vector<uint8_t>* bytes = &image;
  if (EndsWith(path, ".gz")) {
    ASSIGN_OR_RETURN(gz, Gzip(image));
    bytes = &gz;
  }
  const std::string tmp = path + ".tmp";
  {
    std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
    if (!f) return IOError(tmp + ": cannot create: " + std::strerror(errno));
    if (std::fwrite(bytes->data(), 1, bytes->size(), f.get()) != bytes->size() || std::fflush(f.get()) != 0) {
      std::remove(tmp.c_str());
      return IOError(tmp + ": write failed: " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return IOError(path + ": rename failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace shardify::tools
