// Offline preprocessing of a dataset's images and masks, as nnU-Net does it once before
// training: crop to the nonzero box, normalize intensities per channel, resample to one
// target spacing, and store in one dtype. Every step is recorded per sample (the fields
// "source.*", "<f>.source_dtype", "image.normalization"; docs/fields.md), so every
// stored array maps back onto its source grid.
//
// Order per case: NaN check (nan_to_num) -> crop (source dtype, exact) -> normalize
// (float) -> resample (float, clipped to the input's range) -> the field's dtype. Without
// any option the output is what it always was.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/types.h"

namespace shardify::convert {

enum class ImageInterp { kLinear, kCubic };   // cubic: third-order B-spline (nnU-Net's images)
enum class MaskInterp { kNearest, kLinear };  // linear: per label, nnU-Net's segmentations
enum class Normalization { kNone, kZScore, kCt };

// Normalization of one channel: stored = (min(max(x, clip_low), clip_high) - mean) / stddev.
struct ChannelNorm {
  double clip_low = -std::numeric_limits<double>::infinity();
  double clip_high = std::numeric_limits<double>::infinity();
  double mean = 0;
  double stddev = 1;
};

// Where a plans file's options came from (ApplyPlans), recorded in the provenance.
struct PlansIdentity {
  std::string file;                    // the plans file's name, without its folder
  std::string checksum;                // XXH3-64 of its bytes, "0x" and 16 hex digits
  std::string dataset_name;            // its "dataset_name"
  std::string plans_name;              // its "plans_name"
  std::string configuration;           // the configuration applied
  std::vector<int> transpose_forward;  // its axis order: nnU-Net's axis i is array axis transpose_forward[i]
  std::string statistics;              // the file its foreground intensity statistics came from, when ct needs them
};

struct PreprocessOptions {
  // Target spacing in mm, in array axis order (z, y, x), which the command line never
  // shows: users name the axes (ParseSpacing); empty: no resampling.
  std::vector<double> spacing;
  // --spacing auto: nnU-Net's rule over the converted cases: the median spacing per axis;
  // when the coarsest axis is over 3x coarser than the others and has over 3x fewer voxels
  // (median shapes), that axis takes the 10th percentile of its spacings instead (but not
  // finer than the other axes).
  bool auto_spacing = false;
  ImageInterp image_interp = ImageInterp::kCubic;
  MaskInterp mask_interp = MaskInterp::kLinear;
  // Crop each case to the bounding box of the voxels that are nonzero in any channel.
  bool crop_nonzero = false;
  // One entry for every channel, or one per channel; empty: none. zscore: per case and
  // channel, (x - mean) / std; with crop_nonzero, when cropping keeps a median of less than
  // 3/4 of the training cases' voxels (nnU-Net's use_mask_for_norm), over the nonzero
  // region (holes filled, labelled voxels included) and 0 outside it. ct: clipped to the 0.5 and 99.5 percentiles of
  // the foreground (mask > 0) voxels of the training cases, then z-scored with their mean and std (a first pass over
  // the data).
  std::vector<Normalization> normalize;
  // Instead of `normalize` (which must then be empty): each channel's scheme from its name
  // in dataset.json's channel_names, as nnU-Net picks it (ChannelSchemeOf); without
  // channel names (other layouts), zscore for every channel.
  bool normalize_by_channel_names = false;
  // Per channel, given (by a plans file's use_mask_for_norm): whether a zscore channel
  // normalizes within the nonzero region (as above). Empty: nnU-Net's rule decides (the
  // first pass). Other schemes ignore it, as nnU-Net's do.
  std::vector<bool> use_mask_for_norm;
  // Per channel, given (by a plans file's foreground intensity properties): the clip bounds,
  // mean and std of its ct channels. Empty: the first pass measures them.
  std::vector<ChannelNorm> ct_statistics;
  // The preset that set these options ("nnunet"), recorded in the provenance; empty: none.
  std::string preset;
  // An nnU-Net v2 plans file (nnUNetPlans.json) and the configuration in it to take these
  // options from (plans.h): Convert applies it (ApplyPlans) before anything else. Empty:
  // none. `from_plans` says what was applied.
  std::string plans_file;
  std::string plans_configuration = "3d_fullres";
  std::optional<PlansIdentity> from_plans;
  // The image field's dtype. Default: the smallest dtype that holds every input's values
  // exactly (PromoteDTypes), f32 when normalized. Normalized data may be f32, f16 or f64.
  std::optional<DType> dtype;
  // --normalize ct and nnU-Net's fingerprint (--preprocess nnunet): foreground values drawn
  // for the statistics over all the training cases (as the source gives them, before
  // --split), divided evenly among those with a mask: each draws its share per channel with
  // replacement, as nnU-Net's fingerprint does, which draws 100,000,000 in all.
  uint64_t intensity_samples = 100000000;
  // NaN and infinite image voxels become 0 before any other step (and before the ct
  // statistics). Without it they stay, unless the case is normalized or resampled, which
  // would spread them over the channel: then the case fails, naming the file and count.
  bool nan_to_num = false;

  bool resamples() const { return auto_spacing || !spacing.empty(); }
  bool normalizes() const;
  // Any step that changes the grid or the values (crop, resampling, normalization, NaN).
  bool transforms() const { return crop_nonzero || resamples() || normalizes() || nan_to_num; }
  // Whether voxel values are interpreted (transforms, or --dtype): then NIfTI voxels are
  // read as their scaling gives them (CaseReading::scaled), as nnU-Net's readers give them;
  // otherwise as stored.
  bool interprets() const { return transforms() || dtype.has_value(); }
};

// nnU-Net's normalization scheme for a channel named `name` in dataset.json (its
// channel_name_to_normalization_mapping, case-insensitive): "CT" -> ct, "noNorm" -> none,
// "zscore" -> zscore, any other name (T1, T2, FLAIR, ...) -> zscore. nnU-Net's
// rescale_to_0_1 and rgb_to_0_1 have no counterpart here: InvalidArgument naming them.
Result<Normalization> ChannelSchemeOf(const std::string& name);

// --preprocess nnunet: nnU-Net v2's default preprocessing (3d_fullres) as options: crop to
// the nonzero box, the target spacing by its rule (auto_spacing), each channel normalized
// by its name; images by cubic B-spline and masks per label linearly are the defaults of
// image_interp and mask_interp already, so they are left as they are. The flags a user
// gives as well override the preset's (set `given` for each). InvalidArgument for another
// preset name than nnunet or none.
struct PresetGiven {
  bool crop = false, spacing = false, normalize = false;
};
Status ApplyPreset(const std::string& name, const PresetGiven& given, PreprocessOptions* o);

// The spacings (mm) that resampling accepts: a nanometre to a kilometre.
inline constexpr double kMinSpacingMm = 1e-6, kMaxSpacingMm = 1e6;

// --spacing: "x=0.8,y=0.8,z=1.5" (the axes named, in any order; x, y, z as in NIfTI,
// nibabel, ITK and every stored "*.spacing"), one value for every axis ("1" or "1,1,1"),
// or "auto". Unnamed values that differ are refused: their order would be a guess (this
// flag once took z,y,x). Each spacing lies in 1e-6..1e6 mm.
Status ParseSpacing(const std::string& text, PreprocessOptions* o);
// "none", "zscore", "ct", or one of them per channel: "ct,zscore".
Result<std::vector<Normalization>> ParseNormalize(const std::string& text);
const char* NormalizationName(Normalization n);

}  // namespace shardify::convert
