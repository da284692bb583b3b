// nnU-Net's augmentation in the trainer: the preset names and a batch's own plan. The
// tensor ops are in augment_apply.cpp.
#include "trainer/augment.h"

#include <utility>

namespace shardify::trainer {

Result<AugPreset> ParseAugPreset(const std::string& name) {
  if (name == "nnunet") return AugPreset::kNnUnet;
  if (name == "none") return AugPreset::kNone;
  return InvalidArgument("augmentation '" + name + "': use nnunet or none");
}

ImageMask ApplyOnDevice(const NnUnetAugment& aug, ImageMask in, uint64_t epoch, uint64_t step) {
  const AugmentPlan plan = aug.Draw(in.image.size(0), in.image.size(1), epoch, step);
  return ApplyOnDevice(aug, std::move(in), plan);
}

}  // namespace shardify::trainer
