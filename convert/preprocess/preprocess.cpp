// Preprocessing options, the plan resolved from them, the schema's record fields and the
// provenance (see preprocess.h, preprocess_internal.h). The per-case work is in
// preprocess_case.cpp, the ct statistics in intensity.cpp.
#include "convert/preprocess/preprocess.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "convert/preprocess/intensity_internal.h"
#include "convert/preprocess/preprocess_internal.h"
#include "convert/preprocess/resample_internal.h"
#include "convert/sources/schema_internal.h"
#include "convert/sources/source_internal.h"
#include "format/elements.h"
#include "format/fields.h"

namespace shardify::convert {

bool PreprocessOptions::normalizes() const {
  if (normalize_by_channel_names) return true;
  for (Normalization n : normalize) {
    if (n != Normalization::kNone) return true;
  }
  return false;
}

namespace {

Status SpacingValue(const std::string& text, const std::string& item, double* v) {
  if (!detail::ParseDouble(item, v) || !std::isfinite(*v) || *v <= 0) {
    return InvalidArgument("--spacing '" + text + "': '" + item +
                           "' is not a positive spacing in mm (expected x=X,y=Y,z=Z, one value for all axes, or auto)");
  }
  if (*v < kMinSpacingMm || *v > kMaxSpacingMm) {
    return InvalidArgument("--spacing '" + text + "': " + item + " mm is outside 1e-06..1e+06 mm");
  }
  return Status::Ok();
}

// "x=0.8,y=0.8,z=1.5" in any order: the spacing in array order (z, y, x).
Status ParseNamedSpacing(const std::string& text, const std::vector<std::string>& items, std::vector<double>* out) {
  out->assign(3, 0.0);
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const size_t axis = name == "z" ? 0 : name == "y" ? 1 : name == "x" ? 2 : 3;
    if (eq == std::string::npos || axis == 3 || (*out)[axis] != 0) {
      return InvalidArgument("--spacing '" + text + "': '" + item + "' does not name a new axis x, y or z");
    }
    RETURN_IF_ERROR(SpacingValue(text, item.substr(eq + 1), &(*out)[axis]));
  }
  if (items.size() != 3) {
    return InvalidArgument("--spacing '" + text + "': names " + std::to_string(items.size()) +
                           " axes; volumes have 3 (x=X,y=Y,z=Z)");
  }
  return Status::Ok();
}

}  // namespace

Status ParseSpacing(const std::string& text, PreprocessOptions* o) {
  o->spacing.clear();
  o->auto_spacing = text == "auto";
  if (o->auto_spacing) return Status::Ok();
  const std::vector<std::string> items = SplitComma(text);
  if (text.find('=') != std::string::npos) return ParseNamedSpacing(text, items, &o->spacing);
  for (const std::string& item : items) {
    double v = 0;
    RETURN_IF_ERROR(SpacingValue(text, item, &v));
    o->spacing.push_back(v);
  }
  if (o->spacing.size() == 1) o->spacing.assign(3, o->spacing[0]);
  if (o->spacing.size() != 3) {
    return InvalidArgument("--spacing '" + text + "': " + std::to_string(o->spacing.size()) +
                           " value(s); volumes have 3 spatial axes (expected x=X,y=Y,z=Z, one value, or auto)");
  }
  if (o->spacing[0] != o->spacing[1] || o->spacing[1] != o->spacing[2]) {
    return InvalidArgument("--spacing '" + text + "': name the axes, e.g. x=" + items[2] + ",y=" + items[1] +
                           ",z=" + items[0] +
                           " if you mean z,y,x (unnamed values must be equal: NIfTI, nibabel and image.spacing "
                           "list x,y,z, nnU-Net's plans z,y,x)");
  }
  return Status::Ok();
}

const char* NormalizationName(Normalization n) {
  switch (n) {
    case Normalization::kNone:
      return "none";
    case Normalization::kZScore:
      return "zscore";
    case Normalization::kCt:
      return "ct";
  }
  return "?";
}

Result<Normalization> ChannelSchemeOf(const std::string& name) {
  const std::string folded = AsciiLower(name);
  if (folded == "ct") return Normalization::kCt;
  if (folded == "nonorm") return Normalization::kNone;
  if (folded == "rescale_to_0_1" || folded == "rgb_to_0_1") {
    return InvalidArgument("channel '" + name + "': nnU-Net's " + folded +
                           " normalization has no counterpart; give --normalize for every channel");
  }
  return Normalization::kZScore;
}

Status ApplyPreset(const std::string& name, const PresetGiven& given, PreprocessOptions* o) {
  if (name == "none" || name.empty()) return Status::Ok();
  if (name != "nnunet") return InvalidArgument("--preprocess '" + name + "' is not nnunet or none");
  o->preset = name;
  if (!given.crop) o->crop_nonzero = true;
  if (!given.spacing) o->auto_spacing = true, o->spacing.clear();
  if (!given.normalize) o->normalize.clear(), o->normalize_by_channel_names = true;
  return Status::Ok();
}

Result<std::vector<Normalization>> ParseNormalize(const std::string& text) {
  std::vector<Normalization> out;
  for (const std::string& item : SplitComma(text)) {
    bool found = false;
    for (Normalization n : {Normalization::kNone, Normalization::kZScore, Normalization::kCt}) {
      if (item == NormalizationName(n)) out.push_back(n), found = true;
    }
    if (!found) {
      return InvalidArgument("--normalize '" + text + "': '" + item +
                             "' is not none, zscore or ct (one for every channel, or one per channel)");
    }
  }
  if (out.empty()) return InvalidArgument("--normalize: empty (expected none, zscore or ct)");
  return out;
}

namespace detail {

bool PreprocessPlan::needs_ct_statistics() const {
  return options.ct_statistics.empty() &&
         std::find(normalize.begin(), normalize.end(), Normalization::kCt) != normalize.end();
}

bool PreprocessPlan::AnyInRegion() const {
  return std::find(zscore_in_region.begin(), zscore_in_region.end(), true) != zscore_in_region.end();
}

bool PreprocessPlan::InRegion(size_t channel) const {
  if (zscore_in_region.empty()) return false;
  return zscore_in_region.size() == 1 ? zscore_in_region[0]
                                      : channel < zscore_in_region.size() && zscore_in_region[channel];
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double t = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * t;
}

double RoundHalfToEven(double x) {
  if (std::fabs(x - std::trunc(x)) != 0.5) return std::round(x);
  return 2 * std::round(x / 2);
}

namespace {

// "z", "y", "x" for the axes of a volume in array order; else the axis number.
std::string AxisName(size_t axis, size_t rank) {
  if (rank == 3) return std::string(1, "zyx"[axis]);
  return "axis " + std::to_string(axis);
}

}  // namespace

Result<Shape> TargetShape(const Shape& spatial, const std::vector<double>& from, const std::vector<double>& to) {
  Shape out(spatial.size());
  for (size_t a = 0; a < spatial.size(); ++a) {
    const double exact = from[a] / to[a] * static_cast<double>(spatial[a]);  // nnU-Net's order of operations
    const double n = RoundHalfToEven(exact);
    if (!(n >= 1 && n <= static_cast<double>(kMaxResampledAxis))) {
      char b[256];
      std::snprintf(b, sizeof b, "resampling %s from %lld voxel(s) of %g mm to %g mm makes %.4g voxel(s): %s",
                    AxisName(a, spatial.size()).c_str(), static_cast<long long>(spatial[a]), from[a], to[a], exact,
                    n >= 1 ? "more than 2^31 - 1" : "none left");
      return InvalidArgument(b);
    }
    out[a] = static_cast<int64_t>(n);
  }
  return out;
}

namespace {

constexpr double kAnisotropy = 3;  // nnU-Net's ANISO_THRESHOLD

std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// "x=0.8,y=0.8,z=1.5" of a spacing in array order (z, y, x).
std::string NamedSpacing(const std::vector<double>& v) {
  std::string s;
  for (size_t a = v.size(); a-- > 0;) s += (s.empty() ? "" : ",") + AxisName(a, v.size()) + "=" + Num(v[a]);
  return s;
}

// Spatial spacing of a case in array axis order (ITK's x, y, z reversed).
std::vector<double> ArraySpacing(const Geometry& g) {
  return std::vector<double>(g.spacing.rbegin(), g.spacing.rend());
}

// nnU-Net's target spacing (preprocess.h, auto_spacing) from per-case spacings and shapes
// (array order).
std::vector<double> AutoSpacing(const std::vector<std::vector<double>>& spacings,
                                const std::vector<std::vector<double>>& shapes, std::string* why) {
  const size_t dims = spacings[0].size();
  std::vector<double> target(dims), size(dims);
  for (size_t a = 0; a < dims; ++a) {
    std::vector<double> s, n;
    for (size_t i = 0; i < spacings.size(); ++i) s.push_back(spacings[i][a]), n.push_back(shapes[i][a]);
    target[a] = Percentile(s, 50);
    size[a] = Percentile(n, 50);
  }
  *why = "median of " + std::to_string(spacings.size()) + " case(s)";
  const size_t worst = static_cast<size_t>(std::max_element(target.begin(), target.end()) - target.begin());
  double other_spacing = 0, other_size = INFINITY;
  for (size_t a = 0; a < dims; ++a) {
    if (a == worst) continue;
    other_spacing = std::max(other_spacing, target[a]);
    other_size = std::min(other_size, size[a]);
  }
  if (dims > 1 && target[worst] > kAnisotropy * other_spacing && size[worst] * kAnisotropy < other_size) {
    std::vector<double> axis;
    for (const auto& s : spacings) axis.push_back(s[worst]);
    double t = Percentile(axis, 10);
    if (t < other_spacing) t = std::max(other_spacing, t) + 1e-5;
    target[worst] = t;
    *why += "; anisotropic, " + AxisName(worst, dims) + " at the 10th percentile of its spacings";
  }
  return target;
}

uint64_t Voxels(const Shape& spatial) {
  uint64_t n = 1;
  for (int64_t d : spatial) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

// "x 1 -> 0.8 mm, y 1 -> 0.8 mm, z 2..3 -> 1.5 mm": per axis (x, y, z), the range of the
// spacings of the cases in `ok` and the target (array order).
std::string SpacingChange(const std::vector<CaseInfo>& infos, const std::vector<bool>& ok,
                          const std::vector<double>& target) {
  std::string s;
  for (size_t a = target.size(); a-- > 0;) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < infos.size(); ++i) {
      if (!ok[i]) continue;
      const double v = ArraySpacing(infos[i].image.geometry)[a];
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
    const std::string from = lo > hi ? "?" : lo == hi ? Num(lo) : Num(lo) + ".." + Num(hi);
    s += (s.empty() ? "" : ", ") + AxisName(a, target.size()) + " " + from + " -> " + Num(target[a]) + " mm";
  }
  return s;
}

// nnU-Net's planner's transpose for a target spacing (determine_transpose): the axis of the
// largest spacing (the first of equals) first, the others in order.
std::array<int, 3> TransposeFor(const std::vector<double>& spacing) {
  const int worst = static_cast<int>(std::max_element(spacing.begin(), spacing.end()) - spacing.begin());
  std::array<int, 3> t{worst, 0, 0};
  for (int a = 0, k = 1; a < 3; ++a) {
    if (a != worst) t[static_cast<size_t>(k++)] = a;
  }
  return t;
}

// Resampling's target spacing: given, or nnU-Net's rule over the training cases that the
// first pass read (not in a split other than train, as nnU-Net's fingerprint takes
// imagesTr), with their shapes after cropping to the nonzero box, as the fingerprint has
// them.
Status ResolveSpacing(const PreprocessOptions& o, const std::vector<CaseInfo>& infos, const std::vector<bool>& ok,
                      const CaseShapes& training, PreprocessPlan* plan, std::vector<std::string>* notes) {
  if (!o.auto_spacing) {
    if (o.spacing.size() != 3) {
      return InvalidArgument("--spacing gives " + std::to_string(o.spacing.size()) +
                             " value(s); volumes have 3 spatial axes (x, y, z)");
    }
    plan->spacing = o.spacing;
    notes->push_back("resampled: " + SpacingChange(infos, ok, plan->spacing) +
                     (o.from_plans ? " (plans)" : " (given)"));
    return Status::Ok();
  }
  if (training.spacings.empty()) {
    if (!training.why_none.ok()) return training.why_none;
    return InvalidArgument(
        "--spacing auto: the source has no training case (imagesTr, or split train) to take the "
        "spacing from");
  }
  std::vector<std::vector<double>> shapes;
  for (const Shape& s : training.cropped) shapes.push_back(std::vector<double>(s.begin(), s.end()));
  std::string why;
  plan->spacing = AutoSpacing(training.spacings, shapes, &why);
  notes->push_back("resampled: " + SpacingChange(infos, ok, plan->spacing) + " (auto: " + why + ")");
  return Status::Ok();
}

// Cases the options cannot apply to fail on their own (skippable).
void CheckCases(const PreprocessOptions& o, const SourcePlan& source, const std::vector<CaseInfo>& infos,
                std::vector<bool>& ok, std::vector<Status>& errors) {
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!ok[i]) continue;
    const ImageInfo& img = infos[i].image;
    std::string why;
    if (o.resamples() && (img.shape.size() != 4 || img.geometry.spacing.size() != 3)) {
      why = "cannot be resampled: --spacing needs 3D volumes with a spacing (this is " + ShapeToString(img.shape) + ")";
    } else if ((o.normalize.size() > 1 || o.from_plans) && img.shape[0] != static_cast<int64_t>(o.normalize.size())) {
      why = "has " + std::to_string(img.shape[0]) + " channel(s), " +
            (o.from_plans ? "the plans name " : "--normalize names ") + std::to_string(o.normalize.size());
    }
    if (!why.empty()) {
      ok[i] = false;
      errors[i] = InvalidArgument(source.cases[i].name + ": " + why);
    }
  }
}

// Each channel's scheme from dataset.json's channel_names ({"0": "CT", "1": "T2"}), in
// channel order; {zscore} (every channel) without names.
Result<std::vector<Normalization>> SchemesByChannelName(const SourcePlan& source, std::vector<std::string>* notes) {
  if (source.channel_names_json.empty()) {
    notes->push_back("normalization by channel name: no channel names, zscore for every channel");
    return std::vector<Normalization>{Normalization::kZScore};
  }
  const nlohmann::json names = nlohmann::json::parse(source.channel_names_json, nullptr, false);
  if (!names.is_object()) return Internal("channel names are not a JSON object");
  std::vector<std::pair<int64_t, std::string>> channels;
  for (const auto& [key, value] : names.items()) {
    int64_t k = 0;
    if (!ParseInt(key, &k) || !value.is_string()) {
      return InvalidArgument("dataset.json: channel_names entry '" + key + "' is not \"<index>\": \"<name>\"");
    }
    channels.emplace_back(k, value.get<std::string>());
  }
  std::sort(channels.begin(), channels.end());
  std::vector<Normalization> out;
  std::string list;
  for (const auto& [k, name] : channels) {
    ASSIGN_OR_RETURN(const Normalization n, ChannelSchemeOf(name));
    out.push_back(n);
    list += (list.empty() ? "" : ", ") + name + " -> " + NormalizationName(n);
  }
  notes->push_back("normalization by channel name (nnU-Net's rule): " + list);
  return out;
}

// "NIfTI scaling applied to 2 case(s) ...", or nothing when no case has one.
void ScalingNote(const std::vector<CaseInfo>& infos, const std::vector<bool>& ok, std::vector<std::string>* notes) {
  size_t scaled = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    scaled += ok[i] && (infos[i].image.scaling.applies() || (infos[i].has_mask && infos[i].mask.scaling.applies()));
  }
  if (scaled == 0) return;
  notes->push_back("NIfTI scl_slope/scl_inter applied to the voxels of " + std::to_string(scaled) +
                   " case(s), as nnU-Net's readers apply them: their values are f32");
}

}  // namespace

Status PlanPreprocessing(const PreprocessOptions& given, const SourcePlan& source, const std::vector<CaseInfo>& infos,
                         std::vector<bool>& ok, std::vector<Status>& errors, PreprocessPlan* plan,
                         std::vector<std::string>* notes) {
  PreprocessOptions o = given;
  if (o.normalize_by_channel_names) {
    ASSIGN_OR_RETURN(o.normalize, SchemesByChannelName(source, notes));
    o.normalize_by_channel_names = false;
  }
  plan->options = o;
  plan->normalize = o.normalizes() ? o.normalize : std::vector<Normalization>{};
  plan->ct = o.ct_statistics;
  plan->zscore_in_region = o.use_mask_for_norm;
  const std::vector<int64_t>& labels = source.declared_mask_values;
  plan->labels_fit_i8 = !labels.empty() && *std::max_element(labels.begin(), labels.end()) <= 127 &&
                        *std::min_element(labels.begin(), labels.end()) >= 0;
  CheckCases(o, source, infos, ok, errors);
  if (o.interprets()) ScalingNote(infos, ok, notes);
  if (o.from_plans) PlansNotes(*plan, notes);
  if (o.nan_to_num) notes->push_back("NaN and infinite image voxels become 0 (--nan-to-num)");
  if (o.crop_nonzero) notes->push_back("cropped to the box of nonzero voxels over all channels");
  if (!plan->normalize.empty()) {
    std::string list;
    for (Normalization n : plan->normalize) list += (list.empty() ? "" : ",") + std::string(NormalizationName(n));
    notes->push_back("normalized per channel: " + list);
  }
  return Status::Ok();
}

Status PlanGrids(const SourcePlan& source, const CaseShapes& training, std::vector<CaseInfo>& infos,
                 std::vector<bool>& ok, std::vector<Status>& errors, PreprocessPlan* plan,
                 std::vector<uint64_t>* work_bytes, std::vector<std::string>* notes) {
  const PreprocessOptions& o = plan->options;
  work_bytes->assign(infos.size(), 0);
  if (o.resamples()) {
    RETURN_IF_ERROR(ResolveSpacing(o, infos, ok, training, plan, notes));
    if (o.from_plans) {
      std::copy(o.from_plans->transpose_forward.begin(), o.from_plans->transpose_forward.end(),
                plan->transpose.begin());
    } else {
      plan->transpose = TransposeFor(plan->spacing);
    }
  }
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!ok[i]) continue;
    ImageInfo& img = infos[i].image;
    const int64_t channels = std::max<int64_t>(img.shape.empty() ? 0 : img.shape[0], 1);
    const Shape spatial(img.shape.begin() + 1, img.shape.end());
    uint64_t floats = plan->normalize.empty() ? 0 : Voxels(spatial) * static_cast<uint64_t>(channels);
    if (!plan->spacing.empty()) {
      Result<Shape> target = TargetShape(spatial, ArraySpacing(img.geometry), plan->spacing);
      if (!target.ok()) {
        ok[i] = false;
        errors[i] = target.status().WithContext(source.cases[i].name);
        continue;
      }
      const Shape& out = *target;
      // Input and output as floats: the image's channels, and a mask's labels and a
      // label's indicator in double (two floats each).
      floats = (Voxels(spatial) + Voxels(out)) * static_cast<uint64_t>(channels + 4);
      const Geometry g = ResampledGrid(Grid{spatial, img.geometry}, out).geometry;
      std::copy(out.begin(), out.end(), img.shape.begin() + 1);
      img.geometry = g;
      if (infos[i].has_mask) {
        std::copy(out.begin(), out.end(), infos[i].mask.shape.begin() + 1);
        infos[i].mask.geometry = g;
      }
    }
    (*work_bytes)[i] = 4 * floats;
  }
  return Status::Ok();
}

namespace {

// "image dtype u16: inputs are u8 (3), u16 (1); u16 is the smallest that holds every value exactly".
std::string DTypeNote(const char* field, DType out, const std::map<DType, int>& seen, bool forced, bool normalized) {
  std::string inputs;
  bool exact = true;
  for (const auto& [t, n] : seen) {
    inputs += (inputs.empty() ? "" : ", ") + std::string(DTypeName(t)) + " (" + std::to_string(n) + ")";
    exact = exact && HoldsExactly(out, t);
  }
  std::string s = std::string(field) + " dtype " + DTypeName(out) + ": inputs are " + inputs;
  if (normalized) return s + "; normalized values are floats" + (forced ? " (--dtype)" : "");
  if (forced)
    return s + "; set by --dtype" + (exact ? "" : ", not every input value is exact in it (rounded, saturated)");
  if (!exact) return s + "; no dtype holds all of them exactly, " + DTypeName(out) + " is the closest";
  return s + "; promoted to the smallest dtype that holds every input value exactly";
}

std::map<DType, int> SeenDTypes(const std::vector<CaseInfo>& infos, const std::vector<bool>& ok, bool mask) {
  std::map<DType, int> seen;
  for (size_t i = 0; i < infos.size(); ++i) {
    if (ok[i] && (!mask || infos[i].has_mask)) ++seen[mask ? infos[i].mask.dtype : infos[i].image.dtype];
  }
  return seen;
}

bool IsFloat(DType t) { return t == DType::kF16 || t == DType::kF32 || t == DType::kF64; }

}  // namespace

Status FinishSchema(const std::vector<CaseInfo>& infos, const std::vector<bool>& ok, bool has_mask,
                    size_t geometry_dims, int image, int mask, std::vector<FieldSpec>& fields, RecordFields* record,
                    PreprocessPlan* plan, std::vector<std::string>* notes) {
  const PreprocessOptions& o = plan->options;
  FieldSpec& img = fields[static_cast<size_t>(image)];
  DType out = o.dtype.value_or(plan->normalize.empty() ? img.dtype : DType::kF32);
  if (!plan->normalize.empty() && !IsFloat(out)) {
    return InvalidArgument(std::string("--normalize stores floats: --dtype must be f16, f32 or f64, not ") +
                           DTypeName(out));
  }
  const std::map<DType, int> image_seen = SeenDTypes(infos, ok, false), mask_seen = SeenDTypes(infos, ok, true);
  const bool normalized = !plan->normalize.empty();
  if (image_seen.size() > 1 || o.dtype) {
    notes->push_back(DTypeNote(kImageField, out, image_seen, o.dtype.has_value(), normalized));
  }
  if (mask >= 0 && mask_seen.size() > 1) {
    notes->push_back(DTypeNote(kMaskField, fields[mask].dtype, mask_seen, false, false));
  }
  img.dtype = out;
  const Shape image_shape = img.shape;  // `img` dangles once fields grow
  plan->image_dtype = out;
  if (mask >= 0 && plan->MarksRegion(has_mask)) {
    DType& m = fields[static_cast<size_t>(mask)].dtype;
    m = plan->labels_fit_i8 ? DType::kI8 : PromoteDTypes({m, DType::kI8});
    notes->push_back(std::string("mask dtype ") + DTypeName(m) + ": unlabelled voxels outside the nonzero region are " +
                     std::to_string(kOutsideRegion) + ", as in nnU-Net's preprocessed segmentations");
  }
  plan->mask_dtype = mask >= 0 ? fields[static_cast<size_t>(mask)].dtype : DType::kU8;
  if (o.crop_nonzero) {
    for (int f : {image, mask}) {
      if (f >= 0) std::fill(fields[f].shape.begin() + 1, fields[f].shape.end(), -1);
    }
  }
  if (image_seen.size() > 1 || image_seen.begin()->first != out) {
    record->image_dtype = static_cast<int>(fields.size());
    fields.push_back(ScalarField(std::string(kImageField) + kSourceDTypeSuffix, FieldKind::kString, kRoleSourceDType));
  }
  if (has_mask && mask >= 0 &&
      (mask_seen.size() > 1 || (!mask_seen.empty() && mask_seen.begin()->first != plan->mask_dtype))) {
    record->mask_dtype = static_cast<int>(fields.size());
    fields.push_back(ScalarField(std::string(kMaskField) + kSourceDTypeSuffix, FieldKind::kString, kRoleSourceDType));
  }
  if (o.crop_nonzero || o.resamples()) {
    const auto s = static_cast<int64_t>(image_shape.size() - 1);
    record->shape = static_cast<int>(fields.size());
    fields.push_back(NdarrayField(kSourceShapeField, DType::kI64, {s}, kRoleSourceGrid));
    fields.push_back(NdarrayField(kSourceCropBoxField, DType::kI64, {2, s}, kRoleSourceGrid));
    if (geometry_dims > 0) {
      const auto g = static_cast<int64_t>(geometry_dims);
      record->geometry = static_cast<int>(fields.size());
      fields.push_back(NdarrayField(kSourceSpacingField, DType::kF64, {g}, kRoleSourceGrid));
      fields.push_back(NdarrayField(kSourceOriginField, DType::kF64, {g}, kRoleSourceGrid));
      fields.push_back(NdarrayField(kSourceDirectionField, DType::kF64, {g * g}, kRoleSourceGrid));
    }
  }
  if (!plan->normalize.empty()) {
    record->normalization = static_cast<int>(fields.size());
    fields.push_back(NdarrayField(std::string(kImageField) + kNormalizationSuffix, DType::kF64, {image_shape[0], 4},
                                  kRoleNormalization));
  }
  return Status::Ok();
}

namespace {

FieldValue I64Array(const std::vector<int64_t>& v, Shape shape) {
  std::vector<uint8_t> b(v.size() * 8);
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());  // little-endian hosts, as ElementAsDouble assumes
  return FieldValue::Array(std::move(b), std::move(shape));
}

}  // namespace

void PutRecord(const RecordFields& f, const SourceRecord& r, std::vector<FieldValue>* values) {
  std::vector<FieldValue>& v = *values;
  if (f.image_dtype >= 0) v[f.image_dtype] = FieldValue::String(DTypeName(r.image_dtype));
  if (f.mask_dtype >= 0) v[f.mask_dtype] = FieldValue::String(DTypeName(r.mask_dtype));
  if (f.shape >= 0) {
    const auto s = static_cast<int64_t>(r.shape.size());
    v[f.shape] = I64Array(r.shape, {s});
    std::vector<int64_t> box = r.crop_start;
    box.insert(box.end(), r.crop_size.begin(), r.crop_size.end());
    v[f.shape + 1] = I64Array(box, {2, s});
  }
  if (f.geometry >= 0) {
    const auto g = static_cast<int64_t>(r.geometry.spacing.size());
    v[f.geometry] = Doubles(r.geometry.spacing, {g});
    v[f.geometry + 1] = Doubles(r.geometry.origin, {g});
    v[f.geometry + 2] = Doubles(r.geometry.direction, {g * g});
  }
  if (f.normalization >= 0) {
    std::vector<double> rows;
    for (const ChannelNorm& n : r.norm) rows.insert(rows.end(), {n.clip_low, n.clip_high, n.mean, n.stddev});
    v[f.normalization] = Doubles(rows, {static_cast<int64_t>(r.norm.size()), 4});
  }
}

namespace {

// The provenance's zscore_region: "nonzero" when every zscore channel normalizes within
// the nonzero region; when only some do, one entry per channel ("nonzero", "all", or "-"
// for other schemes); empty when none does.
std::string ZScoreRegion(const PreprocessPlan& plan) {
  const size_t channels = std::max(plan.normalize.size(), plan.zscore_in_region.size());
  std::string list;
  bool all = true, any = false;
  for (size_t c = 0; c < channels && !plan.normalize.empty(); ++c) {
    const Normalization n = plan.normalize.size() == 1 ? plan.normalize[0] : plan.normalize[c];
    const bool in = n == Normalization::kZScore && plan.InRegion(c);
    all = all && (in || n != Normalization::kZScore);
    any = any || in;
    list += std::string(c ? "," : "") + (n != Normalization::kZScore ? "-" : in ? "nonzero" : "all");
  }
  return !any ? "" : all ? "nonzero" : list;
}

}  // namespace

std::vector<KeyValue> PreprocessProvenance(const PreprocessPlan& plan) {
  const PreprocessOptions& o = plan.options;
  std::vector<KeyValue> out;
  if (o.dtype) out.push_back({"dtype", DTypeName(*o.dtype)});
  if (!o.preset.empty()) out.push_back({"preprocess", o.preset});
  if (o.nan_to_num) out.push_back({"nan_to_num", "true"});
  if (o.crop_nonzero) out.push_back({"crop", "nonzero"});
  if (!plan.spacing.empty()) {
    out.push_back({"spacing", NamedSpacing(plan.spacing)});
    out.push_back({"spacing_rule", o.auto_spacing ? "auto" : o.from_plans ? "plans" : "given"});
    out.push_back({"resample_image", o.image_interp == ImageInterp::kCubic ? "cubic" : "linear"});
    out.push_back({"resample_mask", o.mask_interp == MaskInterp::kLinear ? "linear" : "nearest"});
  }
  if (!plan.normalize.empty()) {
    std::string list;
    for (Normalization n : plan.normalize) list += (list.empty() ? "" : ",") + std::string(NormalizationName(n));
    out.push_back({"normalize", list});
  }
  const std::string region = ZScoreRegion(plan);
  if (!region.empty()) out.push_back({"zscore_region", region});
  if (!plan.ct.empty()) {
    std::string json = "[";
    for (size_t c = 0; c < plan.ct.size(); ++c) {
      const ChannelNorm& n = plan.ct[c];
      json += std::string(c ? "," : "") + "{\"channel\":" + std::to_string(c) + ",\"clip\":[" + Num(n.clip_low) + "," +
              Num(n.clip_high) + "],\"mean\":" + Num(n.mean) + ",\"std\":" + Num(n.stddev) + "}";
    }
    out.push_back({"ct_statistics", json + "]"});
    if (plan.ct_draws > 0) {  // measured here, not given
      out.push_back({"ct_sampling", "{\"cases\":" + std::to_string(plan.ct_cases) +
                                        ",\"draws_per_case\":" + std::to_string(plan.ct_draws) +
                                        ",\"seed\":" + std::to_string(kIntensitySeed) + "}"});
    }
  }
  if (o.from_plans) {
    for (KeyValue& kv : PlansProvenance(*o.from_plans)) out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace detail
}  // namespace shardify::convert
