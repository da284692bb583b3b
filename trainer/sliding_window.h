// Sliding-window inference over whole volumes with a model trained on patches.
//
// The volume is covered by patch-sized windows that overlap by `overlap` of the patch
// along each axis (starts spread evenly from 0 to size - patch, both ends included, as
// nnU-Net does); each window's softmax (or sigmoids) is weighted by a Gaussian centred on the window
// (sigma = patch / 8 per axis), so voxels near a window's border, which saw less context,
// count less; the weighted sum is divided by the summed weights. A volume smaller than the
// patch along an axis is padded with `pad_value` and the result cropped back.
// Functions here may throw c10::Error (the trainer's entry points catch it).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/models.h"

namespace shardify::trainer {

struct SlidingWindowOptions {
  std::vector<int64_t> patch;  // spatial window, e.g. {D, H, W}
  double overlap = 0.5;        // share of the patch shared by neighbouring windows, [0, 1)
  int64_t batch = 2;           // windows per forward pass
  double pad_value = 0;        // image value where a small volume is padded
  bool gaussian = true;        // weight windows by a Gaussian; false = plain average
  bool sigmoid = false;        // per-class sigmoids (multi-label) instead of a softmax
};

// Window starts along one axis of `size` for a window of `patch` (size >= patch >= 1):
// ceil((size - patch) / (patch * (1 - overlap))) + 1 starts from 0 to size - patch.
std::vector<int64_t> WindowStarts(int64_t size, int64_t patch, double overlap);

// Class probabilities [K, spatial...] (softmax, or sigmoid per class; float, on the image's device) for one image
// [C, spatial...] (float, normalized as in training). The model runs in whatever mode it
// is in; call it under torch::NoGradGuard with the model in eval mode.
torch::Tensor SlidingWindowProbs(Model& model, const torch::Tensor& image, const SlidingWindowOptions& options);

}  // namespace shardify::trainer
