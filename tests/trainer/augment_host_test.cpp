// nnU-Net's augmentation on the host (NnUnetAugment::ApplySample, reader/augment_host.cpp)
// against the device path (ApplyOnDevice on CPU tensors), sample by sample, on the same
// plan: images within float rounding, masks by nearest neighbour equal, masks resampled as
// nnU-Net does equal but where float rounding tips a tie.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "catch_torch.h"
#include "trainer/augment.h"

namespace st = shardify::trainer;

namespace {

// A smooth field per channel (random phases and frequencies, different per sample) over
// [B, C, spatial...], and labels 0, 1, 2 from thresholds of channel 0, with -1 (outside the
// labelled data) in a slab along the last axis and `pad` in one voxel of every 7.
st::ImageMask Phantom(int64_t batch, int64_t channels, const std::vector<int64_t>& spatial, uint64_t seed,
                      int64_t pad) {
  torch::manual_seed(seed);
  std::vector<int64_t> shape = {batch, channels};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  torch::Tensor image = torch::zeros(shape);
  for (size_t a = 0; a < spatial.size(); ++a) {
    std::vector<int64_t> view(shape.size(), 1), per(shape.size(), 1);
    view[a + 2] = spatial[a];
    per[0] = batch;
    per[1] = channels;
    const torch::Tensor pos = torch::arange(spatial[a], torch::kFloat).view(view);
    image = image + (pos * (0.15 + 0.3 * torch::rand(per)) + 6 * torch::rand(per)).sin() * (1 + torch::rand(per));
  }
  image = image + 0.05 * torch::randn(shape);
  const torch::Tensor f = image.select(1, 0);
  torch::Tensor mask = (f > -0.5).to(torch::kLong) + (f > 0.8).to(torch::kLong);
  const int64_t last = int64_t(spatial.size());
  mask.narrow(last, 0, std::max<int64_t>(1, spatial.back() / 6)).fill_(-1);
  mask.view({-1}).slice(0, 3, mask.numel(), 7).fill_(pad);
  return {image, mask};
}

struct HostDeviceAgreement {
  double max_diff = 0, max_abs = 0;
  int64_t voxels = 0, equal = 0;
};

// Applies `plan` to `in` both ways; accumulates the differences into `a`.
void Compare(const st::NnUnetAugment& aug, const st::ImageMask& in, const st::AugmentPlan& plan,
             HostDeviceAgreement& a) {
  const st::ImageMask device = st::ApplyOnDevice(aug, in, plan);
  const int64_t batch = in.image.size(0), channels = in.image.size(1);
  const torch::Tensor mask32 = in.mask.to(torch::kInt).contiguous(), image = in.image.contiguous();
  torch::Tensor host = torch::empty_like(device.image), host_mask = torch::empty_like(device.mask, torch::kInt);
  shardify::AugmentScratch scratch;
  for (int64_t b = 0; b < batch; ++b) {
    const shardify::Status s =
        aug.ApplySample(plan, b, channels, image[b].data_ptr<float>(), mask32[b].data_ptr<int32_t>(),
                        host[b].data_ptr<float>(), host_mask[b].data_ptr<int32_t>(), &scratch);
    REQUIRE(s.ok());
  }
  const torch::Tensor same = host_mask.to(torch::kLong) == device.mask;
  a.voxels += same.numel();
  a.equal += same.sum().item<int64_t>();
  // Where the labels differ, a masked image channel may differ too: compare elsewhere.
  const torch::Tensor diff = (host - device.image).abs().masked_fill(same.logical_not().unsqueeze(1), 0);
  a.max_diff = std::max(a.max_diff, diff.max().item<double>());
  a.max_abs = std::max(a.max_abs, device.image.abs().max().item<double>());
}

struct Case {
  std::vector<int64_t> patch;
  std::string p;  // --aug-p
  st::MaskMode mode;
};

}  // namespace

TEST_CASE("augment: the host path gives the device path's images and labels, sample by sample") {
  const std::vector<Case> cases = {
      {{20, 24}, "all=1", st::MaskMode::kLinear},
      {{20, 24}, "", st::MaskMode::kLinear},
      {{20, 24}, "all=1", st::MaskMode::kNearest},
      {{10, 12, 9}, "all=1", st::MaskMode::kLinear},
      {{10, 12, 9}, "", st::MaskMode::kLinear},
      {{10, 12, 9}, "all=1", st::MaskMode::kNearest},
      {{3, 14, 12}, "all=1,mirror=0.5", st::MaskMode::kLinear},  // anisotropic: in-plane
  };
  HostDeviceAgreement linear, nearest;
  for (const Case& c : cases) {
    for (const uint64_t seed : {1, 5, 99}) {
      st::NnUnetAugmentOptions o;
      if (!c.p.empty()) REQUIRE(st::ParseAugProbabilities(c.p, &o).ok());
      o.seed = seed;
      o.mask_mode = c.mode;
      o.image_pad = seed == 5 ? -1.5 : 0;
      o.label_pad = seed == 99 ? 255 : -1;
      o.ignore_label = seed == 1 ? std::optional<int64_t>(-3) : std::nullopt;
      o.mask_image_channels = std::vector<int64_t>{1};
      auto aug = st::NnUnetAugment::Create(c.patch, o);
      REQUIRE(aug.ok());
      std::vector<int64_t> spatial = c.patch;
      for (size_t i = 0; i < spatial.size(); ++i) spatial[i] += 2 * aug->margin()[i];
      const st::ImageMask in = Phantom(4, 2, spatial, seed, o.label_pad);
      for (const uint64_t step : {0, 7}) {
        INFO("patch rank " << c.patch.size() << ", p '" << c.p << "', seed " << seed << ", step " << step);
        Compare(*aug, in, aug->Draw(4, 2, seed, step), c.mode == st::MaskMode::kLinear ? linear : nearest);
      }
    }
  }
  for (const HostDeviceAgreement* a : {&linear, &nearest}) {
    CAPTURE(a->max_diff, a->max_abs, a->voxels, a->equal);
    CHECK(a->max_diff <= 1e-4 * (1 + a->max_abs));
  }
  CHECK(nearest.equal == nearest.voxels);
  CHECK(double(linear.equal) >= 0.999 * double(linear.voxels));
}
