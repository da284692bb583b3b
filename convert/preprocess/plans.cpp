// nnU-Net v2 plans files as preprocessing options (see plans.h). The schema is the one
// nnU-Net's ExperimentPlanner writes and its PlansManager reads; every check here names
// the file and the key.
#include "convert/preprocess/plans.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/checksum.h"
#include "convert/preprocess/plans_internal.h"
#include "convert/sources/source_internal.h"
#include "format/layout.h"

namespace shardify::convert {
namespace {

using Json = nlohmann::ordered_json;

Status Bad(const std::string& file, const std::string& key, const std::string& what) {
  return InvalidArgument(file + ": " + key + ": " + what);
}

Result<Json> ReadJson(const std::string& path, std::string* text) {
  ASSIGN_OR_RETURN(*text, detail::ReadTextFile(path));
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(path + ": not a JSON object");
  return j;
}

std::string Names(const Json& configurations) {
  std::string s;
  for (const auto& [name, value] : configurations.items()) s += (s.empty() ? "" : ", ") + name;
  return s.empty() ? "none" : s;
}

// The configuration `name` with its inherits_from chain resolved as PlansManager does: the
// parent's entries, each replaced by the child's of the same key.
Result<Json> ResolveConfiguration(const std::string& file, const Json& configurations, const std::string& name,
                                  std::vector<std::string> visited = {}) {
  const std::string key = "configurations." + name;
  if (!configurations.contains(name)) {
    return visited.empty()
               ? Bad(file, "configurations", "no configuration '" + name + "' (it has " + Names(configurations) + ")")
               : Bad(file, "configurations." + visited.back() + ".inherits_from",
                     "names '" + name + "', which the plans do not have (they have " + Names(configurations) + ")");
  }
  const Json& config = configurations.at(name);
  if (!config.is_object()) return Bad(file, key, "not an object");
  if (!config.contains("inherits_from")) return config;
  const Json& parent = config.at("inherits_from");
  if (!parent.is_string()) return Bad(file, key + ".inherits_from", "not a configuration name");
  visited.push_back(name);
  const std::string parent_name = parent.get<std::string>();
  if (std::find(visited.begin(), visited.end(), parent_name) != visited.end()) {
    std::string chain;
    for (const std::string& v : visited) chain += v + " -> ";
    return Bad(file, key + ".inherits_from", "circular: " + chain + parent_name);
  }
  ASSIGN_OR_RETURN(Json out, ResolveConfiguration(file, configurations, parent_name, visited));
  for (const auto& [k, v] : config.items()) out[k] = v;
  return out;
}

// transpose_forward, checked to be a permutation of 0, 1, 2 that transpose_backward (when
// given) undoes.
Result<std::vector<int>> Transpose(const std::string& file, const Json& root) {
  std::vector<int> forward;
  const Json* t = root.contains("transpose_forward") ? &root.at("transpose_forward") : nullptr;
  if (t == nullptr) return Bad(file, "transpose_forward", "missing");
  std::vector<bool> seen(3, false);
  bool ok = t->is_array() && t->size() == 3;
  for (size_t i = 0; ok && i < 3; ++i) {
    ok = (*t)[i].is_number_integer() && (*t)[i].get<int64_t>() >= 0 && (*t)[i].get<int64_t>() < 3 &&
         !seen[(*t)[i].get<size_t>()];
    if (ok) seen[(*t)[i].get<size_t>()] = true, forward.push_back((*t)[i].get<int>());
  }
  if (!ok) return Bad(file, "transpose_forward", t->dump() + " is not a permutation of 0, 1, 2");
  if (root.contains("transpose_backward")) {
    const Json& b = root.at("transpose_backward");
    bool inverse = b.is_array() && b.size() == 3;
    for (size_t i = 0; inverse && i < 3; ++i) {
      inverse = b[i].is_number_integer() && b[i].get<int64_t>() >= 0 && b[i].get<int64_t>() < 3 &&
                forward[b[i].get<size_t>()] == static_cast<int>(i);
    }
    if (!inverse) {
      return Bad(file, "transpose_backward", b.dump() + " does not undo transpose_forward " + t->dump());
    }
  }
  return forward;
}

// A configuration entry that nnU-Net lists per axis (after transpose_forward), in array
// axis order: array axis forward[i] takes entry i.
template <typename T>
std::vector<T> Untranspose(const std::vector<T>& v, const std::vector<int>& forward) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[static_cast<size_t>(forward[i])] = v[i];
  return out;
}

Result<std::vector<double>> Spacing(const std::string& file, const std::string& key, const Json& config) {
  if (!config.contains("spacing")) return Bad(file, key, "missing");
  const Json& s = config.at("spacing");
  if (!s.is_array()) return Bad(file, key, "not a list of spacings");
  if (s.size() == 2) {
    return Bad(file, key, s.dump() + " has 2 entries: a 2D configuration; shardify applies 3D ones (3d_fullres)");
  }
  if (s.size() != 3) return Bad(file, key, s.dump() + " has " + std::to_string(s.size()) + " entries, expected 3");
  std::vector<double> out;
  for (const Json& v : s) {
    const double d = v.is_number() ? v.get<double>() : NAN;
    if (!(d >= kMinSpacingMm && d <= kMaxSpacingMm)) {
      return Bad(file, key, s.dump() + ": " + v.dump() + " is not a spacing in 1e-06..1e+06 mm");
    }
    out.push_back(d);
  }
  return out;
}

Result<Shape> PatchSize(const std::string& file, const std::string& key, const Json& config) {
  if (!config.contains("patch_size")) return Shape{};
  const Json& p = config.at("patch_size");
  Shape out;
  for (size_t i = 0; p.is_array() && i < p.size(); ++i) {
    if (p[i].is_number_integer() && p[i].get<int64_t>() > 0) out.push_back(p[i].get<int64_t>());
  }
  if (!p.is_array() || p.size() != 3 || out.size() != 3) {
    return Bad(file, key, p.dump() + " is not 3 positive voxel counts");
  }
  return out;
}

// nnU-Net's normalization class names, and what each is here.
Result<Normalization> Scheme(const std::string& file, const std::string& key, const Json& name) {
  const std::string n = name.is_string() ? name.get<std::string>() : name.dump();
  if (n == "ZScoreNormalization") return Normalization::kZScore;
  if (n == "CTNormalization") return Normalization::kCt;
  if (n == "NoNormalization") return Normalization::kNone;
  if (n == "RescaleTo01Normalization" || n == "RGBTo01Normalization") {
    return Bad(file, key,
               n + " has no counterpart in shardify (it has ZScoreNormalization, CTNormalization, "
                   "NoNormalization)");
  }
  return Bad(file, key,
             "unknown normalization scheme '" + n +
                 "' (nnU-Net's are ZScoreNormalization, CTNormalization, NoNormalization, RescaleTo01Normalization, "
                 "RGBTo01Normalization)");
}

struct Norms {
  std::vector<Normalization> schemes;
  std::vector<bool> use_mask;
};

Result<Norms> Normalizations(const std::string& file, const std::string& key, const Json& config) {
  Norms out;
  const Json* s = config.contains("normalization_schemes") ? &config.at("normalization_schemes") : nullptr;
  if (s == nullptr || !s->is_array() || s->empty()) {
    return Bad(file, key + ".normalization_schemes", "missing or not a list of scheme names");
  }
  for (size_t c = 0; c < s->size(); ++c) {
    ASSIGN_OR_RETURN(const Normalization n, Scheme(file, key + ".normalization_schemes", (*s)[c]));
    out.schemes.push_back(n);
  }
  const Json* m = config.contains("use_mask_for_norm") ? &config.at("use_mask_for_norm") : nullptr;
  bool ok = m != nullptr && m->is_array() && m->size() == s->size();
  for (size_t c = 0; ok && c < m->size(); ++c) {
    ok = (*m)[c].is_boolean();
    if (ok) out.use_mask.push_back((*m)[c].get<bool>());
  }
  if (!ok) {
    return Bad(file, key + ".use_mask_for_norm",
               (m == nullptr ? std::string("missing") : m->dump()) + ": expected " + std::to_string(s->size()) +
                   " true/false, one per normalization scheme");
  }
  return out;
}

// The interpolation order of a resampling function's kwargs, checked against what
// shardify has: nnU-Net's resample_data_or_seg_to_shape with order_z 0 and
// force_separate_z null (absent keys take that function's defaults: order 3, order_z 0,
// is_seg false, force_separate_z false).
Result<int64_t> Order(const std::string& file, const std::string& key, const Json& config, bool seg) {
  const std::string fn_key = seg ? "resampling_fn_seg" : "resampling_fn_data";
  if (config.contains(fn_key)) {
    const Json& fn = config.at(fn_key);
    const std::string name = fn.is_string() ? fn.get<std::string>() : fn.dump();
    if (name != "resample_data_or_seg_to_shape" && name != "resample_data_or_seg_to_spacing") {
      return Bad(file, key + "." + fn_key, "'" + name + "' has no counterpart (resample_data_or_seg_to_shape has)");
    }
  }
  const std::string kw_key = key + "." + fn_key + "_kwargs";
  const Json* kw = config.contains(fn_key + "_kwargs") ? &config.at(fn_key + "_kwargs") : nullptr;
  if (kw == nullptr || !kw->is_object()) return Bad(file, kw_key, "missing or not an object");
  const bool is_seg = kw->contains("is_seg") && kw->at("is_seg").is_boolean() && kw->at("is_seg").get<bool>();
  if (is_seg != seg) return Bad(file, kw_key + ".is_seg", seg ? "must be true for masks" : "must be false for images");
  const int64_t order = !kw->contains("order")                ? 3
                        : kw->at("order").is_number_integer() ? kw->at("order").get<int64_t>()
                                                              : -1;
  const bool known = seg ? (order == 0 || order == 1) : (order == 1 || order == 3);
  if (!known) {
    return Bad(file, kw_key + ".order",
               (kw->contains("order") ? kw->at("order").dump() : "3 (absent)") + " has no counterpart (" +
                   (seg ? "masks: 1 per-label linear, 0 nearest)" : "images: 3 cubic, 1 linear)"));
  }
  if (kw->contains("order_z") && !(kw->at("order_z").is_number_integer() && kw->at("order_z").get<int64_t>() == 0)) {
    return Bad(file, kw_key + ".order_z", kw->at("order_z").dump() + ": only 0 (nearest along the coarse axis)");
  }
  if (!kw->contains("force_separate_z") || !kw->at("force_separate_z").is_null()) {
    return Bad(file, kw_key + ".force_separate_z",
               (kw->contains("force_separate_z") ? kw->at("force_separate_z").dump() : "absent (false)") +
                   ": only null (nnU-Net's anisotropy rule decides)");
  }
  return order;
}

// The foreground intensity statistics of channel `c`: the plans' own, or those of
// dataset_fingerprint.json beside the plans file; `from` names the file used.
Result<ChannelNorm> Statistics(const std::string& path, const Json& root, size_t c, std::string* from) {
  const char* keys[] = {"foreground_intensity_properties_per_channel", "foreground_intensity_properties_by_modality"};
  std::string file = path, key;
  Json holder;
  for (const char* k : keys) {
    if (key.empty() && root.contains(k)) key = k, holder = root.at(k);
  }
  if (key.empty()) {
    file = (std::filesystem::path(path).parent_path() / detail::kFingerprintFile).string();
    std::string text;
    Result<Json> fp = ReadJson(file, &text);
    if (!fp.ok()) {
      return Bad(path, keys[0], "missing, and " + fp.status().message() + " (a ct channel needs the statistics)");
    }
    key = keys[0];
    if (!fp->contains(key)) return Bad(file, key, "missing (a ct channel needs the statistics)");
    holder = fp->at(key);
  }
  *from = std::filesystem::path(file).filename().string();
  const std::string ch = std::to_string(c);
  if (!holder.is_object() || !holder.contains(ch) || !holder.at(ch).is_object()) {
    return Bad(file, key + "." + ch, "missing (channel " + ch + " is normalized as CT)");
  }
  const Json& p = holder.at(ch);
  double v[4];
  const char* names[] = {"percentile_00_5", "percentile_99_5", "mean", "std"};
  for (int i = 0; i < 4; ++i) {
    if (!p.contains(names[i]) || !p.at(names[i]).is_number() || !std::isfinite(p.at(names[i]).get<double>())) {
      return Bad(file, key + "." + ch + "." + names[i], "missing or not a finite number");
    }
    v[i] = p.at(names[i]).get<double>();
  }
  ChannelNorm n;
  n.clip_low = v[0], n.clip_high = v[1], n.mean = v[2], n.stddev = v[3];
  return n;
}

// Plans-wide entries that say nnU-Net would preprocess otherwise than shardify can.
Status CheckMachinery(const std::string& file, const std::string& key, const Json& root, const Json& config) {
  if (config.contains("preprocessor_name") && config.at("preprocessor_name") != "DefaultPreprocessor") {
    return Bad(file, key + ".preprocessor_name",
               config.at("preprocessor_name").dump() + ": only DefaultPreprocessor has a counterpart");
  }
  if (root.contains("image_reader_writer")) {
    const Json& rw = root.at("image_reader_writer");
    if (!rw.is_string() || rw.get<std::string>().find("Reorient") != std::string::npos) {
      return Bad(
          file, "image_reader_writer",
          rw.dump() + " reorients the images; shardify keeps each source's orientation (SimpleITKIO, NibabelIO)");
    }
  }
  return Status::Ok();
}

std::string Text(const Json& root, const char* key) {
  return root.contains(key) && root.at(key).is_string() ? root.at(key).get<std::string>() : "";
}

}  // namespace

Status ApplyPlans(ConvertOptions* o) {
  PreprocessOptions& p = o->preprocess;
  const std::string file = p.plans_file, name = p.plans_configuration;
  std::string text;
  ASSIGN_OR_RETURN(const Json root, ReadJson(file, &text));
  if (!root.contains("configurations") || !root.at("configurations").is_object()) {
    return Bad(file, "configurations", "missing (not an nnU-Net v2 plans file)");
  }
  ASSIGN_OR_RETURN(const Json config, ResolveConfiguration(file, root.at("configurations"), name));
  const std::string key = "configurations." + name;
  RETURN_IF_ERROR(CheckMachinery(file, key, root, config));
  ASSIGN_OR_RETURN(const std::vector<int> forward, Transpose(file, root));
  ASSIGN_OR_RETURN(const std::vector<double> spacing, Spacing(file, key + ".spacing", config));
  ASSIGN_OR_RETURN(const Shape patch, PatchSize(file, key + ".patch_size", config));
  ASSIGN_OR_RETURN(const Norms norms, Normalizations(file, key, config));
  ASSIGN_OR_RETURN(const int64_t image_order, Order(file, key, config, false));
  ASSIGN_OR_RETURN(const int64_t mask_order, Order(file, key, config, true));
  PlansIdentity id;
  id.file = std::filesystem::path(file).filename().string();
  id.checksum = Hex64(Checksum64(text.data(), text.size()));
  id.dataset_name = Text(root, "dataset_name");
  id.plans_name = Text(root, "plans_name");
  id.configuration = name;
  id.transpose_forward = forward;
  // Every channel's statistics where given (recorded as --normalize ct records them); a ct
  // channel's are required.
  std::vector<ChannelNorm> ct(norms.schemes.size());
  bool any_ct = false;
  for (size_t c = 0; c < norms.schemes.size(); ++c) {
    const bool needed = norms.schemes[c] == Normalization::kCt;
    std::string from;
    Result<ChannelNorm> n = Statistics(file, root, c, &from);
    if (!n.ok() && needed) return n.status();
    if (n.ok()) ct[c] = *n;
    if (needed) any_ct = true, id.statistics = from;
  }
  p.crop_nonzero = true;
  p.spacing = Untranspose(spacing, forward);
  p.auto_spacing = false;
  p.normalize = norms.schemes;
  p.normalize_by_channel_names = false;
  p.use_mask_for_norm = norms.use_mask;
  p.ct_statistics = any_ct ? ct : std::vector<ChannelNorm>{};
  p.image_interp = image_order == 3 ? ImageInterp::kCubic : ImageInterp::kLinear;
  p.mask_interp = mask_order == 1 ? MaskInterp::kLinear : MaskInterp::kNearest;
  p.preset.clear();
  p.plans_file.clear();
  p.from_plans = id;
  if (!patch.empty()) o->patch_size = Untranspose(patch, forward);
  return Status::Ok();
}

namespace detail {
namespace {

std::string Axes(const std::vector<int>& transpose) {
  std::string s;
  for (int a : transpose) s += (s.empty() ? "" : ",") + std::to_string(a);
  return s;
}

}  // namespace

void PlansNotes(const PreprocessPlan& plan, std::vector<std::string>* notes) {
  const PlansIdentity& id = *plan.options.from_plans;
  notes->push_back("nnU-Net plans " + id.file + " (" + id.plans_name + ", " + id.dataset_name + "), configuration " +
                   id.configuration + ", xxh3 " + id.checksum + "; its axes mapped back through transpose_forward " +
                   Axes(id.transpose_forward) + ": arrays stay z, y, x");
  for (size_t c = 0; c < plan.normalize.size(); ++c) {
    if (plan.normalize[c] == Normalization::kZScore) {
      notes->push_back("zscore of channel " + std::to_string(c) +
                       (plan.InRegion(c) ? " within the nonzero region, 0 outside" : " over every voxel") +
                       " (the plans' use_mask_for_norm)");
    }
    if (plan.normalize[c] != Normalization::kCt || c >= plan.ct.size()) continue;
    const ChannelNorm& n = plan.ct[c];
    char line[256];
    std::snprintf(line, sizeof line, "ct statistics of channel %zu from %s: clip [%g, %g], mean %g, std %g", c,
                  id.statistics.c_str(), n.clip_low, n.clip_high, n.mean, n.stddev);
    notes->push_back(line);
  }
}

std::vector<KeyValue> PlansProvenance(const PlansIdentity& id) {
  std::vector<KeyValue> out = {{"plans", id.file},
                               {"plans_xxh3", id.checksum},
                               {"plans_name", id.plans_name},
                               {"plans_dataset", id.dataset_name},
                               {"plans_configuration", id.configuration},
                               {"plans_transpose_forward", Axes(id.transpose_forward)}};
  if (!id.statistics.empty()) out.push_back({"plans_statistics", id.statistics});
  return out;
}

}  // namespace detail
}  // namespace shardify::convert
