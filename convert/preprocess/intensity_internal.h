// The first pass over the training cases (internal; see preprocess.h): what preprocessing
// must know of every training case before it converts one, as nnU-Net's dataset
// fingerprint learns it. For --normalize ct the foreground intensity statistics, drawn as
// the fingerprint draws them; with --crop nonzero and zscore channels, whether cropping
// shrinks the median case enough for nnU-Net's use_mask_for_norm.
// Thread-safe: nothing here keeps state.
#pragma once

#include <atomic>
#include <cstdint>
#include <random>
#include <vector>

#include "convert/convert.h"
#include "convert/preprocess/preprocess_internal.h"

namespace shardify::convert::detail {

// Foreground values of one case, per channel, as nnU-Net's fingerprint draws them: `draws`
// values with replacement from the voxels with mask > 0 (in any mask channel), in memory
// order, whatever their number, so every case weighs the same. The indices are numpy's
// RandomState(kIntensitySeed).choice(count, draws), one generator per case seeded anew,
// whose channels draw one after the other (channel 1 continues where channel 0 stopped).
// A value drawn k times is kept once with count k. A case without foreground gives none.
inline constexpr uint32_t kIntensitySeed = 1234;  // nnU-Net's collect_foreground_intensities
struct WeightedValue {
  double value = 0;
  uint64_t count = 0;
};
struct ForegroundSample {
  std::vector<std::vector<WeightedValue>> channels;
};
// `image` [C, spatial...] of `dtype` (cropped or not), `mask` [mask_channels,
// spatial...] of `mask_dtype` with the same spatial shape.
ForegroundSample SampleForeground(const uint8_t* image, DType dtype, const Shape& shape, const uint8_t* mask,
                                  DType mask_dtype, uint64_t mask_channels, uint64_t draws);
// numpy's RandomState(seed).choice(n, size, replace=True), one index at a time: MT19937
// seeded as numpy seeds an integer, each index by masked rejection over 32 bits (64 when
// n > 2^32, high word first).
class LegacyChoice {
 public:
  explicit LegacyChoice(uint32_t seed);
  uint64_t Next(uint64_t n);  // in [0, n); n > 0

 private:
  std::mt19937 gen_;
};
// One channel's entry of nnU-Net's foreground_intensity_properties_per_channel: numpy's
// statistics of the values drawn (percentiles linear between order statistics, numpy's
// default; std the population's).
struct IntensityProperties {
  double mean = 0, median = 0, std = 0, min = 0, max = 0, percentile_00_5 = 0, percentile_99_5 = 0;
  // --normalize ct's normalization: clipped to the 0.5 and 99.5 percentiles, then z-scored.
  ChannelNorm norm() const { return {percentile_00_5, percentile_99_5, mean, std}; }
};
// The properties of the values of every sample, each as often as it was drawn (numpy's
// statistics of the concatenated draws). A channel without values is an error.
Result<std::vector<IntensityProperties>> MergeForeground(const std::vector<ForegroundSample>& samples, size_t channels);

// nnU-Net's use_mask_for_norm: zscore channels normalize within the nonzero region when
// cropping keeps a median of less than this share of the training cases' voxels.
inline constexpr double kRegionNormBelow = 0.75;

struct FirstPass {
  const SourcePlan* plan;
  // The training cases as the source gives them (nnU-Net: all of imagesTr, whatever
  // --split makes of them), in the source's order.
  std::vector<size_t> cases;
  const PreprocessPlan* preprocess;
  // Whether cases with a mask draw foreground values (false: a dry run, which needs the
  // cropped shapes and the region rule only).
  bool sample = true;
  int threads;
  uint64_t max_sample_bytes;  // per file decoded
  const std::atomic<bool>* cancel;
  ProgressSink* progress;
};
struct FirstPassResult {
  // Per case of FirstPass::cases: its spatial shape after cropping to the nonzero box
  // (empty when it was not read), and why it could not be read (ok when it was, or was not
  // asked to be).
  std::vector<Shape> cropped;
  std::vector<Status> errors;
  // Foreground intensities of every channel, from the cases with a mask that were read,
  // each of which drew draws values per channel; empty when nothing was drawn.
  std::vector<IntensityProperties> intensities;
  size_t intensity_cases = 0;
  uint64_t draws = 0;
  // The median over the cases read of their cropped share of voxels (nnU-Net's
  // median_relative_size_after_cropping).
  double median_kept = 1;
  size_t crop_cases = 0;
};
// Whether nnU-Net's use_mask_for_norm rule decides the zscore region (crop and zscore
// channels, no use_mask_for_norm given).
bool NeedsRegionRule(const PreprocessPlan& plan);
// Whether the dataset gets nnU-Net's fingerprint and plans (plans_internal.h): with
// --preprocess nnunet, unless flags took away what nnU-Net always does (crop, resample).
// They need the foreground intensities of every channel.
bool WritesPlans(const PreprocessPlan& plan);
// Whether the plan needs the first pass: ct channels without given statistics, the region
// rule, --spacing auto (nnU-Net's rule takes the cropped shapes), or WritesPlans.
bool NeedsFirstPass(const PreprocessPlan& plan);
// Decodes every case of `pass.cases` (values as their NIfTI scaling gives them), checks its
// NaN (CheckFinite) and crops it to its nonzero box, whether or not the conversion crops,
// as nnU-Net's fingerprint does; with pass.sample and ct statistics to measure or
// WritesPlans, each case with a mask draws intensity_samples / (cases with a mask) values
// per channel (nnU-Net: 100,000,000 / cases), merged once. The result does not depend on
// pass.threads. A case that cannot be read or fails CheckFinite adds nothing and has its
// error in `errors`.
Result<FirstPassResult> RunFirstPass(const FirstPass& pass);

}  // namespace shardify::convert::detail
