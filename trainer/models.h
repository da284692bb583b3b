// Models of shardtrain: MLP, small CNN, ResNet-18, DenseNet-121, UNet-2D, UNet-3D.
//
// Every 2D model maps a float image batch [B, C, H, W] to logits: [B, K] for the
// classifiers, [B, K, H, W] for "unet" (K = num_classes). "unet3d" maps volumes
// [B, C, D, H, W] to [B, K, D, H, W]. Construction may throw c10::Error (LibTorch);
// trainer/ catches it at its public entry points (MakeModel returns a Result). The table
// of models and ModelSpec are in model_table.h, which needs no LibTorch.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "base/status.h"
#include "trainer/model_table.h"

namespace shardify::trainer {

class Model : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// Builds a freshly initialized model (initialization uses LibTorch's global RNG: seed it
// with torch::manual_seed first for reproducible weights). Errors: unknown name, sizes < 1.
Result<std::shared_ptr<Model>> MakeModel(const ModelSpec& spec);

}  // namespace shardify::trainer
