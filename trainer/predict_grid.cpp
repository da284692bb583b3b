#include "trainer/predict_grid.h"

#include "format/fields.h"
#include "reader/source_grid.h"

namespace shardify::trainer::detail {
namespace {

namespace F = torch::nn::functional;

bool Has(const Dataset& ds, const std::string& name) { return ds.manifest().FindField(name) >= 0; }

FieldSpec Field(const std::string& name, FieldKind kind, DType dtype, Shape shape, const std::string& role) {
  FieldSpec f;
  f.name = name;
  f.kind = kind;
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.meta = {{kMetaRole, role}};
  return f;
}

// Field `name` of sample `s` as stored (ndarray, string or bytes), for another dataset.
Result<FieldValue> Copy(const Dataset& ds, const SampleView& s, const std::string& name, Decoder& d) {
  const auto f = static_cast<size_t>(ds.manifest().FindField(name));
  const FieldSpec& spec = ds.manifest().fields[f];
  if (spec.kind == FieldKind::kString || spec.kind == FieldKind::kBytes) {
    ASSIGN_OR_RETURN(const std::string_view v, s.bytes_value(f));
    FieldValue out = FieldValue::Bytes(std::vector<uint8_t>(v.begin(), v.end()));
    out.kind = spec.kind;
    return out;
  }
  ASSIGN_OR_RETURN(Shape shape, s.shape(f));
  ASSIGN_OR_RETURN(const uint64_t size, s.raw_size(f));
  std::vector<uint8_t> bytes(size);
  RETURN_IF_ERROR(s.Decode(f, bytes.data(), bytes.size(), d));
  return FieldValue::Array(std::move(bytes), std::move(shape));
}

// The predicted class map as u8 [1, spatial...] bytes.
std::vector<uint8_t> ClassBytes(const torch::Tensor& probs, bool multi_label) {
  torch::Tensor m = multi_label ? (probs > 0.5) : probs.argmax(0);
  m = m.to(torch::kCPU).clamp(0, 255).to(torch::kByte).contiguous();
  const uint8_t* p = m.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + m.numel());
}

}  // namespace

VolumeLayout PlanVolumes(const Dataset& ds, bool source_grid, std::vector<FieldSpec>* fields) {
  VolumeLayout l;
  l.source_grid = source_grid;
  const bool record = Has(ds, kSourceShapeField);
  l.mapped = source_grid && record;
  const std::string image_spacing = std::string(kImageField) + kSpacingSuffix;
  l.geometry = l.mapped && Has(ds, kSourceSpacingField) ? kSourcePrefix : Has(ds, image_spacing) ? kImageField : "";
  l.header = (source_grid || !record) && Has(ds, std::string(kImageField) + kNiftiHeaderSuffix);
  if (!source_grid && record) {
    for (const char* name :
         {kSourceShapeField, kSourceCropBoxField, kSourceSpacingField, kSourceOriginField, kSourceDirectionField}) {
      if (Has(ds, name)) l.copied.push_back(name);
    }
  }
  if (!l.geometry.empty()) {
    const int g = ds.manifest().FindField(l.geometry + kSpacingSuffix);
    const int64_t s = ds.manifest().fields[g].shape.empty() ? 3 : ds.manifest().fields[g].shape[0];
    const std::string mask = kMaskField;
    fields->push_back(Field(mask + kSpacingSuffix, FieldKind::kNdarray, DType::kF64, {s}, kRoleGeometry));
    fields->push_back(Field(mask + kOriginSuffix, FieldKind::kNdarray, DType::kF64, {s}, kRoleGeometry));
    fields->push_back(Field(mask + kDirectionSuffix, FieldKind::kNdarray, DType::kF64, {s * s}, kRoleGeometry));
  }
  if (l.header) {
    const std::string name = kMaskField + std::string(kNiftiHeaderSuffix);
    fields->push_back(Field(name, FieldKind::kBytes, DType::kU8, {}, kRoleNiftiHeader));
  }
  for (const std::string& name : l.copied) {
    const FieldSpec& spec = ds.manifest().fields[ds.manifest().FindField(name)];
    fields->push_back(Field(name, spec.kind, spec.dtype, spec.shape, kRoleSourceGrid));
  }
  return l;
}

Result<SampleInput> VolumeSample(const Dataset& ds, const VolumeLayout& l, uint64_t index, const std::string& split,
                                 const torch::Tensor& probs) {
  ASSIGN_OR_RETURN(SampleView s, ds.Sample(index));
  Decoder d;
  SampleInput out;
  out.split = split;
  out.values.push_back(FieldValue::Int(static_cast<int64_t>(index)));
  ASSIGN_OR_RETURN(const std::optional<SourceGrid> grid,
                   l.mapped ? ReadSourceGrid(ds, s, d) : std::optional<SourceGrid>{});
  if (grid) {
    const Shape& box = grid->crop_size;
    torch::Tensor p = probs.to(torch::kFloat).unsqueeze(0);
    if (box.size() != static_cast<size_t>(probs.dim() - 1)) {
      return InvalidArgument("sample " + std::to_string(index) + ": source grid of rank " + std::to_string(box.size()) +
                             " for a prediction of rank " + std::to_string(probs.dim() - 1));
    }
    if (!std::equal(box.begin(), box.end(), probs.sizes().begin() + 1)) {
      p = F::interpolate(p, F::InterpolateFuncOptions()
                                .size(std::vector<int64_t>(box.begin(), box.end()))
                                .mode(torch::kTrilinear)
                                .align_corners(false));
    }
    Shape shape = {l.multi_label ? probs.size(0) : 1};
    shape.insert(shape.end(), box.begin(), box.end());
    Shape full;
    ASSIGN_OR_RETURN(std::vector<uint8_t> mask,
                     Uncrop(*grid, DType::kU8, shape, ClassBytes(p[0], l.multi_label), {0.0}, &full));
    out.values.push_back(FieldValue::Array(std::move(mask), std::move(full)));
  } else {
    Shape shape = {l.multi_label ? probs.size(0) : 1};
    for (int64_t a = 1; a < probs.dim(); ++a) shape.push_back(probs.size(a));
    out.values.push_back(FieldValue::Array(ClassBytes(probs, l.multi_label), std::move(shape)));
  }
  if (!l.geometry.empty()) {
    for (const char* part : kGeometrySuffixes) {
      ASSIGN_OR_RETURN(FieldValue v, Copy(ds, s, l.geometry + part, d));
      out.values.push_back(std::move(v));
    }
  }
  if (l.header) {
    ASSIGN_OR_RETURN(FieldValue v, Copy(ds, s, std::string(kImageField) + kNiftiHeaderSuffix, d));
    out.values.push_back(std::move(v));
  }
  for (const std::string& name : l.copied) {
    ASSIGN_OR_RETURN(FieldValue v, Copy(ds, s, name, d));
    out.values.push_back(std::move(v));
  }
  return out;
}

}  // namespace shardify::trainer::detail
