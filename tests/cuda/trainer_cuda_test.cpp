// The trainer on a CUDA device: batches from pinned slots as device tensors, nnU-Net's
// augmentation on the device against the same plan on the CPU, and a short training run.
#include <string>
#include <vector>

#include "reader/loader.h"
#include "tests/common/skip.h"
#include "tests/common/temp_dir.h"
#include "tests/trainer/catch_torch.h"
#include "tests/trainer/fixtures.h"
#include "trainer/augment.h"
#include "trainer/train.h"
#include "trainer/transforms.h"

namespace st = shardify::trainer;

namespace shardify {
namespace {

#define SKIP_WITHOUT_TORCH_CUDA() \
  if (!torch::cuda::is_available()) SHARDIFY_SKIP("LibTorch sees no CUDA device")

// A smooth two-channel image [B, 2, spatial...] and its threshold as a two-label mask.
st::ImageMask Phantom(int64_t batch, const std::vector<int64_t>& spatial) {
  std::vector<int64_t> shape = {batch, 1};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  torch::Tensor f = torch::zeros(shape);
  for (size_t a = 0; a < spatial.size(); ++a) {
    std::vector<int64_t> view(shape.size(), 1);
    view[a + 2] = spatial[a];
    f = f + (torch::arange(spatial[a], torch::kFloat).view(view) * (0.2 + 0.1 * double(a))).sin();
  }
  std::vector<int64_t> per_sample(shape.size(), 1);
  per_sample[0] = batch;
  f = f + torch::arange(batch, torch::kFloat).view(per_sample) * 0.1;
  return {torch::cat({f * 50 + 100, f.neg() * 20}, 1), (f > 0.3).squeeze(1).to(torch::kLong) + (f > 1.2).squeeze(1)};
}

TEST_CASE("cuda: a batch in pinned slots becomes a device tensor holding its bytes") {
  SKIP_WITHOUT_TORCH_CUDA();
  testing::TempDir dir;
  REQUIRE(testing::WriteClassFixture(dir / "data", false, 64).ok());
  LoaderOptions o;
  o.batch_size = 16;
  auto loader = Loader::Open(dir / "data", o);
  REQUIRE(loader.ok());
  auto batch = (*loader)->Next();
  REQUIRE(batch.ok());
  REQUIRE((*batch)->pinned);
  for (const std::string name : {"image", "label"}) {
    auto host = st::FieldTensor(*batch, name);
    REQUIRE(host.ok());
    const torch::Tensor device = st::ToDevice(*host, torch::Device(torch::kCUDA), true);
    CHECK(device.is_cuda());
    CHECK(torch::equal(device.cpu(), *host));
  }
}

TEST_CASE("cuda: nnU-Net's augmentation on the device gives the CPU's result for the same plan") {
  SKIP_WITHOUT_TORCH_CUDA();
  for (const std::vector<int64_t>& patch : {std::vector<int64_t>{12, 12, 12}, std::vector<int64_t>{24, 20}}) {
    st::NnUnetAugmentOptions opt;
    REQUIRE(st::ParseAugProbabilities("all=1", &opt).ok());
    opt.seed = 11;
    auto aug = st::NnUnetAugment::Create(patch, opt);
    REQUIRE(aug.ok());
    std::vector<int64_t> spatial;
    for (size_t a = 0; a < patch.size(); ++a) spatial.push_back(patch[a] + 2 * aug->margin()[a]);
    const st::ImageMask cpu_in = Phantom(4, spatial);
    const st::AugmentPlan plan = aug->Draw(4, 2, 3, 5);
    const st::ImageMask cpu = st::ApplyOnDevice(*aug, cpu_in, plan);
    const st::ImageMask gpu = st::ApplyOnDevice(*aug, {cpu_in.image.cuda(), cpu_in.mask.cuda()}, plan);
    REQUIRE(gpu.image.is_cuda());
    REQUIRE(gpu.image.sizes() == cpu.image.sizes());
    const double worst = (gpu.image.cpu() - cpu.image).abs().max().item<double>();
    INFO("patch rank " << patch.size() << ": largest image difference " << worst);
    CHECK(worst < 1e-2);
    const double mismatched = (gpu.mask.cpu() != cpu.mask).to(torch::kDouble).mean().item<double>();
    INFO("mask voxels that differ: " << mismatched);
    CHECK(mismatched < 1e-3);  // only where two labels tie to rounding
  }
}

TEST_CASE("cuda: shardtrain trains on the device and lowers the loss", "[subprocess]") {
  SKIP_WITHOUT_TORCH_CUDA();
  testing::TempDir dir;
  REQUIRE(testing::WriteClassFixture(dir / "data", false, 64).ok());
  st::TrainOptions o;
  o.data_dir = dir / "data";
  o.out_dir = dir / "out";
  o.model.name = "cnn";
  o.batch_size = 16;
  o.epochs = 2;
  o.threads = 2;
  o.optimizer.lr = 3e-3;
  o.seed = 5;
  o.device = "cuda";
  auto r = st::Train(o);
  REQUIRE(r.ok());
  CHECK(r->device.rfind("cuda", 0) == 0);
  CHECK(r->history.back().train_loss < r->history.front().train_loss);
}

}  // namespace
}  // namespace shardify
