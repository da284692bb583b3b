// Preprocessing inside the pipeline (internal; options and their meaning: preprocess.h).
//
//   PlanPreprocessing   resolves the target spacing and predicts each case's output grid,
//                       so the schema and the chunk shapes fit what will be written;
//   FinishSchema        sets the fields' dtypes and appends the record fields;
//   CtStatistics        the first pass over the training split (--normalize ct);
//   PreprocessCase      transforms one decoded case and fills its record;
//   PutRecord           writes the record into the sample's values.
// Everything here is deterministic and thread-safe (plans are read only).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convert/case.h"
#include "convert/convert.h"
#include "convert/preprocess.h"
#include "format/manifest.h"
#include "format/writer.h"

namespace shardify::convert::detail {

// Normalization of one channel: stored = (min(max(x, clip_low), clip_high) - mean) / stddev.
struct ChannelNorm {
  double clip_low = -std::numeric_limits<double>::infinity();
  double clip_high = std::numeric_limits<double>::infinity();
  double mean = 0;
  double stddev = 1;
};

struct PreprocessPlan {
  PreprocessOptions options;
  std::vector<double> spacing;           // resolved target spacing, array order; empty: none
  std::vector<Normalization> normalize;  // per image channel; empty: none
  std::vector<ChannelNorm> ct;           // per channel, for its kCt channels (CtStatistics)
  DType image_dtype = DType::kU8;        // the fields' dtypes (FinishSchema)
  DType mask_dtype = DType::kU8;
  bool needs_ct_statistics() const;
};

// What a case was before preprocessing: its per-sample record.
struct SourceRecord {
  DType image_dtype = DType::kU8, mask_dtype = DType::kU8;
  Shape shape;                    // spatial, array axis order
  Geometry geometry;              // ITK order; empty when the source has none
  Shape crop_start, crop_size;    // array axis order, in source voxels
  std::vector<ChannelNorm> norm;  // per channel, when normalized
};

// Schema positions of the record fields; -1 when absent.
struct RecordFields {
  int image_dtype = -1;    // "image.source_dtype" (string)
  int mask_dtype = -1;     // "mask.source_dtype" (string)
  int shape = -1;          // "source.shape" (i64 [S]), then "source.crop_box" (i64 [2, S])
  int geometry = -1;       // "source.spacing", "source.origin", "source.direction" (f64)
  int normalization = -1;  // "image.normalization" (f64 [C, 4])
};

// Checks the options against the cases that inspected cleanly and resolves them into
// `plan`. A case the options cannot apply to (resampling without 3D geometry) gets its
// error and ok[i] cleared. With resampling, each case's image and mask shapes and spacing
// in `infos` become those of its output (before any crop; so chunk shapes are sized for
// the largest possible case). `work_bytes[i]`: memory the case's preprocessing takes
// beyond its decoded arrays. Notes for the summary go to `notes`.
Status PlanPreprocessing(const PreprocessOptions& o, const SourcePlan& source, std::vector<CaseInfo>& infos,
                         std::vector<bool>& ok, std::vector<Status>& errors, PreprocessPlan* plan,
                         std::vector<uint64_t>* work_bytes, std::vector<std::string>* notes);

// Given the schema BuildSchema made (field dtypes promoted over the source dtypes): sets
// the image dtype (--dtype, or f32 when normalized), makes cropped spatial dimensions
// variable, appends the record fields to `fields` and stores their positions. Fails on a
// normalized image with an integer --dtype.
Status FinishSchema(const std::vector<CaseInfo>& infos, const std::vector<bool>& ok, bool has_mask,
                    size_t geometry_dims, int image, int mask, std::vector<FieldSpec>& fields, RecordFields* record,
                    PreprocessPlan* plan, std::vector<std::string>* notes);

// Checks its NaN and infinite voxels (CheckFinite), crops, normalizes, resamples and
// converts one decoded case of `in` to the plan's dtypes, and records what it was. Errors
// name the case or its file.
Status PreprocessCase(const PreprocessPlan& plan, const CaseInput& in, CaseData* d, SourceRecord* record);

// Crops the image and mask of `d` to the box of voxels that are nonzero in any image
// channel (a case without any keeps its size), moves the origin with it, and returns the
// box (array axis order, in voxels of `d` before).
Status CropToNonzero(CaseData* d, Shape* start, Shape* size);

// The grid size of resampling `spatial` voxels of spacing `from` to spacing `to` (array
// axis order), as nnU-Net's compute_new_shape: from / to * n per axis, rounded half to
// even (numpy's round: 90.5 -> 90, 108.5 -> 108). An axis that would have no voxel, or
// more than kMaxResampledAxis, is an error naming the axis and the numbers.
inline constexpr int64_t kMaxResampledAxis = (int64_t{1} << 31) - 1;
Result<Shape> TargetShape(const Shape& spatial, const std::vector<double>& from, const std::vector<double>& to);

// The p-th percentile (0..100) of `v`, linear between the closest order statistics
// (numpy's default). 0 for an empty `v`.
double Percentile(std::vector<double> v, double p);

// Puts the record into a sample built for the schema that `record_fields` belongs to.
void PutRecord(const RecordFields& fields, const SourceRecord& record, std::vector<FieldValue>* values);

// Provenance entries of the plan (only the steps in use, so that output without them is
// unchanged).
std::vector<KeyValue> PreprocessProvenance(const PreprocessPlan& plan);

// --- The ct statistics (intensity.cpp) --------------------------------------------------

// Foreground values of one case, per channel, as nnU-Net's fingerprint draws them: `draws`
// values with replacement from the voxels with mask > 0 (in any mask channel), in memory
// order, whatever their number, so every case weighs the same; the indices are numpy's
// RandomState(kIntensitySeed).choice(count, draws), drawn anew for every case. A value
// drawn k times is kept once with count k. A case without foreground gives none.
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
// Clip bounds (0.5 and 99.5 percentiles, linear between order statistics as numpy's
// default), mean and population std of the values of every sample, each as often as it
// was drawn (numpy's statistics of the concatenated draws). A channel without values is
// an error.
Result<std::vector<ChannelNorm>> MergeForeground(const std::vector<ForegroundSample>& samples, size_t channels);

struct CtPass {
  const SourcePlan* plan;
  std::vector<size_t> cases;  // the training cases (with a mask), in output order
  const PreprocessPlan* preprocess;
  int threads;
  uint64_t max_sample_bytes;  // per file decoded
  const std::atomic<bool>* cancel;
  ProgressSink* progress;
};
// The first pass: decodes and crops every case of `pass.cases` and merges their
// foreground samples (each case draws intensity_samples / cases values per channel).
// A case that cannot be read, or has NaN or infinite voxels (CheckFinite), adds nothing:
// it fails, or is skipped, when it is converted.
struct CtStatisticsResult {
  std::vector<ChannelNorm> channels;
  size_t cases = 0;  // the cases that were read
};
Result<CtStatisticsResult> CtStatistics(const CtPass& pass);

}  // namespace shardify::convert::detail
