// Models of shardtrain: MLP, small CNN, ResNet-18, DenseNet-121, UNet-2D, UNet-3D.
//
// Every 2D model maps a float image batch [B, C, H, W] to logits: [B, K] for the
// classifiers, [B, K, H, W] for "unet" (K = num_classes). "unet3d" maps volumes
// [B, C, D, H, W] to [B, K, D, H, W]. Construction may throw c10::Error (LibTorch);
// trainer/ catches it at its public entry points (MakeModel returns a Result).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace shardify::trainer {

// What to build. `height`/`width` matter only to "mlp" (its input size is C*H*W).
struct ModelSpec {
  std::string name = "mlp";  // mlp | cnn | resnet18 | densenet121 | unet | unet3d
  int64_t in_channels = 1;
  int64_t num_classes = 10;
  int64_t height = 28;
  int64_t width = 28;
  int64_t unet_base_channels = 16;  // "unet", "unet3d": channels of the first level (x2 per level)
};

class Model : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// What a model does with its input.
enum class ModelTask { kClassify, kSegment2d, kSegment3d };

// One entry of the model table: adding a model is one entry here plus its module.
struct ModelInfo {
  const char* name;
  ModelTask task;
  bool fixed_input_size;                             // needs every image at the size of ModelSpec::height x width
  const char* help;                                  // one line for --help
  std::shared_ptr<Model> (*make)(const ModelSpec&);  // may throw c10::Error
};

// The table, in a stable order (for --help and error messages).
const std::vector<ModelInfo>& Models();
// The entry named `name`, or nullptr.
const ModelInfo* FindModel(const std::string& name);
// "mlp | cnn | ..." or "mlp, cnn, ...": the names of the table joined by `separator`.
std::string ModelNameList(const std::string& separator);
// True for models that predict a class per pixel (or voxel).
bool IsSegmentationModel(const std::string& name);
// True for models of 3D volumes, trained on patches and validated by sliding window.
bool IsVolumeModel(const std::string& name);

// Builds a freshly initialized model (initialization uses LibTorch's global RNG: seed it
// with torch::manual_seed first for reproducible weights). Errors: unknown name, sizes < 1.
Result<std::shared_ptr<Model>> MakeModel(const ModelSpec& spec);

}  // namespace shardify::trainer
