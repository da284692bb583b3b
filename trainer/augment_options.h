// What augments shardtrain's training batches, without LibTorch: the options of the 2D
// device transforms (applied by transforms.h) and the choice of nnU-Net's augmentation
// (applied by augment.h; its options are reader/augment.h's NnUnetAugmentOptions).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace shardify::trainer {

struct AugmentOptions {
  bool flip_x = false;                 // mirror left-right with probability 1/2
  bool flip_y = false;                 // mirror top-bottom with probability 1/2
  double rotate_deg = 0;               // rotation uniform in [-r, r] degrees
  double scale = 0;                    // zoom uniform in [1 - s, 1 + s]
  double translate = 0;                // shift uniform in [-t, t] of the image size
  double intensity_scale = 0;          // x * uniform [1 - a, 1 + a] (image only)
  double intensity_shift = 0;          // x + uniform [-b, b] (image only)
  int64_t crop_h = 0, crop_w = 0;      // random crop, or zero pad, to this size (0 = off)
  int64_t resize_h = 0, resize_w = 0;  // resize to this size last (0 = off)
  uint64_t seed = 0;
};

// kAuto: nnU-Net's augmentation for segmentation models (unet, unet3d), none otherwise.
enum class AugPreset { kAuto, kNone, kNnUnet };
Result<AugPreset> ParseAugPreset(const std::string& name);  // "nnunet" | "none"

}  // namespace shardify::trainer
