#include "tools/export.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"
#include "format/dataset.h"
#include "format/elements.h"
#include "media/nifti.h"
#include "media/png.h"
#include "tools/nifti.h"
#include "tools/tool_internal.h"

#ifdef SHARDIFY_TOOLS_WITH_READER
#include "reader/source_grid.h"
#endif

namespace shardify::tools {
namespace {

// The array to export, with its sample.
struct Array {
  SampleView sample;
  size_t field = 0;
  DType dtype = DType::kU8;
  Shape shape;
  std::vector<uint8_t> bytes;
  bool source_grid = false;  // mapped onto the source grid
};

Status ExportPng(const Array& a, const std::string& path) {
  if (a.dtype != DType::kU8 && a.dtype != DType::kU16) {
    return Unsupported(std::string("PNG holds u8 or u16 pixels, the field is ") + DTypeName(a.dtype) +
                       "; export to .nii or .nii.gz instead");
  }
  Shape s = a.shape;
  if (s.size() == 2) s.insert(s.begin(), 1);
  if (s.size() != 3 || s[0] < 1 || s[0] > 4) {
    return Unsupported("PNG holds 2D images [C, H, W] with C 1..4, the array is " + ShapeToString(a.shape) +
                       "; export volumes to .nii or .nii.gz");
  }
  const size_t c = s[0], h = s[1], w = s[2], es = DTypeSize(a.dtype);
  std::vector<uint8_t> pixels(a.bytes.size());
  for (size_t ch = 0; ch < c; ++ch) {  // planar [C, H, W] to interleaved [H, W, C]
    for (size_t k = 0; k < h * w; ++k) {
      std::memcpy(&pixels[(k * c + ch) * es], &a.bytes[(ch * h * w + k) * es], es);
    }
  }
  return media::WritePngFile(path, pixels.data(), static_cast<uint32_t>(w), static_cast<uint32_t>(h),
                             static_cast<int>(c), static_cast<int>(es * 8));
}

Result<std::vector<double>> GeometryValues(const Dataset& ds, const SampleView& s, const std::string& name,
                                           Decoder& d) {
  const Manifest& m = ds.manifest();
  const int f = m.FindField(name);
  if (f < 0 || m.fields[f].kind != FieldKind::kNdarray) return std::vector<double>{};
  ASSIGN_OR_RETURN(std::vector<uint8_t> raw, detail::DecodeArray(s, f, d));
  const size_t es = DTypeSize(m.fields[f].dtype);
  std::vector<double> v(raw.size() / es);
  for (size_t i = 0; i < v.size(); ++i) v[i] = detail::ElementAsDouble(&raw[i * es], m.fields[f].dtype);
  return v;
}

Result<std::vector<uint8_t>> NiftiHeaderFor(const Dataset& ds, const Array& a, Decoder& d) {
  const Manifest& m = ds.manifest();
  const std::string base = m.fields[a.field].name;
  const int hf = m.FindField(base + kNiftiHeaderSuffix);
  if (hf >= 0 && m.fields[hf].kind == FieldKind::kBytes) {
    ASSIGN_OR_RETURN(std::string_view hb, a.sample.bytes_value(hf));
    std::vector<uint8_t> header(hb.begin(), hb.end());
    if (!header.empty()) {
      ASSIGN_OR_RETURN(const bool fits, media::NiftiHeaderFits(header, a.shape));
      if (fits) return media::RetypeNiftiHeader(header, a.dtype);
    }
  }
  // Preprocessed and asked for the source grid: the source's geometry. A mask without
  // geometry of its own lies on its image's grid (docs/fields.md).
  std::string geometry = base;
  const int image = detail::FindImageField(m);
  if (a.source_grid) {
    geometry = kSourcePrefix;
  } else if (m.FindField(base + kSpacingSuffix) < 0 && detail::MetaValue(m.fields[a.field], kMetaRole) == kRoleMask &&
             image >= 0) {
    geometry = m.fields[image].name;
  }
  ASSIGN_OR_RETURN(auto spacing, GeometryValues(ds, a.sample, geometry + kSpacingSuffix, d));
  ASSIGN_OR_RETURN(auto origin, GeometryValues(ds, a.sample, geometry + kOriginSuffix, d));
  ASSIGN_OR_RETURN(auto direction, GeometryValues(ds, a.sample, geometry + kDirectionSuffix, d));
  return media::MakeNifti1Header(a.shape, a.dtype, spacing, origin, direction);
}

#ifdef SHARDIFY_TOOLS_WITH_READER
// What a voxel outside the crop (0 in every source channel) is stored as, per channel of
// `norm` (image.normalization, [C, 4]): its normalization of 0, or 0 itself for a channel
// z-scored within the nonzero region (provenance zscore_region=nonzero), which sets every
// voxel outside that region to 0, as nnU-Net does. No normalization: 0.
std::vector<double> OutsideFill(const Manifest& m, const std::vector<double>& norm) {
  if (norm.size() < 4) return {0.0};
  const bool in_region = MetaValue(m.provenance.options, "zscore_region") == "nonzero";
  // One for every channel, or one per channel.
  const std::vector<std::string> schemes = SplitComma(MetaValue(m.provenance.options, "normalize"));
  std::vector<double> fill;
  for (size_t c = 0; c + 4 <= norm.size(); c += 4) {
    const size_t channel = c / 4;
    const std::string scheme = schemes.empty() ? "" : schemes[std::min(channel, schemes.size() - 1)];
    fill.push_back(
        in_region && scheme == "zscore" ? 0.0 : (std::clamp(0.0, norm[c], norm[c + 1]) - norm[c + 2]) / norm[c + 3]);
  }
  return fill;
}
#endif

// Brings `a` back to its source form: onto the source grid when asked, and into the
// source dtype unless it was normalized.
Status ToSourceForm(const Dataset& ds, bool source_grid, Array* a, Decoder& d) {
#ifdef SHARDIFY_TOOLS_WITH_READER
  const FieldSpec& spec = ds.manifest().fields[a->field];
  ASSIGN_OR_RETURN(const std::optional<DType> source_dtype, ReadSourceDType(ds, a->sample, spec.name));
  ASSIGN_OR_RETURN(const std::vector<double> norm, ReadDoubles(ds, a->sample, spec.name + kNormalizationSuffix, d));
  if (source_grid) {
    ASSIGN_OR_RETURN(const std::optional<SourceGrid> grid, ReadSourceGrid(ds, a->sample, d));
    if (grid) {
      const std::vector<double> fill = OutsideFill(ds.manifest(), norm);
      const bool mask = detail::MetaValue(spec, kMetaRole) == kRoleMask;
      ASSIGN_OR_RETURN(a->bytes, ToSourceGrid(*grid, a->dtype, a->shape, a->bytes,
                                              mask ? GridInterp::kNearest : GridInterp::kLinear, fill, &a->shape));
      a->source_grid = true;
    }
  }
  if (source_dtype && norm.empty() && *source_dtype != a->dtype) {
    a->bytes = ConvertArray(a->bytes, a->dtype, *source_dtype);
    a->dtype = *source_dtype;
  }
  return Status::Ok();
#else
  (void)ds, (void)a, (void)d;
  if (source_grid) return Unsupported("--source-grid needs shardtool built with reader/");
  return Status::Ok();
#endif
}

Status ExportNifti(const Dataset& ds, Array a, const std::string& path, Decoder& d) {
  if (a.dtype == DType::kF16) {  // NIfTI has no half floats; f32 holds them exactly
    a.bytes = ConvertArray(a.bytes, a.dtype, DType::kF32);
    a.dtype = DType::kF32;
  }
  ASSIGN_OR_RETURN(std::vector<uint8_t> header, NiftiHeaderFor(ds, a, d));
  ASSIGN_OR_RETURN(std::vector<uint8_t> image, BuildNiftiImage(header, a.bytes.data(), a.bytes.size(), a.dtype));
  return WriteMaybeGzipped(path, image);
}

Status ExportTo(const Dataset& ds, const Array& a, const std::string& path, Decoder& d, std::string* format) {
  if (EndsWith(path, ".png")) {
    *format = "png";
    return ExportPng(a, path);
  }
  if (EndsWith(path, ".nii") || EndsWith(path, ".nii.gz")) {
    *format = "nifti";
    return ExportNifti(ds, a, path, d);
  }
  return InvalidArgument(path + ": unknown output type (use .png, .nii or .nii.gz)");
}

}  // namespace

Status RunExport(const std::string& dir, uint64_t index, const std::string& path, const ExportOptions& options,
                 std::ostream& out) {
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, options.io));
  const Manifest& m = ds->manifest();
  if (index >= m.num_samples) {
    return OutOfRange("sample " + std::to_string(index) + " of " + ds->dir() + ": the dataset has " +
                      std::to_string(m.num_samples) + " samples");
  }
  Array a;
  ASSIGN_OR_RETURN(a.field, detail::ResolveArrayField(m, options.field));
  ASSIGN_OR_RETURN(a.sample, ds->Sample(index));
  a.dtype = m.fields[a.field].dtype;
  ASSIGN_OR_RETURN(a.shape, a.sample.shape(a.field));
  Decoder decoder;
  ASSIGN_OR_RETURN(a.bytes, detail::DecodeArray(a.sample, a.field, decoder));
  std::string format;
  Status st = ToSourceForm(*ds, options.source_grid, &a, decoder);
  if (st.ok()) st = ExportTo(*ds, a, path, decoder, &format);
  if (!st.ok()) {
    return st.WithContext("export of sample " + std::to_string(index) + " field " + m.fields[a.field].name + " to " +
                          path);
  }
  if (options.json) {
    out << detail::Dump({{"file", path},
                         {"sample", index},
                         {"field", m.fields[a.field].name},
                         {"format", format},
                         {"dtype", DTypeName(a.dtype)},
                         {"shape", a.shape},
                         {"source_grid", a.source_grid}})
        << "\n";
  } else {
    out << "wrote " << path << " (" << format << ", sample " << index << ", field " << m.fields[a.field].name << ", "
        << DTypeName(a.dtype) << " " << ShapeToString(a.shape) << (a.source_grid ? ", on the source grid" : "")
        << ")\n";
  }
  return Status::Ok();
}

}  // namespace shardify::tools
