// Preprocessing inside the pipeline (internal; options and their meaning: preprocess.h).
//
//   PlanPreprocessing   resolves the options (schemes by channel name, plans) into a plan;
//   RunFirstPass        the first pass over the training cases (intensity_internal.h):
//                       cropped shapes, intensity statistics, the zscore region;
//   PlanGrids           resolves the target spacing and predicts each case's output grid,
//                       so the schema and the chunk shapes fit what will be written;
//   FinishSchema        sets the fields' dtypes and appends the record fields;
//   PreprocessCase      transforms one decoded case and fills its record;
//   PutRecord           writes the record into the sample's values.
// Everything here is deterministic and thread-safe (plans are read only).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "convert/convert.h"
#include "convert/preprocess/preprocess.h"
#include "convert/sources/case.h"
#include "format/manifest.h"
#include "format/writer.h"

namespace shardify::convert::detail {

struct PreprocessPlan {
  PreprocessOptions options;
  std::vector<double> spacing;  // resolved target spacing, array order; empty: none
  // nnU-Net's axis order with this spacing: its axis i is array axis transpose[i] (a plans
  // file's transpose_forward, or its planner's rule: the coarsest axis of the target
  // spacing first, the others in order). Its resampling sees the axes in this order.
  std::array<int, 3> transpose{0, 1, 2};
  std::vector<Normalization> normalize;  // per image channel; empty: none
  std::vector<ChannelNorm> ct;           // per channel, for its kCt channels (given, or FirstPass)
  size_t ct_cases = 0;                   // FirstPass: the cases that drew, ct_draws values each
  uint64_t ct_draws = 0;
  // Per channel (one entry: every channel; empty: none): zscore channels that take their
  // statistics within the case's NormalizationRegion and are 0 outside it: nnU-Net's
  // use_mask_for_norm, given by a plans file or set by FirstPass where cropping to the
  // nonzero box keeps a median of less than kRegionNormBelow of the training cases.
  std::vector<bool> zscore_in_region;
  bool InRegion(size_t channel) const;
  bool AnyInRegion() const;
  // The masks of a plan with channels in the region mark the unlabelled voxels outside it
  // kOutsideRegion, as nnU-Net's preprocessed segmentations do (so the mask's dtype is
  // signed: i8 when the labels the source declares fit it, as nnU-Net stores them).
  bool MarksRegion(bool has_mask) const { return has_mask && AnyInRegion(); }
  bool labels_fit_i8 = false;      // the source declares labels, all in 0..127
  DType image_dtype = DType::kU8;  // the fields' dtypes (FinishSchema)
  DType mask_dtype = DType::kU8;
  bool needs_ct_statistics() const;  // kCt channels whose statistics were not given
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
// `plan` (all but the target spacing). A case the options cannot apply to (resampling
// without 3D geometry) gets its error and ok[i] cleared. Notes for the summary go to
// `notes`.
Status PlanPreprocessing(const PreprocessOptions& o, const SourcePlan& source, const std::vector<CaseInfo>& infos,
                         std::vector<bool>& ok, std::vector<Status>& errors, PreprocessPlan* plan,
                         std::vector<std::string>* notes);

// The spacings (array order) and the spatial shapes after cropping to the nonzero box of the
// training cases the first pass read, as nnU-Net's dataset fingerprint has them;
// `why_none`: the first training case's error, for when it could read none.
struct CaseShapes {
  std::vector<std::vector<double>> spacings;
  std::vector<Shape> cropped;
  Status why_none;
};

// Resolves the target spacing (--spacing auto: nnU-Net's rule over `training`; when that
// holds no case, why_none says why) and nnU-Net's transpose for it. With resampling, each case's image and mask shapes
// and spacing in `infos` become those of its output (before any crop; so chunk shapes are sized for the largest
// possible case); a case that would have an axis without voxels gets its error. `work_bytes[i]`: memory the case's
// preprocessing takes beyond its decoded arrays.
Status PlanGrids(const SourcePlan& source, const CaseShapes& training, std::vector<CaseInfo>& infos,
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

// --- The nonzero region (nonzero.cpp) ---------------------------------------------------

// The label of mask voxels outside the nonzero region (PreprocessPlan::MarksRegion), nnU-Net's.
inline constexpr int kOutsideRegion = -1;

// Crops the image and mask of `d` to the box of voxels that are nonzero in any image
// channel (a case without any keeps its size), moves the origin with it, and returns the
// box (array axis order, in voxels of `d` before).
Status CropToNonzero(CaseData* d, Shape* start, Shape* size);

// The voxels z-scoring uses with nnU-Net's use_mask_for_norm (its crop_to_nonzero marks
// the rest -1 in the segmentation): 1 where `d` is nonzero in any image channel, or lies
// in a hole of that region, or is labelled (mask > 0 in any mask channel); else 0.
std::vector<uint8_t> NormalizationRegion(const CaseData& d);

// Sets the holes of `flags` (0/1, row-major, shape `spatial`) to 1: the 0 voxels that no
// path of 0 voxels, stepping along one axis at a time, joins to the array's border, as
// scipy's binary_fill_holes with its default structure fills them.
void FillHoles(std::vector<uint8_t>* flags, const Shape& spatial);

// numpy's round (and Python's): to the nearest integer, halves to the even one
// (independent of the floating-point rounding mode).
double RoundHalfToEven(double x);

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

// --- Options from a plans file (plans.cpp) ----------------------------------------------

// Summary notes of what a plans file set that the other notes do not say: the file, its
// identity and transpose, each zscore channel's region, the given ct statistics.
void PlansNotes(const PreprocessPlan& plan, std::vector<std::string>* notes);
// Provenance entries naming the plans file: plans, plans_xxh3, plans_name, plans_dataset,
// plans_configuration, plans_transpose_forward, and plans_statistics when ct used them.
std::vector<KeyValue> PlansProvenance(const PlansIdentity& id);

}  // namespace shardify::convert::detail
