// nnU-Net v2's default training augmentation as batched tensor ops on the training device:
// nnU-Net v2.8.1 (nnUNetTrainer.get_training_transforms) with the batchgeneratorsv2 it
// requires, 0.3.2 (docs/transforms.md names the commits).
//
// Per batch: one set of parameters per sample (and channel) drawn on the host from
// (seed, epoch, step), so a run, its resumed continuation and a run with another thread
// count see the same transforms; then a fixed sequence of LibTorch ops on whatever device
// the tensors live on: one affine_grid + grid_sample for the samples that rotate or scale,
// gathers and shifted sums for the filters, elementwise ops for the intensities. Only
// the samples a transform picks are computed. Reductions run one axis at a time, so their
// results do not depend on the number of threads either.
//
// Order (nnU-Net's): rotation and scaling (then the crop to the patch), Gaussian noise,
// Gaussian blur, brightness, contrast, simulated low resolution, inverted gamma, gamma,
// mirroring, masking of the image outside the labelled data, removal of the outside label.
// Image and mask move together: the mask as nnU-Net resamples it (each label's one-hot map
// linearly, the largest wins) or by nearest neighbour. Voxels from outside the input take
// the patch padding: `image_pad` and `label_pad`.
//
// Outside the labelled data: mask voxels that hold `label_pad` (the patch padding, as the
// mask stores it: -1, or 255 in a u8 mask) or any negative label (a converter's -1 outside
// the nonzero region, as in nnU-Net's preprocessed segmentations). They rank below every
// label when labels are resampled, zero the image channels of `mask_image_channels`, and
// end as background 0, or as `ignore_label` when one is set.
//
// One spec, two implementations: python/shardify/_nnunet.py and _nnunet_apply.py are the
// Python twin (shardify.transforms.NnUnet); python/tests/test_transforms.py feeds both the
// same batch and position through tests/trainer/augment_reference.cpp and requires the same
// draws and outputs. Change both together.
//
// Thread-safety: a NnUnetAugment is immutable; Apply may run on several threads.
// Errors: Create returns InvalidArgument; Apply throws c10::Error on tensors that do not
// match its contract (the training loop catches it).
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/transforms.h"

namespace shardify::trainer {

// The transforms, in the order they run (mirroring runs last, after kGamma).
enum class AugTransform : int {
  kRotate,
  kScale,
  kNoise,
  kBlur,
  kBrightness,
  kContrast,
  kLowRes,
  kGammaInverted,
  kGamma,
  kMirror
};
inline constexpr size_t kNumAugTransforms = 10;

struct AugTransformInfo {
  const char* name;            // as in --aug-p
  double probability;          // nnU-Net's default, per sample (mirror: per spatial axis)
  double channel_probability;  // of each channel of a picked sample
  double lo, hi;               // parameter range, drawn uniformly...
  bool split_at_one;           // ...or half the draws in [lo, 1), half in [1, hi]
  const char* parameter;       // what the parameter is
};

// The one table of the transforms: names, nnU-Net's default probabilities and ranges.
// Indexed by AugTransform.
const std::array<AugTransformInfo, kNumAugTransforms>& AugTransforms();

// The table as aligned text lines (for --help).
std::string AugTransformsText();

// kAuto: nnU-Net's augmentation for segmentation models (unet, unet3d), none otherwise.
enum class AugPreset { kAuto, kNone, kNnUnet };
Result<AugPreset> ParseAugPreset(const std::string& name);  // "nnunet" | "none"

// How a rotated or scaled mask is resampled. kLinear: nnU-Net's (batchgeneratorsv2
// SpatialTransform, mode_seg "bilinear"): each label's one-hot map, times 1000, sampled
// linearly and rounded to float16; the largest wins, the lowest label on ties. kNearest:
// nearest neighbour. Either way, points outside the input's outermost voxel centres take
// the padding.
enum class MaskMode { kLinear, kNearest };
Result<MaskMode> ParseMaskMode(const std::string& name);  // "linear" | "nearest"
const char* MaskModeName(MaskMode mode);

// The image channels nnU-Net masks (MaskImageTransform: use_mask_for_norm) for a dataset
// whose provenance holds `zscore_region` ("nonzero": every channel `normalize` lists as
// zscore, all of them when it lists one scheme or none; or one entry per channel:
// "nonzero", "all", "-") for images of `channels` channels. Empty: none.
std::vector<int64_t> MaskImageChannels(const std::string& zscore_region, const std::string& normalize,
                                       int64_t channels);

struct NnUnetAugmentOptions {
  std::array<double, kNumAugTransforms> probability{};  // default: the table's
  uint64_t seed = 0;
  double image_pad = 0;    // image value outside the input (the normalized raw 0)
  int64_t label_pad = -1;  // label value outside the input, as the mask holds it (u8: 255)
  MaskMode mask_mode = MaskMode::kLinear;
  // What voxels outside the labelled data become last: unset, background 0 (nnU-Net's
  // RemoveLabelTansform(-1, 0)); set, this label (one the loss ignores).
  std::optional<int64_t> ignore_label;
  // Image channels set to 0 where the mask is outside the labelled data, after mirroring
  // (nnU-Net's MaskImageTransform). Unset: none here; shardtrain fills it in from the
  // dataset's provenance (MaskImageChannels).
  std::optional<std::vector<int64_t>> mask_image_channels;
  // Inputs carry NnUnetAugment::margin() extra voxels on each side of each axis (volume
  // patches read with a margin) and Apply crops them off; false: output size = input size.
  bool margin = true;
  NnUnetAugmentOptions();
};

// "rotate=0.2,noise=0,..." sets the named probabilities in [0, 1]; "all=P" sets every
// one (later entries override earlier ones). Errors name the bad entry.
Status ParseAugProbabilities(const std::string& spec, NnUnetAugmentOptions* options);

// What Draw picked for one batch: per sample b, or per sample and channel (b * C + c).
// A transform left a sample alone where applied[t][b] is false; then its parameters hold
// the identity (angle 0, factors 1, sigmas 0).
struct AugmentPlan {
  int64_t batch = 0, channels = 0;
  std::array<std::vector<bool>, kNumAugTransforms> applied;  // kMirror: any axis
  std::vector<std::array<double, 3>> angles;                 // [b]: radians about axes 0..2 (2D: [0])
  std::vector<double> scale;                                 // [b]: > 1 shows more (objects smaller)
  std::vector<double> noise_sigma;                           // [b]
  uint64_t noise_seed = 0;
  std::vector<std::array<double, 3>> blur_sigma;                             // [b * C + c]: per spatial axis
  std::vector<double> brightness, contrast, low_res, gamma_inverted, gamma;  // [b * C + c]
  std::vector<std::array<bool, 3>> mirror;                                   // [b]: per spatial axis
};

class NnUnetAugment {
 public:
  // `patch`: the spatial size the model sees, 2 or 3 axes. It sets nnU-Net's rotation
  // range (3D: +-30 degrees about each axis; 2D, and 3D patches whose largest axis exceeds
  // 3x the first (in-plane only, as nnU-Net's "dummy 2D"): +-180, or +-15 for a 2D patch
  // whose aspect exceeds 1.5) and the margin. Errors: bad rank, probability or channel.
  static Result<NnUnetAugment> Create(std::vector<int64_t> patch, NnUnetAugmentOptions options);

  // Voxels read on each side of the patch so that rotated and scaled samples draw from
  // real data: the patch's bounding box under the largest rotation about any one axis,
  // divided by 0.85 (nnU-Net's rule); zeros when options.margin is false or when neither
  // rotation nor scaling can happen.
  const std::vector<int64_t>& margin() const { return margin_; }
  const NnUnetAugmentOptions& options() const { return options_; }

  // The parameters of batch (epoch, step) for `batch` samples of `channels` channels.
  AugmentPlan Draw(int64_t batch, int64_t channels, uint64_t epoch, uint64_t step) const;

  // image float [B, C, spatial...], mask int64 [B, spatial...] (a label map) or undefined,
  // on one device, with 2 or 3 spatial axes as the patch. Returns them with the spatial size
  // less 2 * margin() (the patch when the input was read with the margin); the mask holds
  // no label outside the labelled data but `ignore_label`.
  ImageMask Apply(ImageMask in, const AugmentPlan& plan) const;
  ImageMask operator()(ImageMask in, uint64_t epoch, uint64_t step) const;

 private:
  NnUnetAugment() = default;
  std::vector<int64_t> patch_, margin_;
  NnUnetAugmentOptions options_;
  double max_angle_ = 0;   // radians
  bool in_plane_ = false;  // 3D patch rotated and scaled in its last two axes only
};

}  // namespace shardify::trainer
