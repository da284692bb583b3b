// The foreground intensity statistics of --normalize ct (see preprocess_internal.h): a
// first pass over the training split, as nnU-Net's dataset fingerprint. Kept as three
// steps (sample a case, merge samples, the pass) so that a conversion in parts can sample
// its cases and merge everything once.
#include <algorithm>
#include <cmath>

#include "convert/integrity_internal.h"
#include "convert/preprocess_internal.h"
#include "convert/work_internal.h"
#include "format/elements.h"

namespace shardify::convert::detail {

ForegroundSample SampleForeground(const uint8_t* image, DType dtype, const Shape& shape, const uint8_t* mask,
                                  DType mask_dtype, uint64_t mask_channels, uint64_t cap) {
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
  const uint64_t take = std::min(count, cap);
  if (take == 0) return out;
  for (auto& c : out.channels) c.reserve(take);
  // Element k is foreground voxel floor(k * count / take): increasing in k, so one pass.
  uint64_t k = 0, seen = 0;
  auto wanted = [&](uint64_t i) { return static_cast<uint64_t>((static_cast<unsigned __int128>(i) * count) / take); };
  for (uint64_t v = 0; v < voxels && k < take; ++v) {
    if (!foreground(v)) continue;
    if (seen++ != wanted(k)) continue;
    for (uint64_t c = 0; c < channels; ++c)
      out.channels[c].push_back(ElementAsDouble(image + (c * voxels + v) * es, dtype));
    ++k;
  }
  return out;
}

Result<std::vector<ChannelNorm>> MergeForeground(const std::vector<ForegroundSample>& samples, size_t channels) {
  std::vector<ChannelNorm> out(channels);
  for (size_t c = 0; c < channels; ++c) {
    std::vector<double> all;
    for (const ForegroundSample& s : samples) {
      if (c < s.channels.size()) all.insert(all.end(), s.channels[c].begin(), s.channels[c].end());
    }
    if (all.empty()) {
      return InvalidArgument("--normalize ct: channel " + std::to_string(c) +
                             " has no foreground voxels (mask > 0) in the training split");
    }
    double sum = 0;
    for (double x : all) sum += x;
    const double mean = sum / static_cast<double>(all.size());
    double sq = 0;
    for (double x : all) sq += (x - mean) * (x - mean);
    out[c].mean = mean;
    out[c].stddev = std::sqrt(sq / static_cast<double>(all.size()));
    out[c].clip_low = Percentile(all, 0.5);
    out[c].clip_high = Percentile(std::move(all), 99.5);
  }
  return out;
}

Result<CtStatisticsResult> CtStatistics(const CtPass& pass) {
  const size_t n = pass.cases.size();
  if (n == 0) return InvalidArgument("--normalize ct needs masks (the foreground) in the training split; it has none");
  const uint64_t cap = std::max<uint64_t>(1, pass.preprocess->options.intensity_samples / n);
  std::vector<ForegroundSample> samples(n);
  RETURN_IF_ERROR(ParallelFor(n, pass.threads, pass.cancel, "statistics", pass.progress, [&](size_t k) {
    const CaseInput& in = pass.plan->cases[pass.cases[k]];
    // A case that fails to decode fails (or is skipped) again when it is converted; it
    // adds nothing here.
    NoThrow(in.name, [&] {
      Result<CaseData> d = DecodeCase(in, nullptr, pass.max_sample_bytes);
      if (!d.ok() || !d->has_mask) return Status::Ok();
      RETURN_IF_ERROR(CheckFinite(pass.preprocess->options, in, &d->image));
      Shape start, size;
      if (pass.preprocess->options.crop_nonzero) RETURN_IF_ERROR(CropToNonzero(&*d, &start, &size));
      samples[k] =
          SampleForeground(d->image.pixels.data(), d->image.info.dtype, d->image.info.shape, d->mask.pixels.data(),
                           d->mask.info.dtype, static_cast<uint64_t>(d->mask.info.shape[0]), cap);
      return Status::Ok();
    }).IgnoreError();
  }));
  CtStatisticsResult out;
  size_t channels = 0;
  for (const ForegroundSample& s : samples) {
    channels = std::max(channels, s.channels.size());
    out.cases += !s.channels.empty();
  }
  if (channels == 0) return InvalidArgument("--normalize ct: no training case with a mask could be read");
  ASSIGN_OR_RETURN(out.channels, MergeForeground(samples, channels));
  return out;
}

}  // namespace shardify::convert::detail
