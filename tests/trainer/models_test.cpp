// Tests of trainer/models.cpp that pin what checkpoints depend on: the names, order and
// shapes of each model's parameters and buffers, and what a model computes from them.
#include "trainer/models.h"

#include <string>
#include <vector>

#include "catch_torch.h"

namespace st = shardify::trainer;

namespace {

// A small UNet of `name` ("unet" or "unet3d"): 2 input channels, 3 classes, 2 base channels.
std::shared_ptr<st::Model> SmallUNet(const std::string& name) {
  st::ModelSpec spec;
  spec.name = name;
  spec.in_channels = 2;
  spec.num_classes = 3;
  spec.unet_base_channels = 2;
  auto m = st::MakeModel(spec);
  REQUIRE(m.ok());
  return *m;
}

// "name [d0, d1, ...]" for each tensor, in the module's order.
std::vector<std::string> Describe(const torch::OrderedDict<std::string, torch::Tensor>& tensors) {
  std::vector<std::string> out;
  for (const auto& t : tensors) {
    std::string shape;
    for (int64_t d : t.value().sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    out.push_back(t.key() + " [" + shape + "]");
  }
  return out;
}

// sin(k * i + offset) over the elements i of `shape`, in float32: values that need no RNG,
// so they are the same on every platform and LibTorch version.
torch::Tensor Wave(torch::IntArrayRef shape, double k, double offset) {
  const int64_t n = c10::multiply_integers(shape);
  return torch::sin(torch::arange(n, torch::kFloat64) * k + offset).to(torch::kFloat32).reshape(shape);
}

// Gives every parameter and floating-point buffer its own wave (variances stay positive).
void FillWeights(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  double offset = 0.1;
  for (auto& p : m.named_parameters()) {
    p.value().copy_(Wave(p.value().sizes(), 0.37, offset) * 0.5);
    offset += 0.7;
  }
  for (auto& b : m.named_buffers()) {
    if (!b.value().is_floating_point()) continue;
    const bool variance = b.key().find("var") != std::string::npos;
    b.value().copy_(Wave(b.value().sizes(), 0.21, offset) * 0.2 + (variance ? 1.0 : 0.0));
    offset += 0.3;
  }
}

// Sums of the output that a change of layer, order, padding, pooling or upsampling moves.
struct Checksum {
  double sum, weighted, std;
};

Checksum Forward(st::Model& m, const std::vector<int64_t>& input_shape, bool training) {
  torch::NoGradGuard no_grad;
  m.train(training);
  const torch::Tensor y = m.forward(Wave(input_shape, 0.13, 0.5)).to(torch::kFloat64);
  const torch::Tensor w = Wave(y.sizes(), 0.011, 0.2).to(torch::kFloat64);
  return {y.sum().item<double>(), (y * w).sum().item<double>(), y.std().item<double>()};
}

void CheckNear(const Checksum& got, const Checksum& want) {
  CHECK(got.sum == Approx(want.sum).epsilon(1e-4));
  CHECK(got.weighted == Approx(want.weighted).epsilon(1e-4));
  CHECK(got.std == Approx(want.std).epsilon(1e-4));
}

}  // namespace

TEST_CASE("trainer: unet keeps the names, order and shapes of the parameters and buffers of its checkpoints") {
  const std::vector<std::string> parameters = {
      "down.0.0.weight [2, 2, 3, 3]",   "down.0.1.weight [2]",  "down.0.1.bias [2]",
      "down.0.3.weight [2, 2, 3, 3]",   "down.0.4.weight [2]",  "down.0.4.bias [2]",
      "down.1.0.weight [4, 2, 3, 3]",   "down.1.1.weight [4]",  "down.1.1.bias [4]",
      "down.1.3.weight [4, 4, 3, 3]",   "down.1.4.weight [4]",  "down.1.4.bias [4]",
      "down.2.0.weight [8, 4, 3, 3]",   "down.2.1.weight [8]",  "down.2.1.bias [8]",
      "down.2.3.weight [8, 8, 3, 3]",   "down.2.4.weight [8]",  "down.2.4.bias [8]",
      "down.3.0.weight [16, 8, 3, 3]",  "down.3.1.weight [16]", "down.3.1.bias [16]",
      "down.3.3.weight [16, 16, 3, 3]", "down.3.4.weight [16]", "down.3.4.bias [16]",
      "up.0.0.weight [8, 24, 3, 3]",    "up.0.1.weight [8]",    "up.0.1.bias [8]",
      "up.0.3.weight [8, 8, 3, 3]",     "up.0.4.weight [8]",    "up.0.4.bias [8]",
      "up.1.0.weight [4, 12, 3, 3]",    "up.1.1.weight [4]",    "up.1.1.bias [4]",
      "up.1.3.weight [4, 4, 3, 3]",     "up.1.4.weight [4]",    "up.1.4.bias [4]",
      "up.2.0.weight [2, 6, 3, 3]",     "up.2.1.weight [2]",    "up.2.1.bias [2]",
      "up.2.3.weight [2, 2, 3, 3]",     "up.2.4.weight [2]",    "up.2.4.bias [2]",
      "head.weight [3, 2, 1, 1]",       "head.bias [3]"};
  const std::vector<std::string> buffers = {
      "down.0.1.running_mean [2]",  "down.0.1.running_var [2]",  "down.0.1.num_batches_tracked []",
      "down.0.4.running_mean [2]",  "down.0.4.running_var [2]",  "down.0.4.num_batches_tracked []",
      "down.1.1.running_mean [4]",  "down.1.1.running_var [4]",  "down.1.1.num_batches_tracked []",
      "down.1.4.running_mean [4]",  "down.1.4.running_var [4]",  "down.1.4.num_batches_tracked []",
      "down.2.1.running_mean [8]",  "down.2.1.running_var [8]",  "down.2.1.num_batches_tracked []",
      "down.2.4.running_mean [8]",  "down.2.4.running_var [8]",  "down.2.4.num_batches_tracked []",
      "down.3.1.running_mean [16]", "down.3.1.running_var [16]", "down.3.1.num_batches_tracked []",
      "down.3.4.running_mean [16]", "down.3.4.running_var [16]", "down.3.4.num_batches_tracked []",
      "up.0.1.running_mean [8]",    "up.0.1.running_var [8]",    "up.0.1.num_batches_tracked []",
      "up.0.4.running_mean [8]",    "up.0.4.running_var [8]",    "up.0.4.num_batches_tracked []",
      "up.1.1.running_mean [4]",    "up.1.1.running_var [4]",    "up.1.1.num_batches_tracked []",
      "up.1.4.running_mean [4]",    "up.1.4.running_var [4]",    "up.1.4.num_batches_tracked []",
      "up.2.1.running_mean [2]",    "up.2.1.running_var [2]",    "up.2.1.num_batches_tracked []",
      "up.2.4.running_mean [2]",    "up.2.4.running_var [2]",    "up.2.4.num_batches_tracked []"};
  const auto m = SmallUNet("unet");
  CHECK(Describe(m->named_parameters()) == parameters);
  CHECK(Describe(m->named_buffers()) == buffers);
}

TEST_CASE("trainer: unet3d keeps the names, order and shapes of the parameters of its checkpoints") {
  const std::vector<std::string> parameters = {
      "down.0.0.weight [2, 2, 3, 3, 3]",   "down.0.1.weight [2]",  "down.0.1.bias [2]",
      "down.0.3.weight [2, 2, 3, 3, 3]",   "down.0.4.weight [2]",  "down.0.4.bias [2]",
      "down.1.0.weight [4, 2, 3, 3, 3]",   "down.1.1.weight [4]",  "down.1.1.bias [4]",
      "down.1.3.weight [4, 4, 3, 3, 3]",   "down.1.4.weight [4]",  "down.1.4.bias [4]",
      "down.2.0.weight [8, 4, 3, 3, 3]",   "down.2.1.weight [8]",  "down.2.1.bias [8]",
      "down.2.3.weight [8, 8, 3, 3, 3]",   "down.2.4.weight [8]",  "down.2.4.bias [8]",
      "down.3.0.weight [16, 8, 3, 3, 3]",  "down.3.1.weight [16]", "down.3.1.bias [16]",
      "down.3.3.weight [16, 16, 3, 3, 3]", "down.3.4.weight [16]", "down.3.4.bias [16]",
      "up.0.0.weight [8, 24, 3, 3, 3]",    "up.0.1.weight [8]",    "up.0.1.bias [8]",
      "up.0.3.weight [8, 8, 3, 3, 3]",     "up.0.4.weight [8]",    "up.0.4.bias [8]",
      "up.1.0.weight [4, 12, 3, 3, 3]",    "up.1.1.weight [4]",    "up.1.1.bias [4]",
      "up.1.3.weight [4, 4, 3, 3, 3]",     "up.1.4.weight [4]",    "up.1.4.bias [4]",
      "up.2.0.weight [2, 6, 3, 3, 3]",     "up.2.1.weight [2]",    "up.2.1.bias [2]",
      "up.2.3.weight [2, 2, 3, 3, 3]",     "up.2.4.weight [2]",    "up.2.4.bias [2]",
      "head.weight [3, 2, 1, 1, 1]",       "head.bias [3]"};
  const auto m = SmallUNet("unet3d");
  CHECK(Describe(m->named_parameters()) == parameters);
  CHECK(m->named_buffers().is_empty());  // InstanceNorm keeps no running statistics
}

// The checksums were taken from the models as they were before UNet-2D and UNet-3D shared
// one implementation: the same weights must give the same logits.
TEST_CASE("trainer: unet and unet3d compute the same logits from the same weights") {
  SECTION("unet, eval and train") {
    const auto m = SmallUNet("unet");
    FillWeights(*m);
    CheckNear(Forward(*m, {2, 2, 9, 7}, false), {-135.099703, -49.7014788, 0.0987398388});
    CheckNear(Forward(*m, {2, 2, 9, 7}, true), {-135.477837, -49.9432035, 0.0993798159});
  }
  SECTION("unet3d") {
    const auto m = SmallUNet("unet3d");
    FillWeights(*m);
    CheckNear(Forward(*m, {1, 2, 5, 6, 7}, false), {-223.831482, -33.2447723, 0.0976467364});
  }
}
