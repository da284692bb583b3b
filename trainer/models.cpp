#include "trainer/models.h"

#include <algorithm>
#include <cassert>

#include "trainer/loop_internal.h"

namespace shardify::trainer {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

nn::Conv2d Conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = -1) {
  if (pad < 0) pad = k / 2;
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}

// 784-128-64-10 for 28x28 gray images: the seed benchmark.
class Mlp : public Model {
 public:
  explicit Mlp(const ModelSpec& s)
      : fc1_(register_module("fc1", nn::Linear(s.in_channels * s.height * s.width, 128))),
        fc2_(register_module("fc2", nn::Linear(128, 64))),
        fc3_(register_module("fc3", nn::Linear(64, s.num_classes))) {}
  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    x = torch::relu(fc1_->forward(x));
    x = torch::relu(fc2_->forward(x));
    return fc3_->forward(x);
  }

 private:
  nn::Linear fc1_, fc2_, fc3_;
};

// Three conv-BN-ReLU stages (16, 32, 64 channels, pooled 2x twice), global pooling to 4x4,
// then 1024 -> 128 -> K with dropout. Works for any input size >= 4x4.
class SmallCnn : public Model {
 public:
  explicit SmallCnn(const ModelSpec& s) {
    int64_t in = s.in_channels;
    for (int64_t out : {16, 32, 64}) {
      features_->push_back(Conv(in, out, 3));
      features_->push_back(nn::BatchNorm2d(out));
      features_->push_back(nn::ReLU(true));
      if (out != 64) features_->push_back(nn::MaxPool2d(2));
      in = out;
    }
    register_module("features", features_);
    fc1_ = register_module("fc1", nn::Linear(64 * 16, 128));
    fc2_ = register_module("fc2", nn::Linear(128, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = F::adaptive_avg_pool2d(features_->forward(x), F::AdaptiveAvgPool2dFuncOptions({4, 4}));
    x = torch::relu(fc1_->forward(x.flatten(1)));
    x = F::dropout(x, F::DropoutFuncOptions().p(0.25).training(is_training()));
    return fc2_->forward(x);
  }

 private:
  nn::Sequential features_;
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", Conv(in, out, 3, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", Conv(out, out, 3))),
        bn2_(register_module("bn2", nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      down_ = register_module("downsample", nn::Sequential(Conv(in, out, 1, stride, 0), nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    return torch::relu(y + (down_ ? down_->forward(x) : x));
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Sequential down_{nullptr};
};
TORCH_MODULE(BasicBlock);

// ResNet-18 (He et al. 2016) with a configurable number of input channels.
class ResNet18 : public Model {
 public:
  explicit ResNet18(const ModelSpec& s) {
    stem_ =
        register_module("stem", nn::Sequential(Conv(s.in_channels, 64, 7, 2, 3), nn::BatchNorm2d(64), nn::ReLU(true),
                                               nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1))));
    int64_t in = 64;
    for (int64_t out : {64, 128, 256, 512}) {
      int64_t stride = out == 64 ? 1 : 2;
      layers_->push_back(BasicBlock(in, out, stride));
      layers_->push_back(BasicBlock(out, out, 1));
      in = out;
    }
    register_module("layers", layers_);
    fc_ = register_module("fc", nn::Linear(512, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = layers_->forward(stem_->forward(x));
    x = F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({1, 1}));
    return fc_->forward(x.flatten(1));
  }

 private:
  nn::Sequential stem_{nullptr};
  nn::Sequential layers_;
  nn::Linear fc_{nullptr};
};

// DenseNet layer: BN-ReLU-1x1 conv (4k) - BN-ReLU-3x3 conv (k), output concatenated.
class DenseLayerImpl : public nn::Module {
 public:
  DenseLayerImpl(int64_t in, int64_t growth)
      : body_(register_module(
            "body", nn::Sequential(nn::BatchNorm2d(in), nn::ReLU(true), Conv(in, 4 * growth, 1, 1, 0),
                                   nn::BatchNorm2d(4 * growth), nn::ReLU(true), Conv(4 * growth, growth, 3)))) {}
  torch::Tensor forward(torch::Tensor x) { return torch::cat({x, body_->forward(x)}, 1); }

 private:
  nn::Sequential body_;
};
TORCH_MODULE(DenseLayer);

// DenseNet-121 (Huang et al. 2017): growth 32, blocks 6-12-24-16, compression 0.5.
class DenseNet121 : public Model {
 public:
  explicit DenseNet121(const ModelSpec& s) {
    const int64_t growth = 32;
    int64_t ch = 64;
    net_->push_back(Conv(s.in_channels, ch, 7, 2, 3));
    net_->push_back(nn::BatchNorm2d(ch));
    net_->push_back(nn::ReLU(true));
    net_->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    const int64_t blocks[] = {6, 12, 24, 16};
    for (int b = 0; b < 4; ++b) {
      for (int64_t i = 0; i < blocks[b]; ++i, ch += growth) net_->push_back(DenseLayer(ch, growth));
      if (b == 3) break;
      net_->push_back(nn::BatchNorm2d(ch));
      net_->push_back(nn::ReLU(true));
      net_->push_back(Conv(ch, ch / 2, 1, 1, 0));
      net_->push_back(nn::AvgPool2d(nn::AvgPool2dOptions(2).stride(2).ceil_mode(true)));
      ch /= 2;
    }
    net_->push_back(nn::BatchNorm2d(ch));
    net_->push_back(nn::ReLU(true));
    register_module("features", net_);
    fc_ = register_module("fc", nn::Linear(ch, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = F::adaptive_avg_pool2d(net_->forward(x), F::AdaptiveAvgPool2dFuncOptions({1, 1}));
    return fc_->forward(x.flatten(1));
  }

 private:
  nn::Sequential net_;
  nn::Linear fc_{nullptr};
};

// The layers of a UNet that depend on its spatial rank (2 or 3). Rank 2 is the classic
// UNet (BatchNorm, ReLU); rank 3 is nnU-Net's style (affine InstanceNorm, LeakyReLU 0.01).
// Convolutions keep the size (padding k / 2); those of the blocks have no bias, a norm follows.
nn::AnyModule UNetConv(int rank, int64_t in, int64_t out, int64_t k, bool bias) {
  if (rank == 2) return nn::AnyModule(nn::Conv2d(nn::Conv2dOptions(in, out, k).padding(k / 2).bias(bias)));
  return nn::AnyModule(nn::Conv3d(nn::Conv3dOptions(in, out, k).padding(k / 2).bias(bias)));
}

nn::AnyModule UNetNorm(int rank, int64_t channels) {
  if (rank == 2) return nn::AnyModule(nn::BatchNorm2d(channels));
  return nn::AnyModule(nn::InstanceNorm3d(nn::InstanceNorm3dOptions(channels).affine(true)));
}

nn::AnyModule UNetActivation(int rank) {
  if (rank == 2) return nn::AnyModule(nn::ReLU(true));
  return nn::AnyModule(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.01).inplace(true)));
}

torch::Tensor UNetPool(int rank, const torch::Tensor& x) {
  if (rank == 2) return F::max_pool2d(x, F::MaxPool2dFuncOptions(2).ceil_mode(true));
  return F::max_pool3d(x, F::MaxPool3dFuncOptions(2).ceil_mode(true));
}

// One level of a UNet: (conv 3 - norm - activation) twice, `in` -> `out` channels.
// Its modules are named 0 to 5, the names its parameters have in checkpoints.
nn::Sequential UNetBlock(int rank, int64_t in, int64_t out) {
  nn::Sequential block;
  for (int64_t from : {in, out}) {
    block->push_back(UNetConv(rank, from, out, 3, false));
    block->push_back(UNetNorm(rank, out));
    block->push_back(UNetActivation(rank));
  }
  return block;
}

// UNet of 4 levels (c, 2c, 4c, 8c channels) over images [B, C, H, W] (rank 2) or volumes
// [B, C, D, H, W] (rank 3): max pooling down, nearest upsampling to the skip connection's
// size (so any input size works), a 1x1 (1x1x1) head to K logits per pixel (voxel).
// Rank 2 is UNet-2D (Ronneberger et al. 2015); rank 3 is UNet-3D in nnU-Net's style, kept
// small. Checkpoints name the parameters down.<level>.<layer>.*, up.<level>.<layer>.*, head.*.
class UNet : public Model {
 public:
  UNet(const ModelSpec& s, int rank) : rank_(rank) {
    assert(rank == 2 || rank == 3);
    const int64_t c = std::max<int64_t>(s.unet_base_channels, 1);
    int64_t in = s.in_channels;
    for (int64_t level = 0; level < 4; ++level) {
      down_->push_back(UNetBlock(rank, in, c << level));
      in = c << level;
    }
    for (int64_t level = 2; level >= 0; --level) {
      up_->push_back(UNetBlock(rank, in + (c << level), c << level));
      in = c << level;
    }
    register_module("down", down_);
    register_module("up", up_);
    head_ = UNetConv(rank, c, s.num_classes, 1, true);
    register_module("head", head_.ptr());
  }
  torch::Tensor forward(torch::Tensor x) override {
    std::vector<torch::Tensor> skips;
    for (size_t i = 0; i < down_->size(); ++i) {
      if (i > 0) x = UNetPool(rank_, x);
      x = down_[i]->as<nn::Sequential>()->forward(x);
      skips.push_back(x);
    }
    for (size_t i = 0; i < up_->size(); ++i) {
      const torch::Tensor& skip = skips[skips.size() - 2 - i];
      x = F::interpolate(x, F::InterpolateFuncOptions().size(skip.sizes().slice(2).vec()).mode(torch::kNearest));
      x = up_[i]->as<nn::Sequential>()->forward(torch::cat({x, skip}, 1));
    }
    return head_.forward(x);
  }

 private:
  int rank_;
  nn::ModuleList down_, up_;
  nn::AnyModule head_;
};

template <typename M>
std::shared_ptr<Model> Make(const ModelSpec& s) {
  return std::make_shared<M>(s);
}

template <int kRank>
std::shared_ptr<Model> MakeUNet(const ModelSpec& s) {
  return std::make_shared<UNet>(s, kRank);
}

}  // namespace

const std::vector<ModelInfo>& Models() {
  static const std::vector<ModelInfo> table = {
      {"mlp", ModelTask::kClassify, true, "784-128-64-10 style MLP on the flattened image (the seed benchmark)",
       &Make<Mlp>},
      {"cnn", ModelTask::kClassify, false, "a small 3-stage CNN", &Make<SmallCnn>},
      {"resnet18", ModelTask::kClassify, false, "ResNet-18, any number of input channels", &Make<ResNet18>},
      {"densenet121", ModelTask::kClassify, false, "DenseNet-121, any number of input channels", &Make<DenseNet121>},
      {"unet", ModelTask::kSegment2d, false, "2D segmentation of field 'mask'", &MakeUNet<2>},
      {"unet3d", ModelTask::kSegment3d, false, "volumes [C, D, H, W] trained on --patch patches", &MakeUNet<3>},
  };
  return table;
}

const ModelInfo* FindModel(const std::string& name) {
  for (const ModelInfo& m : Models()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

std::string ModelNameList(const std::string& separator) {
  std::string out;
  for (const ModelInfo& m : Models()) out += (out.empty() ? "" : separator) + m.name;
  return out;
}

bool IsSegmentationModel(const std::string& name) {
  const ModelInfo* m = FindModel(name);
  return m != nullptr && m->task != ModelTask::kClassify;
}

bool IsVolumeModel(const std::string& name) {
  const ModelInfo* m = FindModel(name);
  return m != nullptr && m->task == ModelTask::kSegment3d;
}

Result<std::shared_ptr<Model>> MakeModel(const ModelSpec& s) {
  const ModelInfo* info = FindModel(s.name);
  if (info == nullptr) return InvalidArgument("unknown model '" + s.name + "' (" + ModelNameList(", ") + ")");
  if (s.in_channels < 1 || s.num_classes < 1 || s.height < 1 || s.width < 1) {
    return InvalidArgument("model '" + s.name + "': channels, classes and sizes must be >= 1");
  }
  try {
    return info->make(s);
  } catch (const std::exception& e) {
    return detail::FromTorchException("model '" + s.name + "' for inputs " + std::to_string(s.in_channels) + "x" +
                                          std::to_string(s.height) + "x" + std::to_string(s.width),
                                      e);
  }
}

}  // namespace shardify::trainer
