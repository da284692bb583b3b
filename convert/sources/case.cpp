// Case inspection and decoding (see case.h).
#include "convert/sources/case.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

#include "format/elements.h"
#include "format/fields.h"

namespace shardify::convert {
namespace {

std::string VecToString(const std::vector<double>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

bool Near(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) > 1e-4 * std::max(1.0, std::fabs(a[i]))) return false;
  }
  return true;
}

// Checks that `b` (file `b_path`, called `b_name`) matches reference `a` in space.
Status SameSpace(const ImageInfo& a, const ImageInfo& b, const std::string& where, const std::string& b_name,
                 const std::string& b_path) {
  std::string who = where + ": " + b_name + " (" + b_path + ")";
  if (SpatialShape(a.shape) != SpatialShape(b.shape)) {
    return InvalidArgument(who + " has spatial shape " + ShapeToString(SpatialShape(b.shape)) + " but the image has " +
                           ShapeToString(SpatialShape(a.shape)));
  }
  const Geometry& g = a.geometry;
  const Geometry& h = b.geometry;
  if (!Near(g.spacing, h.spacing))
    return InvalidArgument(who + " has spacing " + VecToString(h.spacing) + " but the image has " +
                           VecToString(g.spacing));
  if (!Near(g.origin, h.origin))
    return InvalidArgument(who + " has origin " + VecToString(h.origin) + " but the image has " +
                           VecToString(g.origin));
  if (!Near(g.direction, h.direction))
    return InvalidArgument(who + " has direction " + VecToString(h.direction) + " but the image has " +
                           VecToString(g.direction));
  return Status::Ok();
}

// Combines per-channel infos into the stacked image info. Channels of different dtypes
// stack in the smallest dtype that holds them all (PromoteDTypes).
Status StackInfo(const std::vector<ImageInfo>& ch, const CaseInput& in, ImageInfo* out) {
  *out = ch[0];
  std::vector<DType> dtypes = {ch[0].dtype};
  for (size_t k = 1; k < ch.size(); ++k) {
    std::string name = "channel " + std::to_string(k);
    RETURN_IF_ERROR(SameSpace(ch[0], ch[k], in.name, name, in.images[k]));
    out->shape[0] += ch[k].shape[0];
    dtypes.push_back(ch[k].dtype);
  }
  out->dtype = PromoteDTypes(dtypes);
  return Status::Ok();
}

// The header of one file, as `reading` reads its values.
Result<ImageInfo> FileInfo(const std::string& path, std::vector<uint8_t>* small_file, const CaseReading& reading) {
  ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(path, small_file, reading.max_bytes));
  if (reading.scaled) RETURN_IF_ERROR(ScaleInfo(path, &info));
  return info;
}

// One file's header and pixels, as `reading` reads its values.
Result<DecodedImage> FileImage(const std::string& path, const std::vector<uint8_t>* small_file,
                               const CaseReading& reading) {
  ASSIGN_OR_RETURN(DecodedImage image, ReadImage(path, small_file, reading.max_bytes));
  if (reading.scaled) RETURN_IF_ERROR(ScaleImage(path, &image));
  return image;
}

// The image from the case's files: their headers, channels stacked.
Status InspectFiles(const CaseInput& in, const CaseReading& reading, CaseInfo* out) {
  std::vector<ImageInfo> ch;
  const bool single = in.images.size() == 1 && in.mask.empty();
  for (const auto& p : in.images) {
    ASSIGN_OR_RETURN(ImageInfo i, FileInfo(p, single ? &out->small_file : nullptr, reading));
    ch.push_back(std::move(i));
  }
  if (ch.empty()) return Internal(in.name + ": case has no image files");
  return StackInfo(ch, in, &out->image);
}

// The image from the case's files: decoded, channels converted to one dtype and stacked.
Status DecodeFiles(const CaseInput& in, const std::vector<uint8_t>* small_file, const CaseReading& reading,
                   DecodedImage* out) {
  std::vector<ImageInfo> infos;
  std::vector<DecodedImage> channels;
  for (size_t k = 0; k < in.images.size(); ++k) {
    ASSIGN_OR_RETURN(DecodedImage d, FileImage(in.images[k], in.images.size() == 1 ? small_file : nullptr, reading));
    infos.push_back(d.info);
    channels.push_back(std::move(d));
  }
  if (infos.empty()) return Internal(in.name + ": case has no image files");
  ImageInfo stacked;
  RETURN_IF_ERROR(StackInfo(infos, in, &stacked));
  for (size_t k = 0; k < channels.size(); ++k) {
    DecodedImage& d = channels[k];
    if (d.info.dtype != stacked.dtype) d.pixels = ConvertArray(d.pixels, d.info.dtype, stacked.dtype);
    if (k == 0) {
      *out = std::move(d);
    } else {
      out->pixels.insert(out->pixels.end(), d.pixels.begin(), d.pixels.end());
      std::vector<uint8_t>().swap(d.pixels);
    }
  }
  out->info = stacked;
  return Status::Ok();
}

}  // namespace

// CaseSource (source.h) by default supplies nothing; asking it is a programming error.
Result<ImageInfo> CaseSource::InspectImage() const { return Internal("this case source supplies no image"); }
Result<DecodedImage> CaseSource::DecodeImage() const { return Internal("this case source supplies no image"); }
Result<ImageInfo> CaseSource::InspectMask(ImageInfo*) const { return Internal("this case source supplies no mask"); }
Result<DecodedImage> CaseSource::DecodeMask(ImageInfo*, const std::string&) const {
  return Internal("this case source supplies no mask");
}

bool HasMask(const CaseInput& c) { return !c.mask.empty() || (c.source != nullptr && c.source->supplies_mask()); }

Result<CaseInfo> InspectCase(const CaseInput& in, const CaseReading& reading) {
  CaseInfo out;
  const CaseSource* source = in.source.get();
  if (source != nullptr && source->supplies_image()) {
    ASSIGN_OR_RETURN(out.image, source->InspectImage());
  } else {
    RETURN_IF_ERROR(InspectFiles(in, reading, &out));
  }
  if (source != nullptr && source->supplies_mask()) {
    out.has_mask = true;
    ASSIGN_OR_RETURN(out.mask, source->InspectMask(&out.image));
  } else if (!in.mask.empty()) {
    out.has_mask = true;
    ASSIGN_OR_RETURN(out.mask, FileInfo(in.mask, nullptr, reading));
    RETURN_IF_ERROR(SameSpace(out.image, out.mask, in.name, kMaskField, in.mask));
  }
  return out;
}

Status DecodeRle(const std::string& rle, uint8_t* out, uint64_t n, const std::string& where) {
  std::istringstream s(rle);
  std::string a, b;
  while (s >> a) {
    int64_t start = 0, len = 0;
    if (!(s >> b)) return Corruption(where + ": run-length string has an odd number of values");
    char* e1 = nullptr;
    char* e2 = nullptr;
    start = std::strtoll(a.c_str(), &e1, 10);
    len = std::strtoll(b.c_str(), &e2, 10);
    if (*e1 != 0 || *e2 != 0 || start < 1 || len < 0) {
      return Corruption(where + ": bad run '" + a + " " + b + "' in run-length string");
    }
    if (static_cast<uint64_t>(start - 1) > n || static_cast<uint64_t>(len) > n - static_cast<uint64_t>(start - 1)) {
      return Corruption(where + ": run " + a + " " + b + " goes past the " + std::to_string(n) +
                        " pixels of the image");
    }
    std::memset(out + start - 1, 1, static_cast<size_t>(len));
  }
  return Status::Ok();
}

Result<CaseData> DecodeCase(const CaseInput& in, const std::vector<uint8_t>* small_file, const CaseReading& reading) {
  CaseData out;
  const CaseSource* source = in.source.get();
  if (source != nullptr && source->supplies_image()) {
    ASSIGN_OR_RETURN(out.image, source->DecodeImage());
  } else {
    RETURN_IF_ERROR(DecodeFiles(in, small_file, reading, &out.image));
  }
  if (source != nullptr && source->supplies_mask()) {
    out.has_mask = true;
    ASSIGN_OR_RETURN(out.mask, source->DecodeMask(&out.image.info, in.name));
  } else if (!in.mask.empty()) {
    out.has_mask = true;
    ASSIGN_OR_RETURN(out.mask, FileImage(in.mask, nullptr, reading));
    RETURN_IF_ERROR(SameSpace(out.image.info, out.mask.info, in.name, kMaskField, in.mask));
  }
  return out;
}

}  // namespace shardify::convert
