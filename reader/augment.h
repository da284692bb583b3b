// nnU-Net v2's default training augmentation: nnU-Net v2.8.1
// (nnUNetTrainer.get_training_transforms) with the batchgeneratorsv2 it requires, 0.3.2
// (docs/transforms.md names the commits). This header holds the spec's table, options and
// draws, and the host implementation; trainer/augment.h adds the device one.
//
// Per batch: one set of parameters per sample (and channel) drawn on the host from
// (seed, epoch, step) by Draw, so a run, its resumed continuation and a run with another
// thread count see the same transforms; then a fixed sequence of operations per sample.
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
// One spec, three implementations, fed the same plan: the host one here (ApplySample,
// plain C++ per sample: the CPU one, run by the Loader's decode threads, so by shardtrain
// on the CPU and by Python's Loader(augment="nnunet")); the device one in
// trainer/augment_apply.cpp (ApplyOnDevice: batched LibTorch ops); and the Python torch one
// in python/shardify/_nnunet.py and _nnunet_apply.py (shardify.transforms.NnUnet, on the
// device). tests/trainer/augment_host_test.cpp holds the host to the device one, and
// python/tests/test_transforms.py the Python one to both (through
// tests/trainer/augment_reference.cpp): the same draws, the same outputs within float
// rounding. Change them together.
//
// Thread-safety: a NnUnetAugment is immutable; Draw and ApplySample may run on several
// threads at once. Errors: InvalidArgument, naming what is wrong.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace shardify {

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
// The position of `t` in AugTransforms() and in the arrays indexed by transform.
inline constexpr size_t AugIndex(AugTransform t) { return static_cast<size_t>(t); }

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
  // patches read with a margin) and the transforms crop them off; false: output size =
  // input size.
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

// Working memory of NnUnetAugment::ApplySample, kept between calls: a thread that augments
// sample after sample of one patch size stops allocating after its first samples. Not
// thread-safe: one per thread.
struct AugmentScratch {
  std::vector<float> values;   // a channel's worth
  std::vector<float> weights;  // per axis
  std::vector<int64_t> index;  // per axis
};

class NnUnetAugment {
 public:
  // `patch`: the spatial size the model sees, 2 or 3 axes. It sets nnU-Net's rotation
  // range (3D: +-30 degrees about each axis; 2D, and 3D patches whose largest axis exceeds
  // 3x the first (in-plane only, as nnU-Net's "dummy 2D"): +-180, or +-15 for a 2D patch
  // whose aspect exceeds 1.5) and the margin. Errors: bad rank, probability or channel.
  static Result<NnUnetAugment> Create(std::vector<int64_t> patch, NnUnetAugmentOptions options);

  const std::vector<int64_t>& patch() const { return patch_; }
  // Voxels read on each side of the patch so that rotated and scaled samples draw from
  // real data: the patch's bounding box under the largest rotation about any one axis,
  // divided by 0.85 (nnU-Net's rule); zeros when options.margin is false or when neither
  // rotation nor scaling can happen.
  const std::vector<int64_t>& margin() const { return margin_; }
  const NnUnetAugmentOptions& options() const { return options_; }
  // A 3D patch rotated and scaled in its last two axes only (and low resolution skips its
  // axis 0).
  bool in_plane() const { return in_plane_; }

  // The parameters of batch (epoch, step) for `batch` samples of `channels` channels.
  AugmentPlan Draw(int64_t batch, int64_t channels, uint64_t epoch, uint64_t step) const;

  // The rotation and scaling of sample b (< plan.batch) of `plan`, rank x rank in the top
  // left: the output offset p (voxels from the patch centre, array axis order) samples the
  // input at M p.
  std::array<std::array<double, 3>, 3> SpatialMatrix(const AugmentPlan& plan, int64_t b) const;

  // One sample b of the batch `plan` was drawn for, on the host, in the calling thread.
  // image: float [channels, in...] with in = patch() + 2 * margin() per spatial axis (the
  // patch when margin() is zeros); mask: int32 [in...] or null (labels; outside the
  // labelled data: options().label_pad or any negative value). Writes image_out float
  // [channels, patch...] and, when mask is given, mask_out int32 [patch...], which then
  // holds no label outside the labelled data but ignore_label (or 0). No buffer may overlap
  // another. The same parameters, meaning and output (within float rounding) as the device
  // path on sample b of that batch. `scratch`: buffers to reuse (one per thread; null:
  // allocated for this call). Errors: b out of range, channels != plan.channels, a plan
  // whose parameters do not cover its batch (or whose noise would reach 2^32 elements, as
  // on the device), a masked channel out of range, a null buffer.
  Status ApplySample(const AugmentPlan& plan, int64_t b, int64_t channels, const float* image, const int32_t* mask,
                     float* image_out, int32_t* mask_out, AugmentScratch* scratch = nullptr) const;

 private:
  NnUnetAugment() = default;
  std::vector<int64_t> patch_, margin_;
  NnUnetAugmentOptions options_;
  double max_angle_ = 0;   // radians
  bool in_plane_ = false;  // 3D patch rotated and scaled in its last two axes only
};

}  // namespace shardify
