// nnU-Net's augmentation: the table, the options, and the draws of a batch. The host's
// transforms are in augment_host.cpp, the device's in trainer/augment_apply.cpp.
#include "reader/augment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/step_rng.h"
#include "base/strings.h"

namespace shardify {

namespace {

constexpr double kPi = 3.14159265358979323846;
// nnU-Net reads (patch bounding box under rotation) / 0.85: room for scales down to 0.85
// without padding; larger scales (to 1.4) reach into the padding, as in nnU-Net.
constexpr double kMarginScale = 0.85;
// A 3D patch whose largest axis exceeds this many times its first is augmented in-plane.
constexpr double kAnisotropyThreshold = 3.0;

// Largest extent along one axis of a box of sides a (that axis) and b (the other axis of
// the rotation plane) rotated by up to `theta`.
double RotatedExtent(double a, double b, double theta) {
  theta = std::min(std::abs(theta), kPi / 2);
  if (std::atan2(b, a) <= theta) return std::hypot(a, b);
  return a * std::cos(theta) + b * std::sin(theta);
}

double DrawValue(StepRng& rng, const AugTransformInfo& t) {
  if (t.split_at_one && t.lo < 1 && rng.Coin()) return rng.Uniform(t.lo, 1);
  return rng.Uniform(t.split_at_one ? std::max(t.lo, 1.0) : t.lo, t.hi);
}

}  // namespace

const std::array<AugTransformInfo, kNumAugTransforms>& AugTransforms() {
  static const std::array<AugTransformInfo, kNumAugTransforms> table = {{
      {"rotate", 0.2, 1, -30, 30, false,
       "degrees about each axis (2D and in-plane 3D: +-180, +-15 for 2D patches of aspect > 1.5)"},
      {"scale", 0.2, 1, 0.7, 1.4, false, "zoom factor, all axes alike (> 1 shows more: objects smaller)"},
      {"noise", 0.1, 1, 0, 0.1, false, "std of added Gaussian noise, one field per channel"},
      {"blur", 0.2, 0.5, 0.5, 1.0, false, "Gaussian sigma in voxels, per channel and axis"},
      {"brightness", 0.15, 1, 0.75, 1.25, true, "multiplier per channel"},
      {"contrast", 0.15, 1, 0.75, 1.25, true, "factor about the channel mean, clipped to its range"},
      {"lowres", 0.25, 0.5, 0.5, 1.0, false, "downsampling factor (nearest down, linear up) per channel"},
      {"gamma_inv", 0.1, 1, 0.7, 1.5, true, "gamma of the inverted channel, mean and std kept"},
      {"gamma", 0.3, 1, 0.7, 1.5, true, "gamma of the channel, mean and std kept"},
      {"mirror", 0.5, 1, 0, 0, false, "flip, drawn for each spatial axis"},
  }};
  return table;
}

std::string AugTransformsText() {
  std::string out = "transform    p      p/channel  range          parameter (p: per sample)\n";
  char line[256];
  for (const AugTransformInfo& t : AugTransforms()) {
    char range[64] = "-";
    if (t.lo != t.hi) std::snprintf(range, sizeof range, "%g..%g", t.lo, t.hi);
    std::snprintf(line, sizeof line, "%-12s %-6g %-10g %-14s %s\n", t.name, t.probability, t.channel_probability, range,
                  t.parameter);
    out += line;
  }
  out.pop_back();  // no newline after the last row
  return out;
}

Result<MaskMode> ParseMaskMode(const std::string& name) {
  if (name == "linear") return MaskMode::kLinear;
  if (name == "nearest") return MaskMode::kNearest;
  return InvalidArgument("mask mode '" + name + "': use linear or nearest");
}

const char* MaskModeName(MaskMode mode) { return mode == MaskMode::kLinear ? "linear" : "nearest"; }

std::vector<int64_t> MaskImageChannels(const std::string& zscore_region, const std::string& normalize,
                                       int64_t channels) {
  const std::vector<std::string> region = SplitComma(zscore_region), schemes = SplitComma(normalize);
  auto entry = [](const std::vector<std::string>& list, size_t c, const std::string& none) {
    return list.empty() ? none : list.size() == 1 ? list[0] : c < list.size() ? list[c] : "";
  };
  std::vector<int64_t> out;
  for (int64_t c = 0; c < channels; ++c) {
    const auto k = static_cast<size_t>(c);
    const bool masked = region.size() > 1
                            ? entry(region, k, "") == "nonzero"
                            : entry(region, k, "") == "nonzero" && entry(schemes, k, "zscore") == "zscore";
    if (masked) out.push_back(c);
  }
  return out;
}

NnUnetAugmentOptions::NnUnetAugmentOptions() {
  for (size_t t = 0; t < kNumAugTransforms; ++t) probability[t] = AugTransforms()[t].probability;
}

Status ParseAugProbabilities(const std::string& spec, NnUnetAugmentOptions* options) {
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    double p = -1;
    size_t used = 0;
    try {
      if (eq != std::string::npos) p = std::stod(item.substr(eq + 1), &used);
    } catch (const std::exception&) {
      p = -1;
    }
    if (eq == std::string::npos || used != item.size() - eq - 1 || !(p >= 0 && p <= 1)) {
      return InvalidArgument("augmentation probability '" + item + "': expected NAME=P with P in [0, 1]");
    }
    bool known = name == "all";
    for (size_t t = 0; t < kNumAugTransforms; ++t) {
      if (name == "all" || name == AugTransforms()[t].name) {
        options->probability[t] = p;
        known = true;
      }
    }
    if (!known) {
      std::string names;
      for (const AugTransformInfo& t : AugTransforms()) names += std::string(names.empty() ? "" : ", ") + t.name;
      return InvalidArgument("augmentation probability '" + item + "': unknown transform '" + name +
                             "' (known: " + names + ", all)");
    }
  }
  return Status::Ok();
}

Result<NnUnetAugment> NnUnetAugment::Create(std::vector<int64_t> patch, NnUnetAugmentOptions options) {
  if (patch.size() != 2 && patch.size() != 3) {
    return InvalidArgument("augmentation needs a 2D or 3D patch, not " + std::to_string(patch.size()) + " axes");
  }
  for (int64_t p : patch) {
    if (p < 1) return InvalidArgument("augmentation patch sizes must be >= 1");
  }
  for (double p : options.probability) {
    if (!(p >= 0 && p <= 1)) return InvalidArgument("augmentation probabilities must be in [0, 1]");
  }
  for (int64_t c : options.mask_image_channels.value_or(std::vector<int64_t>{})) {
    if (c < 0) return InvalidArgument("augmentation: masked image channel " + std::to_string(c) + " is negative");
  }
  NnUnetAugment a;
  a.patch_ = std::move(patch);
  a.options_ = options;
  const std::vector<int64_t>& p = a.patch_;
  const int64_t largest = *std::max_element(p.begin(), p.end());
  if (p.size() == 3) {
    a.in_plane_ = double(largest) / double(p[0]) > kAnisotropyThreshold;
    a.max_angle_ = (a.in_plane_ ? 180.0 : AugTransforms()[AugIndex(AugTransform::kRotate)].hi) * kPi / 180;
  } else {
    const int64_t smallest = std::min(p[0], p[1]);
    a.max_angle_ = (double(largest) / double(smallest) > 1.5 ? 15.0 : 180.0) * kPi / 180;
  }
  a.margin_.assign(p.size(), 0);
  const bool spatial = options.probability[AugIndex(AugTransform::kRotate)] > 0 ||
                       options.probability[AugIndex(AugTransform::kScale)] > 0;
  if (!options.margin || !spatial) return a;
  const double theta = options.probability[AugIndex(AugTransform::kRotate)] > 0 ? a.max_angle_ : 0;
  const size_t n = p.size();
  for (size_t i = a.in_plane_ ? 1 : 0; i < n; ++i) {
    double extent = double(p[i]);
    for (size_t j = a.in_plane_ ? 1 : 0; j < n; ++j) {  // rotations in the plane (i, j)
      if (j != i) extent = std::max(extent, RotatedExtent(double(p[i]), double(p[j]), theta));
    }
    a.margin_[i] = static_cast<int64_t>(std::ceil((extent / kMarginScale - double(p[i])) / 2));
  }
  return a;
}

AugmentPlan NnUnetAugment::Draw(int64_t batch, int64_t channels, uint64_t epoch, uint64_t step) const {
  AugmentPlan plan;
  plan.batch = batch;
  plan.channels = channels;
  const auto b = static_cast<size_t>(batch), bc = static_cast<size_t>(batch * channels);
  const size_t rank = patch_.size();
  plan.angles.assign(b, {0, 0, 0});
  plan.scale.assign(b, 1);
  plan.noise_sigma.assign(b, 0);
  plan.blur_sigma.assign(bc, {0, 0, 0});
  for (auto* v : {&plan.brightness, &plan.contrast, &plan.low_res, &plan.gamma_inverted, &plan.gamma}) v->assign(bc, 1);
  plan.mirror.assign(b, {false, false, false});
  std::array<std::vector<double>*, kNumAugTransforms> per_channel{};
  per_channel[AugIndex(AugTransform::kBrightness)] = &plan.brightness;
  per_channel[AugIndex(AugTransform::kContrast)] = &plan.contrast;
  per_channel[AugIndex(AugTransform::kLowRes)] = &plan.low_res;
  per_channel[AugIndex(AugTransform::kGammaInverted)] = &plan.gamma_inverted;
  per_channel[AugIndex(AugTransform::kGamma)] = &plan.gamma;
  for (size_t t = 0; t < kNumAugTransforms; ++t) {
    const AugTransformInfo& info = AugTransforms()[t];
    const auto id = static_cast<AugTransform>(t);
    StepRng rng(options_.seed, epoch, step, t + 1);  // one stream per transform
    plan.applied[t].assign(b, false);
    for (size_t s = 0; s < b; ++s) {
      if (id == AugTransform::kMirror) {
        for (size_t a = 0; a < rank; ++a) plan.mirror[s][a] = rng.Bernoulli(options_.probability[t]);
        plan.applied[t][s] = plan.mirror[s][0] || plan.mirror[s][1] || plan.mirror[s][2];
        continue;
      }
      if (!rng.Bernoulli(options_.probability[t])) continue;
      plan.applied[t][s] = true;
      if (id == AugTransform::kRotate) {
        const size_t axes = rank == 3 && !in_plane_ ? 3 : 1;
        for (size_t a = 0; a < axes; ++a) plan.angles[s][a] = rng.Uniform(-max_angle_, max_angle_);
      } else if (id == AugTransform::kScale) {
        plan.scale[s] = DrawValue(rng, info);
      } else if (id == AugTransform::kNoise) {
        plan.noise_sigma[s] = DrawValue(rng, info);
      } else {
        for (size_t c = s * size_t(channels); c < (s + 1) * size_t(channels); ++c) {
          if (!rng.Bernoulli(info.channel_probability)) continue;
          if (id == AugTransform::kBlur) {
            for (size_t a = 0; a < rank; ++a) plan.blur_sigma[c][a] = DrawValue(rng, info);
          } else {
            (*per_channel[t])[c] = DrawValue(rng, info);
          }
        }
      }
    }
    if (id == AugTransform::kNoise) plan.noise_seed = rng.Next();
  }
  return plan;
}

std::array<std::array<double, 3>, 3> NnUnetAugment::SpatialMatrix(const AugmentPlan& plan, int64_t b) const {
  const size_t rank = patch_.size(), s = static_cast<size_t>(b);
  std::array<std::array<double, 3>, 3> m{};
  for (size_t i = 0; i < rank; ++i) m[i][i] = 1;
  auto rotate = [&](size_t i, size_t j, double a) {  // m = m * R(a) in the plane (i, j)
    for (size_t r = 0; r < rank; ++r) {
      const double u = m[r][i], v = m[r][j];
      m[r][i] = u * std::cos(a) + v * std::sin(a);
      m[r][j] = -u * std::sin(a) + v * std::cos(a);
    }
  };
  const std::array<double, 3>& angles = plan.angles[s];
  if (rank == 2) {
    rotate(0, 1, angles[0]);
  } else {
    rotate(1, 2, angles[0]);
    if (!in_plane_) {
      rotate(0, 2, angles[1]);
      rotate(0, 1, angles[2]);
    }
  }
  for (size_t r = 0; r < rank; ++r) {
    for (size_t c = 0; c < rank; ++c) m[r][c] *= (in_plane_ && c == 0) ? 1 : plan.scale[s];
  }
  return m;
}

}  // namespace shardify
