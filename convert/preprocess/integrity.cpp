// Checks of a dataset's values before preprocessing (see integrity_internal.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "convert/pipeline/work_internal.h"
#include "convert/preprocess/integrity_internal.h"
#include "format/elements.h"

namespace shardify::convert::detail {
namespace {

bool IsFloat(DType t) { return t == DType::kF16 || t == DType::kF32 || t == DType::kF64; }

struct NonFinite {
  uint64_t nan = 0, inf = 0;
};

// Counts (and with `zero`, zeroes) the NaN and infinite elements of n elements at `p`.
NonFinite ScanChannel(uint8_t* p, DType t, uint64_t n, bool zero) {
  NonFinite c;
  const size_t es = DTypeSize(t);
  for (uint64_t i = 0; i < n; ++i, p += es) {
    double v = 0;
    if (t == DType::kF32) {
      float f;
      std::memcpy(&f, p, sizeof f);
      v = f;
    } else {
      v = ElementAsDouble(p, t);
    }
    if (std::isfinite(v)) continue;
    ++(std::isnan(v) ? c.nan : c.inf);
    if (zero) std::memset(p, 0, es);
  }
  return c;
}

// The file channel `c` of a case came from: its own file when each has one channel.
std::string ChannelSource(const CaseInput& in, int64_t channels, int64_t c) {
  if (static_cast<int64_t>(in.images.size()) == channels) return in.images[static_cast<size_t>(c)];
  const std::string where = in.images.size() == 1 ? in.images[0] : in.name;
  return where + " (channel " + std::to_string(c) + ")";
}

}  // namespace

Status CheckFinite(const PreprocessOptions& o, const CaseInput& in, DecodedImage* image) {
  const DType t = image->info.dtype;
  const bool spreads = o.normalizes() || o.resamples();
  if (!IsFloat(t) || !(o.nan_to_num || spreads) || image->info.shape.empty()) return Status::Ok();
  const int64_t channels = image->info.shape[0];
  const uint64_t voxels = channels > 0 ? image->pixels.size() / DTypeSize(t) / static_cast<uint64_t>(channels) : 0;
  std::string found;
  for (int64_t c = 0; c < channels; ++c) {
    uint8_t* p = image->pixels.data() + static_cast<uint64_t>(c) * voxels * DTypeSize(t);
    const NonFinite n = ScanChannel(p, t, voxels, o.nan_to_num);
    if (n.nan + n.inf == 0 || o.nan_to_num) continue;
    found += (found.empty() ? "" : "; ") + ChannelSource(in, channels, c) + ": " + std::to_string(n.nan) + " NaN and " +
             std::to_string(n.inf) + " infinite voxel(s) of " + std::to_string(voxels);
  }
  if (found.empty()) return Status::Ok();
  return InvalidArgument(found +
                         "; normalizing or resampling would spread them over the channel (--nan-to-num makes them 0)");
}

namespace {

std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// The values of one mask that `declared` lacks, ascending (NaN last), at most
// kMaxUndeclaredLabels + 1 of them.
std::vector<double> Undeclared(const DecodedImage& mask, const std::vector<int64_t>& declared) {
  const DType t = mask.info.dtype;
  const size_t es = DTypeSize(t);
  std::set<double> found;
  bool nan = false;
  double known = 0;  // the last declared value seen: masks are mostly runs of one value
  bool have_known = false;
  for (size_t i = 0; i + es <= mask.pixels.size() && found.size() <= kMaxUndeclaredLabels; i += es) {
    const double v = ElementAsDouble(&mask.pixels[i], t);
    if (have_known && v == known) continue;
    if (std::isnan(v)) {
      nan = true;
    } else if (std::floor(v) == v && std::fabs(v) < 9e18 &&
               std::binary_search(declared.begin(), declared.end(), static_cast<int64_t>(v))) {
      known = v, have_known = true;
    } else {
      found.insert(v);
    }
  }
  std::vector<double> out(found.begin(), found.end());
  if (nan) out.push_back(NAN);
  return out;
}

std::string List(const std::vector<double>& v, size_t most) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + Num(v[i]);
  if (v.size() > most) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

// Adds "label_<v>": v to the labels JSON object for every value of `values`.
Status Adopt(const std::vector<double>& values, SourcePlan* plan, std::vector<std::string>* warnings) {
  nlohmann::ordered_json labels = nlohmann::ordered_json::parse(plan->mask_labels_json, nullptr, false);
  if (!labels.is_object()) return Internal("mask labels are not a JSON object");
  for (double v : values) {
    std::string name = "label_" + Num(v);
    while (labels.contains(name)) name += "_";
    labels[name] = static_cast<int64_t>(v);
    plan->declared_mask_values.push_back(static_cast<int64_t>(v));
  }
  std::sort(plan->declared_mask_values.begin(), plan->declared_mask_values.end());
  plan->mask_labels_json = labels.dump();
  warnings->push_back("mask values " + List(values, 20) +
                      " are not declared in dataset.json; added as labels label_<value> (--labels-from-masks)");
  return Status::Ok();
}

}  // namespace

Status CheckMaskLabels(SourcePlan* plan, const std::vector<bool>& ok, const LabelCheck& c,
                       std::vector<std::string>* warnings) {
  if (plan->declared_mask_values.empty()) return Status::Ok();
  std::vector<size_t> cases;
  for (size_t i = 0; i < plan->cases.size(); ++i) {
    if (ok[i] && !plan->cases[i].mask.empty()) cases.push_back(i);
  }
  std::vector<std::vector<double>> found(cases.size());
  RETURN_IF_ERROR(ParallelFor(cases.size(), c.threads, c.cancel, "labels", c.progress, [&](size_t k) {
    const std::string& path = plan->cases[cases[k]].mask;
    NoThrow(path, [&] {
      Result<DecodedImage> mask = ReadImage(path, nullptr, c.max_bytes);
      if (mask.ok() && c.scaled && !ScaleImage(path, &*mask).ok()) return Status::Ok();  // fails on conversion
      if (mask.ok()) found[k] = Undeclared(*mask, plan->declared_mask_values);
      return Status::Ok();
    }).IgnoreError();
  }));
  std::set<double> all;
  bool nan = false, fractional = false;
  size_t masks = 0;
  std::string first;
  for (size_t k = 0; k < cases.size(); ++k) {
    if (found[k].empty()) continue;
    const std::string& path = plan->cases[cases[k]].mask;
    if (found[k].size() > kMaxUndeclaredLabels) {
      return InvalidArgument(path + ": more than " + std::to_string(kMaxUndeclaredLabels) +
                             " distinct values that dataset.json's labels do not declare: not a label map");
    }
    if (++masks <= 3) first += (first.empty() ? "" : ", ") + path + " (" + List(found[k], 8) + ")";
    for (double v : found[k]) {
      nan = nan || std::isnan(v);
      fractional = fractional || (!std::isnan(v) && std::floor(v) != v);
      if (!std::isnan(v)) all.insert(v);
    }
  }
  if (masks == 0) return Status::Ok();
  std::vector<double> values(all.begin(), all.end());
  if (nan) values.push_back(NAN);
  std::vector<double> declared(plan->declared_mask_values.begin(), plan->declared_mask_values.end());
  if (c.adopt && !nan && !fractional) return Adopt(values, plan, warnings);
  return InvalidArgument("masks hold values that dataset.json's labels (" + List(declared, 20) +
                         ") do not declare: " + List(values, 20) + ", in " + std::to_string(masks) + " of " +
                         std::to_string(cases.size()) + " masks, first " + first +
                         "; training would ignore those voxels. Fix the masks or dataset.json" +
                         (nan || fractional ? " (values that are not integers cannot become labels)"
                                            : ", or pass --labels-from-masks to add them as labels"));
}

}  // namespace shardify::convert::detail
