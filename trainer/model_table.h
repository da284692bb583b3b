// shardtrain's table of models: names, tasks and one-line help, without LibTorch, so that
// a command line can list and check the models without building one (models.h builds them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardify::trainer {

class Model;  // models.h

// What to build. `height`/`width` matter only to "mlp" (its input size is C*H*W).
struct ModelSpec {
  std::string name = "mlp";  // mlp | cnn | resnet18 | densenet121 | unet | unet3d
  int64_t in_channels = 1;
  int64_t num_classes = 10;
  int64_t height = 28;
  int64_t width = 28;
  int64_t unet_base_channels = 16;  // "unet", "unet3d": channels of the first level (x2 per level)
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

}  // namespace shardify::trainer
