// nnU-Net's augmentation on the training device (reader/augment.h holds the spec, its
// table, options and draws, and the host implementation): a plan applied to a whole batch
// by a fixed sequence of LibTorch ops on whatever device the tensors live on, one
// affine_grid + grid_sample for the samples that rotate or scale, gathers and shifted sums
// for the filters, elementwise ops for the intensities. Only the samples a transform picks
// are computed. Reductions run one axis at a time, so their results do not depend on the
// number of threads either.
//
// Thread-safety: ApplyOnDevice may run on several threads. Errors: ApplyOnDevice throws
// c10::Error on tensors that do not match its contract (the training loop catches it).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "reader/augment.h"
#include "trainer/augment_options.h"
#include "trainer/transforms.h"

namespace shardify::trainer {

// The host part's names, as the trainer's code knows them.
using shardify::AugmentPlan;
using shardify::AugTransform;
using shardify::AugTransformInfo;
using shardify::AugTransforms;
using shardify::AugTransformsText;
using shardify::kNumAugTransforms;
using shardify::MaskImageChannels;
using shardify::MaskMode;
using shardify::MaskModeName;
using shardify::NnUnetAugment;
using shardify::NnUnetAugmentOptions;
using shardify::ParseAugProbabilities;
using shardify::ParseMaskMode;

// The voxels of `mask` (int64 labels as the mask stores them, or packed multi-label
// values) outside the labelled data: below 0, or options.label_pad where that is not below
// 0 (the pad of a u8 mask, 255). nnU-Net's pipeline ends by making them background 0
// (RemoveLabelTansform(-1, 0)), or options.ignore_label here: ApplyOnDevice for training's
// batches, and validation for its masks, as nnU-Net's get_validation_transforms does.
torch::Tensor OutsideLabelled(const torch::Tensor& mask, const NnUnetAugmentOptions& options);

// `plan` (drawn by aug.Draw for this batch) applied to image float [B, C, spatial...] and
// mask int64 [B, spatial...] (a label map) or undefined, on one device, with 2 or 3
// spatial axes as aug.patch(). Returns them with the spatial size less 2 * aug.margin()
// (the patch when the input was read with the margin); the mask holds no label outside the
// labelled data but `ignore_label`.
ImageMask ApplyOnDevice(const NnUnetAugment& aug, ImageMask in, const AugmentPlan& plan);
// The same with the plan of batch (epoch, step).
ImageMask ApplyOnDevice(const NnUnetAugment& aug, ImageMask in, uint64_t epoch, uint64_t step);

}  // namespace shardify::trainer
