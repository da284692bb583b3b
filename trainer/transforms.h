// Batch bridge and device transforms.
//
// Bridge: a loader batch field becomes a tensor over the batch's own host memory (no copy);
// the tensor holds a reference to the Batch, so the ring slot is recycled only after
// every tensor made from it is gone. Normalization and augmentation then run on the
// device the tensors were moved to.
//
// Augmentation is seeded: the parameters of a batch are drawn from (seed, epoch, step)
// on the host, so a run and its resumed continuation see the same transforms, on any
// device. Geometric transforms are applied to image and mask alike (bilinear for the
// image, nearest for the mask).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/types.h"
#include "reader/loader.h"
#include "trainer/augment_options.h"

namespace shardify::trainer {

// LibTorch element type holding `t`'s bytes. u16/u32 map to the signed type of the same
// width (LibTorch 1.13 has no unsigned 16/32-bit types); ToFloat undoes that.
Result<torch::ScalarType> TorchType(DType t);

// A tensor of field `name` sharing the batch's host memory (ndarray: shape as in the batch;
// int/float fields: [B] i64/f64). The tensor keeps `batch` alive. Errors: no such field,
// string/bytes field, unsupported dtype.
Result<torch::Tensor> FieldTensor(const std::shared_ptr<Batch>& batch, const std::string& name);

// Moves to `device` (asynchronous when the batch memory is pinned); a no-op on the CPU.
torch::Tensor ToDevice(const torch::Tensor& t, const torch::Device& device, bool pinned);

// Image [B, C, H, W] or [B, H, W] of source dtype `dtype` -> float32 [B, C, H, W],
// (x - mean) / stddev. stddev <= 0 is treated as 1. Volumes (spatial_rank 3): [B, C, D, H, W]
// or [B, D, H, W] -> [B, C, D, H, W].
torch::Tensor ToFloatImage(const torch::Tensor& image, DType dtype, double mean, double stddev, int spatial_rank = 2);

// Mask [B, 1, H, W], [B, H, W] (any integer dtype) -> int64 [B, H, W]; volumes likewise
// with D, H, W.
torch::Tensor ToLabelMap(const torch::Tensor& mask, DType dtype, int spatial_rank = 2);

// Multi-label masks (one 0/1 channel per class, classes may overlap) travel through the
// label-map transforms packed: bit k of a pixel is class k. Packed maps resize, flip,
// rotate and pad like label maps (nearest neighbour; exact while K <= kMaxMultiLabels).
inline constexpr int64_t kMaxMultiLabels = 24;
// Mask [B, K, spatial...] (any integer dtype) -> int64 [B, spatial...]: the sum of
// 2^k over the channels k that are 1; -1 (unlabeled) where a channel holds anything
// else than 0 or 1 (such as patch padding).
torch::Tensor PackLabels(const torch::Tensor& mask, DType dtype);
// Packed [B, spatial...] -> float 0/1 [B, K, spatial...]; -1 gives zeros.
torch::Tensor UnpackLabels(const torch::Tensor& packed, int64_t k);

struct ImageMask {
  torch::Tensor image;  // float [B, C, H, W]
  torch::Tensor mask;   // int64 [B, H, W], or undefined
};

// Applies the random transforms of `options` for batch (epoch, step), then the resize.
// Per sample: flips, affine (rotation, scale, translation), intensity. Per batch: the crop
// or pad offset. `mask` may be undefined; when defined its spatial size must equal the
// image's.
ImageMask Augment(ImageMask in, const AugmentOptions& options, uint64_t epoch, uint64_t step);

// Resize only (the deterministic part, for validation and prediction).
ImageMask Resize(ImageMask in, int64_t h, int64_t w);

// Resizes each sample of a batch zero-padded to its largest sample from its own size
// sizes[i] = {H, W} to h x w, so that smaller samples are not squashed with the padding.
// A batch of one size is resized as Resize does. h or w <= 0: each sample is cropped to
// its own size only when all share it (else returned as is).
ImageMask ResizeEach(ImageMask in, const std::vector<std::vector<int64_t>>& sizes, int64_t h, int64_t w);

}  // namespace shardify::trainer
