// The first pass over the training cases (see intensity_internal.h): the foreground
// intensity statistics of --normalize ct, drawn as nnU-Net's dataset fingerprint draws
// them (kept as three steps, sample a case, merge samples, the pass, so that a conversion
// in parts can sample its cases and merge everything once), and the share of voxels that
// cropping keeps.
#include <algorithm>
#include <cmath>

#include "convert/pipeline/work_internal.h"
#include "convert/preprocess/integrity_internal.h"
#include "convert/preprocess/intensity_internal.h"
#include "format/elements.h"

namespace shardify::convert::detail {

LegacyChoice::LegacyChoice(uint32_t seed) : gen_(seed) {}

uint64_t LegacyChoice::Next(uint64_t n) {
  const uint64_t top = n - 1;
  if (top == 0) return 0;  // numpy draws nothing
  uint64_t mask = top;
  for (int s = 1; s < 64; s *= 2) mask |= mask >> s;
  for (;;) {
    uint64_t v = gen_();
    if (top > 0xFFFFFFFFu) v = (v << 32) | gen_();
    if ((v & mask) <= top) return v & mask;
  }
}

namespace {

// Ranks (among the foreground voxels) drawn, ascending, each with how often it was drawn.
std::vector<WeightedValue> DrawRanks(LegacyChoice& choice, uint64_t count, uint64_t draws) {
  std::vector<WeightedValue> out;
  if (count <= draws) {  // a count per voxel: no more memory than the draws
    std::vector<uint64_t> times(count, 0);
    for (uint64_t k = 0; k < draws; ++k) ++times[choice.Next(count)];
    for (uint64_t r = 0; r < count; ++r) {
      if (times[r] > 0) out.push_back({static_cast<double>(r), times[r]});
    }
    return out;
  }
  std::vector<uint64_t> ranks(draws);
  for (uint64_t& r : ranks) r = choice.Next(count);
  std::sort(ranks.begin(), ranks.end());
  for (uint64_t r : ranks) {
    if (!out.empty() && out.back().value == static_cast<double>(r)) {
      ++out.back().count;
    } else {
      out.push_back({static_cast<double>(r), 1});
    }
  }
  return out;
}

}  // namespace

ForegroundSample SampleForeground(const uint8_t* image, DType dtype, const Shape& shape, const uint8_t* mask,
                                  DType mask_dtype, uint64_t mask_channels, uint64_t draws) {
  ForegroundSample out;
  const auto channels = static_cast<uint64_t>(shape[0]);
  out.channels.resize(channels);
  uint64_t voxels = 1;
  for (size_t a = 1; a < shape.size(); ++a) voxels *= static_cast<uint64_t>(shape[a]);
  const size_t es = DTypeSize(dtype), ms = DTypeSize(mask_dtype);
  auto foreground = [&](uint64_t v) {
    for (uint64_t c = 0; c < mask_channels; ++c) {
      if (ElementAsDouble(mask + (c * voxels + v) * ms, mask_dtype) > 0) return true;
    }
    return false;
  };
  uint64_t count = 0;
  for (uint64_t v = 0; v < voxels; ++v) count += foreground(v);
  if (count == 0 || draws == 0) return out;
  LegacyChoice choice(kIntensitySeed);  // one generator per case, channel after channel
  for (uint64_t c = 0; c < channels; ++c) {
    const std::vector<WeightedValue> ranks = DrawRanks(choice, count, draws);  // value: the rank
    std::vector<WeightedValue>& values = out.channels[c];
    values.reserve(ranks.size());
    uint64_t rank = 0;
    size_t k = 0;
    for (uint64_t v = 0; v < voxels && k < ranks.size(); ++v) {
      if (!foreground(v)) continue;
      if (static_cast<double>(rank++) != ranks[k].value) continue;
      values.push_back({ElementAsDouble(image + (c * voxels + v) * es, dtype), ranks[k].count});
      ++k;
    }
  }
  return out;
}

namespace {

// numpy's linear percentile of the values sorted ascending, each repeated `count` times
// (`total` in all).
double WeightedPercentile(const std::vector<WeightedValue>& sorted, uint64_t total, double p) {
  const double pos = p / 100.0 * static_cast<double>(total - 1);
  const auto lo = static_cast<uint64_t>(std::floor(pos));
  const uint64_t hi = std::min(lo + 1, total - 1);
  double at_lo = 0, at_hi = 0;
  uint64_t seen = 0;
  for (const WeightedValue& w : sorted) {
    if (seen <= lo && lo < seen + w.count) at_lo = w.value;
    if (seen <= hi && hi < seen + w.count) {
      at_hi = w.value;
      break;
    }
    seen += w.count;
  }
  return at_lo + (at_hi - at_lo) * (pos - static_cast<double>(lo));
}

}  // namespace

Result<std::vector<IntensityProperties>> MergeForeground(const std::vector<ForegroundSample>& samples,
                                                         size_t channels) {
  std::vector<IntensityProperties> out(channels);
  for (size_t c = 0; c < channels; ++c) {
    std::vector<WeightedValue> all;
    for (const ForegroundSample& s : samples) {
      if (c < s.channels.size()) all.insert(all.end(), s.channels[c].begin(), s.channels[c].end());
    }
    uint64_t total = 0;
    double sum = 0;
    for (const WeightedValue& w : all) total += w.count, sum += w.value * static_cast<double>(w.count);
    if (total == 0) {
      return InvalidArgument("channel " + std::to_string(c) +
                             " has no foreground voxels (mask > 0) in the training cases: nothing to take its "
                             "intensity statistics from");
    }
    const double mean = sum / static_cast<double>(total);
    double sq = 0;
    for (const WeightedValue& w : all) sq += (w.value - mean) * (w.value - mean) * static_cast<double>(w.count);
    std::sort(all.begin(), all.end(), [](const WeightedValue& a, const WeightedValue& b) { return a.value < b.value; });
    out[c].mean = mean;
    out[c].std = std::sqrt(sq / static_cast<double>(total));
    out[c].min = all.front().value;
    out[c].max = all.back().value;
    out[c].median = WeightedPercentile(all, total, 50);
    out[c].percentile_00_5 = WeightedPercentile(all, total, 0.5);
    out[c].percentile_99_5 = WeightedPercentile(all, total, 99.5);
  }
  return out;
}

bool NeedsRegionRule(const PreprocessPlan& plan) {
  const bool zscore =
      std::find(plan.normalize.begin(), plan.normalize.end(), Normalization::kZScore) != plan.normalize.end();
  return plan.options.crop_nonzero && zscore && plan.options.use_mask_for_norm.empty();
}

bool WritesPlans(const PreprocessPlan& plan) {
  const PreprocessOptions& o = plan.options;
  return o.preset == "nnunet" && o.crop_nonzero && o.resamples();
}

bool NeedsFirstPass(const PreprocessPlan& plan) {
  return plan.needs_ct_statistics() || NeedsRegionRule(plan) || plan.options.auto_spacing || WritesPlans(plan);
}

namespace {

// Reads one case of the pass: its cropped shape and share of voxels, and its foreground
// draws when `draws` > 0.
Status PassCase(const FirstPass& pass, const CaseInput& in, uint64_t draws, Shape* cropped, double* kept,
                ForegroundSample* sample) {
  ASSIGN_OR_RETURN(CaseData d, DecodeCase(in, nullptr, {pass.max_sample_bytes, true}));
  RETURN_IF_ERROR(CheckFinite(pass.preprocess->options, in, &d.image));
  const Shape spatial(d.image.info.shape.begin() + 1, d.image.info.shape.end());
  Shape start;
  RETURN_IF_ERROR(CropToNonzero(&d, &start, cropped));
  *kept = 1;
  for (size_t a = 0; a < cropped->size(); ++a) {
    *kept *= static_cast<double>((*cropped)[a]) / static_cast<double>(spatial[a]);
  }
  if (draws > 0 && d.has_mask) {
    *sample = SampleForeground(d.image.pixels.data(), d.image.info.dtype, d.image.info.shape, d.mask.pixels.data(),
                               d.mask.info.dtype, static_cast<uint64_t>(d.mask.info.shape[0]), draws);
  }
  return Status::Ok();
}

}  // namespace

Result<FirstPassResult> RunFirstPass(const FirstPass& pass) {
  const size_t n = pass.cases.size();
  const bool ct = pass.preprocess->needs_ct_statistics();
  const bool sample = pass.sample && (ct || WritesPlans(*pass.preprocess));
  size_t with_mask = 0;
  for (size_t i : pass.cases) with_mask += HasMask(pass.plan->cases[i]);
  if (ct && with_mask == 0) {
    return InvalidArgument("--normalize ct needs masks (the foreground) in the training cases; it has none");
  }
  const uint64_t draws =
      sample ? std::max<uint64_t>(1, pass.preprocess->options.intensity_samples / std::max<size_t>(1, with_mask)) : 0;
  FirstPassResult out;
  out.cropped.assign(n, Shape{});
  out.errors.assign(n, Status::Ok());
  std::vector<ForegroundSample> samples(n);
  std::vector<double> kept(n, -1);  // cropped share of voxels; -1: not read
  RETURN_IF_ERROR(ParallelFor(n, pass.threads, pass.cancel, "statistics", pass.progress, [&](size_t k) {
    const CaseInput& in = pass.plan->cases[pass.cases[k]];
    out.errors[k] = NoThrow(in.name, [&] { return PassCase(pass, in, draws, &out.cropped[k], &kept[k], &samples[k]); });
    if (!out.errors[k].ok()) out.cropped[k].clear(), kept[k] = -1, samples[k] = {};
  }));
  out.draws = draws;
  std::vector<double> shares;
  for (double share : kept) {
    if (share >= 0) shares.push_back(share);
  }
  out.crop_cases = shares.size();
  if (!shares.empty()) out.median_kept = Percentile(std::move(shares), 50);
  if (draws == 0) return out;
  size_t channels = 0;
  for (const ForegroundSample& s : samples) {
    channels = std::max(channels, s.channels.size());
    out.intensity_cases += !s.channels.empty();
  }
  if (channels == 0) {
    if (ct) return InvalidArgument("--normalize ct: no training case with a mask could be read");
    return out;
  }
  ASSIGN_OR_RETURN(out.intensities, MergeForeground(samples, channels));
  return out;
}

}  // namespace shardify::convert::detail
