// The converter's only ITK translation unit: PNG/JPEG writing through ITK's ImageIO
// objects (no templated pipelines, which compile slowly) and NIfTI geometry through ITK's
// NIfTI-1 reader. NIfTI voxels come from nifti.cpp so the stored dtype is kept; PNG and
// JPEG reading from png_decode.cpp / jpeg_decode.cpp, since ITK's PNG reader can abort
// the process on corrupt files and its JPEG reader prints libjpeg warnings.
#include <itkImageIOBase.h>
#include <itkJPEGImageIO.h>
#include <itkNiftiImageIO.h>
#include <itkPNGImageIO.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>

#include "base/strings.h"
#include "convert/decode/decode_internal.h"
#include "convert/decode/image_io.h"
#include "convert/decode/nifti_internal.h"

namespace shardify::convert {
namespace {

using IOComponent = itk::IOComponentEnum;

// Runs `fn`, turning any exception into an error that names `path`.
Status Guard(const std::string& path, const char* what, const std::function<void()>& fn) {
  try {
    fn();
    return Status::Ok();
  } catch (const itk::ExceptionObject& e) {
    std::string desc = e.GetDescription();
    while (!desc.empty() && std::isspace(static_cast<unsigned char>(desc.back()))) desc.pop_back();
    return Corruption(path + ": cannot " + what + ": " + desc);
  } catch (const std::exception& e) {
    return Corruption(path + ": cannot " + what + ": " + e.what());
  }
}

IOComponent ToComponent(DType t) {
  switch (t) {
    case DType::kU8:
      return IOComponent::UCHAR;
    case DType::kI8:
      return IOComponent::CHAR;
    case DType::kU16:
      return IOComponent::USHORT;
    case DType::kI16:
      return IOComponent::SHORT;
    case DType::kU32:
      return IOComponent::UINT;
    case DType::kI32:
      return IOComponent::INT;
    case DType::kF32:
      return IOComponent::FLOAT;
    case DType::kF64:
      return IOComponent::DOUBLE;
    case DType::kI64:
      return IOComponent::LONGLONG;
    default:
      return IOComponent::UNKNOWNCOMPONENTTYPE;
  }
}

itk::ImageIOBase::Pointer NewIO(ImageKind kind) {
  if (kind == ImageKind::kPng) return itk::PNGImageIO::New().GetPointer();
  if (kind == ImageKind::kJpeg) return itk::JPEGImageIO::New().GetPointer();
  return itk::NiftiImageIO::New().GetPointer();
}

// ITK 5.2's NiftiImageIO::ReadImageInformation keeps the name of the last file it read in
// a function-local static std::string, compared and assigned without a lock: two header
// reads at once whose names outgrow that string free its buffer twice and corrupt the
// heap. So this process reads NIfTI headers through ITK one at a time (a few hundred bytes
// each; the voxels, read in nifti.cpp, stay parallel).
std::mutex& ItkNiftiHeaderMutex() {
  static std::mutex mutex;
  return mutex;
}

// Geometry of a NIfTI-1 file as ITK reads it (3 spatial axes; missing axes are identity).
Status ItkNiftiGeometry(const std::string& path, Geometry* g) {
  std::lock_guard<std::mutex> lock(ItkNiftiHeaderMutex());
  auto io = itk::NiftiImageIO::New();
  io->SetFileName(path);
  RETURN_IF_ERROR(Guard(path, "read NIfTI header", [&] { io->ReadImageInformation(); }));
  unsigned n = std::min(3u, io->GetNumberOfDimensions());
  *g = Geometry{};
  g->spacing.assign(3, 1.0);
  g->origin.assign(3, 0.0);
  g->direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  for (unsigned i = 0; i < n; ++i) {
    g->spacing[i] = io->GetSpacing(i);
    g->origin[i] = io->GetOrigin(i);
    std::vector<double> col = io->GetDirection(i);
    for (unsigned r = 0; r < n && r < col.size(); ++r) g->direction[r * 3 + i] = col[r];
  }
  return Status::Ok();
}

Result<ImageInfo> NiftiInfo(const std::string& path, const detail::NiftiVolume& h) {
  ImageInfo info;
  info.kind = ImageKind::kNifti;
  info.dtype = h.dtype;
  info.shape = h.shape;
  info.geometry = h.geometry;
  info.scaling = h.scaling;
  // ITK's NIfTI-1 reader is the reference for geometry (it chooses between sform and
  // qform by its own rules and orthonormalizes); NIfTI-2 uses the header math of
  // media/nifti.h.
  if (h.version == 1) RETURN_IF_ERROR(ItkNiftiGeometry(path, &info.geometry));
  return info;
}

}  // namespace

ImageKind KindFromName(const std::string& path) {
  if (EndsWithNoCase(path, ".png")) return ImageKind::kPng;
  if (EndsWithNoCase(path, ".jpg") || EndsWithNoCase(path, ".jpeg")) return ImageKind::kJpeg;
  if (EndsWithNoCase(path, ".nii") || EndsWithNoCase(path, ".nii.gz")) return ImageKind::kNifti;
  return ImageKind::kUnknown;
}

Result<ImageInfo> ReadImageInfo(const std::string& path, std::vector<uint8_t>* small_file, uint64_t max_bytes) {
  ImageKind kind = KindFromName(path);
  if (kind == ImageKind::kUnknown) return Unsupported(path + ": not a PNG, JPEG or NIfTI file name");
  if (kind == ImageKind::kNifti) {
    ASSIGN_OR_RETURN(detail::NiftiVolume h, detail::ReadNifti(path, nullptr, max_bytes));
    return NiftiInfo(path, h);
  }
  if (kind == ImageKind::kPng) return detail::ReadPngInfo(path, small_file, max_bytes);
  return detail::ReadJpegInfo(path, small_file, max_bytes);
}

Result<DecodedImage> ReadImage(const std::string& path, const std::vector<uint8_t>* file_bytes, uint64_t max_bytes) {
  ImageKind kind = KindFromName(path);
  DecodedImage out;
  if (kind == ImageKind::kNifti) {
    ASSIGN_OR_RETURN(detail::NiftiVolume h, detail::ReadNifti(path, &out.pixels, max_bytes));
    ASSIGN_OR_RETURN(out.info, NiftiInfo(path, h));
    out.nifti_header = std::move(h.bytes);
    return out;
  }
  if (kind == ImageKind::kUnknown) return Unsupported(path + ": not a PNG, JPEG or NIfTI file name");
  if (kind == ImageKind::kPng) return detail::ReadPng(path, file_bytes, max_bytes);
  return detail::ReadJpeg(path, file_bytes, max_bytes);
}

namespace {

std::vector<uint8_t> ToInterleaved(const std::vector<uint8_t>& in, int64_t c, int64_t hw, size_t es) {
  if (c == 1) return in;
  std::vector<uint8_t> out(in.size());
  for (int64_t p = 0; p < hw; ++p) {
    for (int64_t k = 0; k < c; ++k) std::memcpy(&out[(p * c + k) * es], &in[(k * hw + p) * es], es);
  }
  return out;
}

// Sets size, region and pixel type (and resets geometry, so set that afterwards).
void SetupIO(itk::ImageIOBase* io, DType dtype, const Shape& dims_xyz, int64_t components) {
  const unsigned n = static_cast<unsigned>(dims_xyz.size());
  io->SetNumberOfDimensions(n);
  itk::ImageIORegion region(n);
  for (unsigned i = 0; i < n; ++i) {
    io->SetDimensions(i, static_cast<itk::SizeValueType>(dims_xyz[i]));
    region.SetIndex(i, 0);
    region.SetSize(i, static_cast<itk::SizeValueType>(dims_xyz[i]));
  }
  io->SetIORegion(region);
  io->SetComponentType(ToComponent(dtype));
  io->SetNumberOfComponents(static_cast<unsigned>(components));
  using PT = itk::IOPixelEnum;
  io->SetPixelType(components == 1 ? PT::SCALAR : components == 3 ? PT::RGB : components == 4 ? PT::RGBA : PT::VECTOR);
}

Status WriteIO(itk::ImageIOBase* io, const std::string& path, const void* data) {
  io->SetFileName(path);
  RETURN_IF_ERROR(Guard(path, "write image", [&] { io->Write(data); }));
  // Some ImageIOs (NIfTI) report a file they cannot create only on stderr.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return IOError(path + ": cannot write image (no such directory?)");
  return Status::Ok();
}

}  // namespace

Status WriteImage2D(const std::string& path, DType dtype, const Shape& shape, const std::vector<uint8_t>& pixels) {
  ImageKind kind = KindFromName(path);
  if (kind != ImageKind::kPng && kind != ImageKind::kJpeg) {
    return InvalidArgument(path + ": WriteImage2D writes .png or .jpg files");
  }
  if (shape.size() != 3 || shape[0] < 1 || shape[0] > 4) {
    return InvalidArgument(path + ": expected shape [C, H, W] with C in 1..4, got " + ShapeToString(shape));
  }
  ASSIGN_OR_RETURN(uint64_t n, ByteSize(shape, dtype));
  if (n != pixels.size()) return InvalidArgument(path + ": pixel buffer size does not match the shape");
  auto io = NewIO(kind);
  std::vector<uint8_t> inter = ToInterleaved(pixels, shape[0], shape[1] * shape[2], DTypeSize(dtype));
  SetupIO(io.GetPointer(), dtype, {shape[2], shape[1]}, shape[0]);
  return WriteIO(io.GetPointer(), path, inter.data());
}

Status WriteNifti(const std::string& path, DType dtype, const Shape& shape, const std::vector<uint8_t>& pixels,
                  const Geometry& geometry) {
  if (shape.size() != 4) return InvalidArgument(path + ": expected shape [C, D, H, W]");
  ASSIGN_OR_RETURN(uint64_t n, ByteSize(shape, dtype));
  if (n != pixels.size()) return InvalidArgument(path + ": pixel buffer size does not match the shape");
  auto io = itk::NiftiImageIO::New();
  Shape dims = {shape[3], shape[2], shape[1]};
  if (shape[0] > 1) dims.push_back(shape[0]);
  const unsigned nd = static_cast<unsigned>(dims.size());
  SetupIO(io.GetPointer(), dtype, dims, 1);
  for (unsigned i = 0; i < nd; ++i) {
    bool spatial = i < 3 && geometry.spacing.size() == 3 && geometry.direction.size() == 9;
    io->SetSpacing(i, spatial ? geometry.spacing[i] : 1.0);
    io->SetOrigin(i, spatial ? geometry.origin[i] : 0.0);
    std::vector<double> col(nd, 0.0);
    for (unsigned r = 0; r < nd; ++r) {
      col[r] = (spatial && r < 3) ? geometry.direction[r * 3 + i] : (r == i ? 1.0 : 0.0);
    }
    io->SetDirection(i, col);
  }
  return WriteIO(io.GetPointer(), path, pixels.data());
}

}  // namespace shardify::convert
