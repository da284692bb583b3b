// Schema building, split assignment and sample building (see schema_internal.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "convert/sources/schema_internal.h"
#include "convert/sources/source_internal.h"
#include "format/elements.h"
#include "format/fields.h"

namespace shardify::convert::detail {

FieldSpec NdarrayField(const std::string& name, DType t, Shape shape, const std::string& role) {
  FieldSpec f;
  f.name = name;
  f.kind = FieldKind::kNdarray;
  f.dtype = t;
  f.shape = std::move(shape);
  f.meta.push_back({kMetaRole, role});
  return f;
}

FieldSpec ScalarField(const std::string& name, FieldKind k, const std::string& role) {
  FieldSpec f;
  f.name = name;
  f.kind = k;
  if (!role.empty()) f.meta.push_back({kMetaRole, role});
  return f;
}

namespace {

// Merges `s` into the running field shape: differing dimensions become -1.
void MergeShape(Shape& field, const Shape& s) {
  for (size_t d = 0; d < field.size(); ++d) {
    if (field[d] != s[d]) field[d] = -1;
  }
}

// Checks `got` against the first case's info `ref`; returns what differs, or "". Dtypes
// may differ: the field takes one that holds them all.
std::string Mismatch(const ImageInfo& ref, const ImageInfo& got, const char* what) {
  if (got.shape.size() != ref.shape.size()) {
    return std::string(what) + " rank " + std::to_string(got.shape.size()) + " (" + ShapeToString(got.shape) +
           ") differs from the dataset's " + ShapeToString(ref.shape);
  }
  if (got.geometry.spacing.size() != ref.geometry.spacing.size()) {
    return std::string(what) + " has " + std::to_string(got.geometry.spacing.size()) +
           " spatial axes with geometry, the dataset has " + std::to_string(ref.geometry.spacing.size());
  }
  if ((got.kind == ImageKind::kNifti) != (ref.kind == ImageKind::kNifti)) {
    return std::string(what) + " mixes NIfTI with other image formats";
  }
  return "";
}

void AddGeometryFields(Schema& s, const std::string& f, size_t dims, bool nifti, int* geo, int* header) {
  if (dims > 0) {
    *geo = static_cast<int>(s.fields.size());
    Shape sd = {static_cast<int64_t>(dims)}, dd = {static_cast<int64_t>(dims * dims)};
    s.fields.push_back(NdarrayField(f + kSpacingSuffix, DType::kF64, sd, kRoleGeometry));
    s.fields.push_back(NdarrayField(f + kOriginSuffix, DType::kF64, sd, kRoleGeometry));
    s.fields.push_back(NdarrayField(f + kDirectionSuffix, DType::kF64, dd, kRoleGeometry));
  }
  if (nifti) {
    *header = static_cast<int>(s.fields.size());
    s.fields.push_back(ScalarField(f + kNiftiHeaderSuffix, FieldKind::kBytes, kRoleNiftiHeader));
  }
}

FieldKind ScalarKind(const std::vector<CaseInput>& cases, const std::vector<bool>& ok, size_t col) {
  bool all_int = true, all_num = true;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!ok[i]) continue;
    const std::string& v = cases[i].scalars[col];
    int64_t x;
    double d;
    all_int = all_int && ParseInt(v, &x);
    all_num = all_num && ParseDouble(v, &d);
  }
  return all_int ? FieldKind::kInt : all_num ? FieldKind::kFloat : FieldKind::kString;
}

}  // namespace

Schema BuildSchema(const SourcePlan& plan, const std::vector<CaseInfo>& infos, std::vector<bool>& ok,
                   std::vector<Status>& errors) {
  Schema s;
  size_t first = 0;
  while (first < infos.size() && !ok[first]) ++first;
  if (first == infos.size()) return s;
  const CaseInfo& ref = infos[first];
  Shape image_shape = ref.image.shape, mask_shape = ref.mask.shape;
  std::vector<DType> image_dtypes, mask_dtypes;
  for (size_t i = first; i < infos.size(); ++i) {
    if (!ok[i]) continue;
    const CaseInput& c = plan.cases[i];
    // The file at fault: the mask file for a mask that does not fit, else the only image.
    std::string why = Mismatch(ref.image, infos[i].image, kImageField);
    std::string file = c.images.size() == 1 ? c.images[0] : "";
    if (why.empty() && infos[i].has_mask) {
      why = Mismatch(ref.mask, infos[i].mask, kMaskField);
      file = c.mask;
    }
    if (!why.empty()) {
      ok[i] = false;
      errors[i] = InvalidArgument((file.empty() ? c.name : file) + ": " + why);
      continue;
    }
    MergeShape(image_shape, infos[i].image.shape);
    image_dtypes.push_back(infos[i].image.dtype);
    if (infos[i].has_mask) MergeShape(mask_shape, infos[i].mask.shape);
    if (infos[i].has_mask) mask_dtypes.push_back(infos[i].mask.dtype);
  }
  s.image = static_cast<int>(s.fields.size());
  s.fields.push_back(NdarrayField(kImageField, PromoteDTypes(image_dtypes), image_shape, kRoleImage));
  if (!plan.channel_names_json.empty()) s.fields.back().meta.push_back({kMetaChannelNames, plan.channel_names_json});
  if (plan.has_mask) {
    if (plan.unlabeled_masks) mask_shape[0] = -1;  // cases without a label store 0 channels
    s.mask = static_cast<int>(s.fields.size());
    s.fields.push_back(NdarrayField(kMaskField, mask_dtypes.empty() ? ref.mask.dtype : PromoteDTypes(mask_dtypes),
                                    mask_shape, kRoleMask));
    if (!plan.mask_labels_json.empty()) s.fields.back().meta.push_back({kMetaLabels, plan.mask_labels_json});
    if (plan.multi_label_mask) s.fields.back().meta.push_back({kMetaMultiLabel, "true"});
  }
  s.label = static_cast<int>(s.fields.size());
  s.fields.push_back(ScalarField(kLabelField, FieldKind::kInt, kRoleLabel));
  s.path = static_cast<int>(s.fields.size());
  s.fields.push_back(ScalarField(kPathField, FieldKind::kString, kRolePath));
  s.first_scalar = static_cast<int>(s.fields.size());
  for (size_t c = 0; c < plan.scalar_columns.size(); ++c) {
    s.scalar_kinds.push_back(ScalarKind(plan.cases, ok, c));
    s.fields.push_back(ScalarField(plan.scalar_columns[c], s.scalar_kinds.back(), ""));
  }
  s.geometry_dims = ref.image.geometry.spacing.size();
  AddGeometryFields(s, kImageField, s.geometry_dims, ref.image.kind == ImageKind::kNifti, &s.image_geometry,
                    &s.image_header);
  if (plan.has_mask && ref.mask.kind == ImageKind::kNifti) {
    AddGeometryFields(s, kMaskField, s.geometry_dims, true, &s.mask_geometry, &s.mask_header);
  }
  return s;
}

// Deterministic on every platform: mt19937_64 is fully specified, and so is this shuffle.
void SeededShuffle(std::vector<size_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    const uint64_t j = static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * i) >> 64);
    std::swap(v[i - 1], v[j]);
  }
}

namespace {

// Split sizes for n items by the largest-remainder method.
std::vector<size_t> Apportion(size_t n, const std::vector<std::pair<std::string, double>>& split) {
  std::vector<size_t> count(split.size());
  std::vector<std::pair<double, size_t>> rem;
  size_t used = 0;
  for (size_t k = 0; k < split.size(); ++k) {
    double exact = split[k].second * static_cast<double>(n);
    count[k] = static_cast<size_t>(std::floor(exact));
    used += count[k];
    rem.push_back({exact - std::floor(exact), k});
  }
  std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t r = 0; used < n && r < rem.size(); ++r, ++used) ++count[rem[r].second];
  return count;
}

}  // namespace

std::vector<size_t> AssignSplits(std::vector<CaseInput>& cases, const std::vector<bool>& ok,
                                 const std::vector<std::pair<std::string, double>>& split, uint64_t seed,
                                 std::vector<std::string>* split_order, const std::vector<std::string>& groups) {
  std::map<int64_t, std::vector<size_t>> strata;  // label -> cases needing a split
  for (size_t i = 0; i < cases.size(); ++i) {
    if (ok[i] && cases[i].split.empty() && (groups.empty() || split.empty())) strata[cases[i].label].push_back(i);
  }
  if (!groups.empty() && !split.empty()) AssignGroupSplits(cases, ok, split, seed, groups);
  std::mt19937_64 rng(seed);
  for (auto& [label, members] : strata) {
    if (split.empty()) {
      for (size_t i : members) cases[i].split = "train";
      continue;
    }
    SeededShuffle(members, rng);
    std::vector<size_t> count = Apportion(members.size(), split);
    size_t pos = 0;
    for (size_t k = 0; k < split.size(); ++k) {
      for (size_t j = 0; j < count[k]; ++j) cases[members[pos++]].split = split[k].first;
    }
  }
  std::vector<std::string> order;
  for (const auto& [name, frac] : split) order.push_back(name);
  for (const char* n : {"train", "val", "test"}) {
    if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
  }
  std::vector<std::string> others;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (ok[i] && std::find(order.begin(), order.end(), cases[i].split) == order.end() &&
        std::find(others.begin(), others.end(), cases[i].split) == others.end()) {
      others.push_back(cases[i].split);
    }
  }
  std::sort(others.begin(), others.end());
  order.insert(order.end(), others.begin(), others.end());
  std::vector<size_t> result;
  split_order->clear();
  for (const auto& name : order) {
    size_t before = result.size();
    for (size_t i = 0; i < cases.size(); ++i) {
      if (ok[i] && cases[i].split == name) result.push_back(i);
    }
    if (result.size() > before) split_order->push_back(name);
  }
  return result;
}

FieldValue Doubles(const std::vector<double>& v, Shape shape) {
  std::vector<uint8_t> b(v.size() * 8);
  for (size_t i = 0; i < v.size(); ++i) {
    uint64_t u;
    std::memcpy(&u, &v[i], 8);
    for (int k = 0; k < 8; ++k) b[i * 8 + k] = static_cast<uint8_t>(u >> (8 * k));
  }
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return FieldValue::Array(std::move(b), std::move(shape));
}

namespace {

void PutGeometry(std::vector<FieldValue>& v, int at, const Geometry& g) {
  v[at] = Doubles(g.spacing);
  v[at + 1] = Doubles(g.origin);
  v[at + 2] = Doubles(g.direction);
}

}  // namespace

Result<SampleInput> BuildSample(const Schema& s, const CaseInput& in, CaseData&& d) {
  const FieldSpec& img = s.fields[s.image];
  if (d.image.info.dtype != img.dtype) {
    return InvalidArgument(in.name + ": image dtype " + DTypeName(d.image.info.dtype) + " differs from the dataset's " +
                           DTypeName(img.dtype));
  }
  if (!ShapeMatches(img.shape, d.image.info.shape)) {
    return InvalidArgument(in.name + ": image shape " + ShapeToString(d.image.info.shape) +
                           " does not fit the dataset's " + ShapeToString(img.shape));
  }
  if (s.mask >= 0 && d.has_mask && !ShapeMatches(s.fields[s.mask].shape, d.mask.info.shape)) {
    return InvalidArgument((in.mask.empty() ? in.name : in.mask) + ": mask shape " + ShapeToString(d.mask.info.shape) +
                           " does not fit the dataset's " + ShapeToString(s.fields[s.mask].shape));
  }
  SampleInput out;
  out.split = in.split;
  out.values.resize(s.fields.size());
  out.values[s.image] = FieldValue::Array(std::move(d.image.pixels), d.image.info.shape);
  if (s.mask >= 0) {
    Shape ms = d.has_mask ? d.mask.info.shape : d.image.info.shape;
    if (!d.has_mask) ms[0] = 0;
    if (d.has_mask && d.mask.info.dtype != s.fields[s.mask].dtype) {
      return InvalidArgument((in.mask.empty() ? in.name : in.mask) + ": mask dtype " + DTypeName(d.mask.info.dtype) +
                             " differs from the dataset's " + DTypeName(s.fields[s.mask].dtype));
    }
    out.values[s.mask] = FieldValue::Array(std::move(d.mask.pixels), ms);
  }
  out.values[s.label] = FieldValue::Int(in.label);
  out.values[s.path] = FieldValue::String(in.name);
  for (size_t c = 0; c < s.scalar_kinds.size(); ++c) {
    const std::string& v = in.scalars[c];
    FieldValue& f = out.values[s.first_scalar + c];
    int64_t x = 0;
    double y = 0;
    if (s.scalar_kinds[c] == FieldKind::kInt && ParseInt(v, &x))
      f = FieldValue::Int(x);
    else if (s.scalar_kinds[c] == FieldKind::kFloat && ParseDouble(v, &y))
      f = FieldValue::Float(y);
    else
      f = FieldValue::String(v);
  }
  if (s.image_geometry >= 0) {
    if (d.image.info.geometry.spacing.size() != s.geometry_dims)
      return InvalidArgument(in.name + ": image has no geometry");
    PutGeometry(out.values, s.image_geometry, d.image.info.geometry);
  }
  if (s.image_header >= 0) out.values[s.image_header] = FieldValue::Bytes(std::move(d.image.nifti_header));
  if (s.mask_geometry >= 0) {
    const Geometry& g = d.has_mask ? d.mask.info.geometry : d.image.info.geometry;
    if (g.spacing.size() != s.geometry_dims) return InvalidArgument(in.name + ": mask has no geometry");
    PutGeometry(out.values, s.mask_geometry, g);
  }
  if (s.mask_header >= 0) out.values[s.mask_header] = FieldValue::Bytes(std::move(d.mask.nifti_header));
  return out;
}

}  // namespace shardify::convert::detail
