// nnU-Net's augmentation on the device: the table and options, image/mask alignment under
// rotation, scaling and mirroring, nnU-Net's label resampling, masking and outside label,
// thread-count independence, identity at probability 0, and the observed rates of each
// transform.
#include "trainer/augment.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "catch_torch.h"

namespace st = shardify::trainer;
using shardify::StatusCode;

namespace {

constexpr int64_t kPad = -1;
constexpr double kImagePad = -10;

st::NnUnetAugmentOptions Only(const std::string& spec, uint64_t seed = 7) {
  st::NnUnetAugmentOptions o;
  REQUIRE(st::ParseAugProbabilities("all=0" + (spec.empty() ? "" : "," + spec), &o).ok());
  o.seed = seed;
  o.image_pad = kImagePad;
  o.label_pad = kPad;
  o.ignore_label = kPad;  // the padding stays visible
  return o;
}

st::NnUnetAugment Make(std::vector<int64_t> patch, const st::NnUnetAugmentOptions& o) {
  auto a = st::NnUnetAugment::Create(std::move(patch), o);
  REQUIRE(a.ok());
  return std::move(a).value();
}

// Two channels over [B, 2, spatial...]: a smooth field (gradient below 0.8 per voxel,
// different per sample), and 1 everywhere (it shows where resampling mixed in padding).
// The mask is the field's threshold at 0.3.
st::ImageMask SmoothPair(int64_t batch, std::vector<int64_t> spatial) {
  std::vector<int64_t> shape = {batch, 1};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  torch::Tensor f = torch::zeros(shape);
  const double freq[] = {1.0 / 3, 1.0 / 4, 1.0 / 5};
  for (size_t a = 0; a < spatial.size(); ++a) {
    std::vector<int64_t> view(shape.size(), 1), per_sample(shape.size(), 1);
    view[a + 2] = spatial[a];
    per_sample[0] = batch;
    const torch::Tensor pos = torch::arange(spatial[a], torch::kFloat).view(view);
    f = f + (pos * freq[a] + torch::arange(batch, torch::kFloat).view(per_sample)).sin();
  }
  return {torch::cat({f, torch::ones_like(f)}, 1), (f > 0.3).squeeze(1).to(torch::kLong)};
}

// Where resampling drew on data only (channel 1 still exactly 1), the mask is the
// threshold of the field wherever the field is clearly on one side of it; the mask is
// padded only where the image drew on padding (beyond the outermost voxel centres), and
// fully padded voxels hold the image padding.
void CheckAligned(const st::ImageMask& out, int64_t min_checked) {
  const torch::Tensor field = out.image.select(1, 0), ones = out.image.select(1, 1);
  const torch::Tensor data = (ones - 1).abs() < 1e-5, padded = out.mask == kPad;
  const torch::Tensor clear = data & ((field - 0.3).abs() > 1.0);
  CHECK((clear & (out.mask != (field > 0.3).to(torch::kLong))).sum().item<int64_t>() == 0);
  CHECK(clear.sum().item<int64_t>() >= min_checked);
  CHECK_FALSE((data & padded).any().item<bool>());
  CHECK(padded.masked_select((ones - kImagePad).abs() < 1e-5).all().item<bool>());
}

// nnU-Net's label at input position (y, x) of the label map m [H, W]
// (batchgeneratorsv2 0.3.2, SpatialTransform._apply_to_segmentation with mode_seg
// "bilinear", border_mode_seg "constant"): each label's bilinear weight times 1000, rounded
// to float16; the first largest in label order; `pad` beyond the outermost voxel centres.
int64_t NnUnetLabelAt(const torch::Tensor& m, double y, double x, int64_t pad) {
  const int64_t h = m.size(0), w = m.size(1);
  if (y < 0 || x < 0 || y > double(h - 1) || x > double(w - 1)) return pad;
  const auto y0 = static_cast<int64_t>(std::floor(y)), x0 = static_cast<int64_t>(std::floor(x));
  std::map<int64_t, double> weight;
  for (int64_t i = 0; i < h; ++i) {
    for (int64_t j = 0; j < w; ++j) weight[m[i][j].item<int64_t>()] += 0;
  }
  for (int64_t dy = 0; dy < 2; ++dy) {
    for (int64_t dx = 0; dx < 2; ++dx) {
      if (y0 + dy >= h || x0 + dx >= w) continue;
      const double wy = dy ? y - double(y0) : 1 - (y - double(y0)), wx = dx ? x - double(x0) : 1 - (x - double(x0));
      weight[m[y0 + dy][x0 + dx].item<int64_t>()] += wy * wx;
    }
  }
  int64_t best = 0;
  float best_value = -1;
  for (const auto& [label, v] : weight) {
    const float half = torch::tensor(float(v * 1000)).to(torch::kHalf).to(torch::kFloat).item<float>();
    if (half > best_value) best = label, best_value = half;
  }
  return best;
}

}  // namespace

TEST_CASE("augment: one table holds the defaults, and --aug-p edits them by name") {
  const st::NnUnetAugmentOptions d;
  for (size_t t = 0; t < st::kNumAugTransforms; ++t) CHECK(d.probability[t] == st::AugTransforms()[t].probability);
  CHECK(d.probability[shardify::AugIndex(st::AugTransform::kRotate)] == 0.2);
  CHECK(d.probability[shardify::AugIndex(st::AugTransform::kGamma)] == 0.3);
  CHECK(st::AugTransformsText().find("gamma_inv") != std::string::npos);
  st::NnUnetAugmentOptions o;
  REQUIRE(st::ParseAugProbabilities("rotate=0.5,noise=0,mirror=1", &o).ok());
  CHECK(o.probability[shardify::AugIndex(st::AugTransform::kRotate)] == 0.5);
  CHECK(o.probability[shardify::AugIndex(st::AugTransform::kNoise)] == 0);
  CHECK(o.probability[shardify::AugIndex(st::AugTransform::kMirror)] == 1);
  CHECK(o.probability[shardify::AugIndex(st::AugTransform::kBlur)] == 0.2);
  for (const char* bad : {"spin=0.1", "rotate=1.5", "rotate=-0.1", "rotate", "rotate=0.1x", "rotate=", "=0.2"}) {
    INFO(bad);
    const auto s = st::ParseAugProbabilities(bad, &o);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains(bad));
  }
  CHECK(*st::ParseAugPreset("none") == st::AugPreset::kNone);
  CHECK(*st::ParseAugPreset("nnunet") == st::AugPreset::kNnUnet);
  CHECK_FALSE(st::ParseAugPreset("monai").ok());
  CHECK_FALSE(st::NnUnetAugment::Create({8}, d).ok());
  CHECK_FALSE(st::NnUnetAugment::Create({8, 0}, d).ok());
}

TEST_CASE("augment: the margin covers nnU-Net's rotation and scaling, and only when they can happen") {
  // 64 * (cos 30 + sin 30) / 0.85 = 102.9 voxels: 20 more on each side.
  CHECK(Make({64, 64, 64}, st::NnUnetAugmentOptions()).margin() == std::vector<int64_t>{20, 20, 20});
  CHECK(Make({64, 64, 64}, Only("")).margin() == std::vector<int64_t>{0, 0, 0});
  CHECK(Make({64, 64, 64}, Only("scale=0.2")).margin() == std::vector<int64_t>{6, 6, 6});
  const auto flat = Make({8, 64, 48}, st::NnUnetAugmentOptions()).margin();  // anisotropic: in-plane
  CHECK(flat[0] == 0);
  CHECK(flat[1] == 16);  // hypot(64, 48) / 0.85 = 94.1: 15.06 more on each side
  st::NnUnetAugmentOptions whole;
  whole.margin = false;
  CHECK(Make({64, 64}, whole).margin() == std::vector<int64_t>{0, 0});
}

TEST_CASE("augment: rotation, scaling and mirroring keep the mask a threshold of the image (3D)") {
  const st::NnUnetAugment aug = Make({16, 16, 16}, Only("rotate=1,scale=1,mirror=0.5"));
  const std::vector<int64_t> m = aug.margin();
  REQUIRE(m[0] > 0);
  const st::ImageMask in = SmoothPair(4, {16 + 2 * m[0], 16 + 2 * m[1], 16 + 2 * m[2]});
  for (uint64_t step = 0; step < 3; ++step) {
    const st::ImageMask out = st::ApplyOnDevice(aug, in, 0, step);
    REQUIRE(out.image.sizes() == torch::IntArrayRef{4, 2, 16, 16, 16});
    REQUIRE(out.mask.sizes() == torch::IntArrayRef{4, 16, 16, 16});
    CheckAligned(out, out.mask.numel() / 4);
    const torch::Tensor crop = in.image.narrow(2, m[0], 16).narrow(3, m[1], 16).narrow(4, m[2], 16);
    CHECK_FALSE(torch::allclose(out.image, crop));  // it did move
  }
  // Shrinking (scale 1.4) past the margin pads with the patch padding.
  st::AugmentPlan plan = aug.Draw(4, 2, 0, 0);
  plan.scale.assign(4, 3.0);
  const st::ImageMask far = st::ApplyOnDevice(aug, in, plan);
  CHECK((far.mask == kPad).any().item<bool>());
  CheckAligned(far, 0);
}

TEST_CASE("augment: rotation, scaling and mirroring keep the mask a threshold of the image (2D)") {
  st::NnUnetAugmentOptions o = Only("rotate=1,scale=1,mirror=0.5");
  o.margin = false;  // whole images: out of the image is padding
  const st::NnUnetAugment aug = Make({40, 32}, o);
  const st::ImageMask in = SmoothPair(4, {40, 32});
  for (uint64_t step = 0; step < 3; ++step) {
    const st::ImageMask out = st::ApplyOnDevice(aug, in, 1, step);
    REQUIRE(out.image.sizes() == in.image.sizes());
    CheckAligned(out, out.mask.numel() / 8);
  }
}

TEST_CASE("augment: probability 0 is the identity, each transform alone changes the image") {
  const st::ImageMask in = SmoothPair(3, {12, 14, 10});
  st::NnUnetAugmentOptions none = Only("");
  none.margin = false;
  const st::ImageMask same = st::ApplyOnDevice(Make({12, 14, 10}, none), in, 2, 3);
  CHECK(torch::equal(same.image, in.image));
  CHECK(torch::equal(same.mask, in.mask));
  const st::NnUnetAugment cropping = Make({8, 10, 6}, Only(""));  // margin 0 when nothing rotates
  CHECK(torch::equal(st::ApplyOnDevice(cropping, in, 0, 0).image, in.image));
  for (const st::AugTransformInfo& t : st::AugTransforms()) {
    INFO(t.name);
    st::NnUnetAugmentOptions o = Only(std::string(t.name) + "=1");
    o.margin = false;
    const st::NnUnetAugment aug = Make({12, 14, 10}, o);
    bool changed = false;
    for (uint64_t step = 0; step < 4 && !changed; ++step) {
      const st::ImageMask out = st::ApplyOnDevice(aug, in, 0, step);
      changed = !torch::equal(out.image, in.image);
      const bool geometric =
          std::string(t.name) == "rotate" || std::string(t.name) == "scale" || std::string(t.name) == "mirror";
      if (!geometric) CHECK(torch::equal(out.mask, in.mask));  // intensities leave the mask alone
    }
    CHECK(changed);
  }
}

TEST_CASE("augment: the noise is Gaussian with the drawn sigma, a field of its own per sample and channel") {
  const st::NnUnetAugment aug = Make({24, 24, 24}, Only("noise=1"));
  const torch::Tensor zero = torch::zeros({2, 2, 24, 24, 24});
  st::AugmentPlan plan = aug.Draw(2, 2, 0, 0);
  plan.noise_sigma = {0.1, 0.05};
  const torch::Tensor noise = st::ApplyOnDevice(aug, {zero, torch::Tensor()}, plan).image;
  for (int64_t b = 0; b < 2; ++b) {
    const torch::Tensor z = noise[b] / plan.noise_sigma[size_t(b)];
    CHECK(z.mean().item<double>() == Approx(0).margin(0.02));
    CHECK(z.std().item<double>() == Approx(1).epsilon(0.02));
    CHECK((z.abs() > 2).to(torch::kFloat).mean().item<double>() == Approx(0.0455).margin(0.004));
  }
  // batchgeneratorsv2 0.3.2 (nnU-Net 2.8.1's): one std for the channels, a field for each.
  for (const auto& [a, b] : {std::pair{noise[0][0], noise[1][0]}, std::pair{noise[0][0], noise[0][1]}}) {
    CHECK(torch::corrcoef(torch::stack({a.flatten(), b.flatten()}))[0][1].item<double>() == Approx(0).margin(0.02));
  }
}

TEST_CASE("augment: masks resample as nnU-Net's: one-hot maps linearly, the largest wins, ties to the lower label") {
  // Labels -1 (unlabelled), 0, 1, 2 in blocks; zoom 0.75 samples quarter positions (ties
  // included), zoom 1.4 reaches beyond the outermost voxel centres.
  torch::Tensor m = torch::zeros({1, 9, 9}, torch::kLong);
  m.narrow(2, 0, 2).fill_(-1);
  m.narrow(1, 2, 5).narrow(2, 3, 4).fill_(1);
  m.narrow(1, 4, 2).narrow(2, 4, 4).fill_(2);
  m[0][7][7] = 2;
  st::NnUnetAugmentOptions o = Only("scale=1");
  o.margin = false;
  int64_t nearest_differs = 0;
  for (const double scale : {0.75, 1.4}) {
    for (const st::MaskMode mode : {st::MaskMode::kLinear, st::MaskMode::kNearest}) {
      o.mask_mode = mode;
      const st::NnUnetAugment aug = Make({9, 9}, o);
      st::AugmentPlan plan = aug.Draw(1, 1, 0, 0);
      plan.scale = {scale};
      const torch::Tensor out = st::ApplyOnDevice(aug, {torch::zeros({1, 1, 9, 9}), m}, plan).mask[0];
      int64_t differ = 0;
      for (int64_t i = 0; i < 9; ++i) {
        for (int64_t j = 0; j < 9; ++j) {
          const int64_t want = NnUnetLabelAt(m[0], scale * double(i - 4) + 4, scale * double(j - 4) + 4, kPad);
          differ += out[i][j].item<int64_t>() != want;
        }
      }
      INFO("scale " << scale << ", " << st::MaskModeName(mode));
      if (mode == st::MaskMode::kLinear) CHECK(differ == 0);
      nearest_differs += mode == st::MaskMode::kNearest ? differ : 0;
    }
  }
  CHECK(nearest_differs > 0);  // nearest neighbour is another rule
}

TEST_CASE("augment: outside the labelled data masks the image channels asked for, then becomes 0 or the ignore label") {
  // A u8 mask (padding 255) with a band of -1 stored as 255 too, and every transform on.
  st::NnUnetAugmentOptions o;
  REQUIRE(st::ParseAugProbabilities("all=1,mirror=0.5", &o).ok());
  o.margin = false;
  o.label_pad = 255;
  o.mask_image_channels = std::vector<int64_t>{1};
  const st::ImageMask in = SmoothPair(4, {20, 20});
  torch::Tensor mask = in.mask.clone();
  mask.narrow(1, 0, 3).fill_(255);
  for (const std::optional<int64_t> ignore : {std::optional<int64_t>(), std::optional<int64_t>(-7)}) {
    o.ignore_label = ignore;
    const st::ImageMask out = st::ApplyOnDevice(Make({20, 20}, o), {in.image, mask}, 0, 1);
    const torch::Tensor seen = out.mask == ignore.value_or(-7);
    CHECK(out.mask.min().item<int64_t>() >= (ignore ? -7 : 0));
    CHECK(out.mask.max().item<int64_t>() <= 1);  // the pad 255 is gone
    if (!ignore) continue;
    REQUIRE(seen.any().item<bool>());
    CHECK(out.image.select(1, 1).masked_select(seen).eq(0).all().item<bool>());  // after every intensity transform
    CHECK_FALSE(out.image.select(1, 1).masked_select(seen.logical_not()).eq(0).any().item<bool>());
    CHECK_FALSE(out.image.select(1, 0).masked_select(seen).eq(0).all().item<bool>());  // channel 0 left alone
  }
  CHECK(st::MaskImageChannels("nonzero", "zscore", 3) == std::vector<int64_t>{0, 1, 2});
  CHECK(st::MaskImageChannels("nonzero", "zscore,ct,zscore", 3) == std::vector<int64_t>{0, 2});
  CHECK(st::MaskImageChannels("nonzero,-,all", "zscore,ct,zscore", 3) == std::vector<int64_t>{0});
  CHECK(st::MaskImageChannels("", "zscore", 2).empty());
  CHECK(*st::ParseMaskMode("nearest") == st::MaskMode::kNearest);
  CHECK_FALSE(st::ParseMaskMode("cubic").ok());
  o.mask_image_channels = std::vector<int64_t>{-1};
  CHECK_FALSE(st::NnUnetAugment::Create({20, 20}, o).ok());
}

TEST_CASE("augment: the same seed gives the same output on 1 and 2 threads") {
  const int threads = torch::get_num_threads();
  st::NnUnetAugmentOptions o;
  REQUIRE(st::ParseAugProbabilities("all=1,mirror=0.5", &o).ok());
  o.seed = 11;
  o.image_pad = kImagePad;
  const st::NnUnetAugment aug = Make({16, 24, 24}, o);
  const std::vector<int64_t> m = aug.margin();
  const st::ImageMask in = SmoothPair(2, {16 + 2 * m[0], 24 + 2 * m[1], 24 + 2 * m[2]});
  torch::set_num_threads(1);
  const st::ImageMask one = st::ApplyOnDevice(aug, in, 3, 4);
  torch::set_num_threads(2);
  const st::ImageMask two = st::ApplyOnDevice(aug, in, 3, 4);
  const st::ImageMask other = st::ApplyOnDevice(aug, in, 3, 5);
  torch::set_num_threads(threads);
  CHECK(torch::equal(one.image, two.image));
  CHECK(torch::equal(one.mask, two.mask));
  CHECK_FALSE(torch::equal(one.image, other.image));
  CHECK(torch::isfinite(one.image).all().item<bool>());
}

TEST_CASE("augment: observed rates match the probabilities, parameters stay in range") {
  st::NnUnetAugmentOptions o;
  REQUIRE(st::ParseAugProbabilities("rotate=0.7", &o).ok());
  const st::NnUnetAugment aug = Make({32, 32, 32}, o);
  const int64_t batch = 8, channels = 2, steps = 500;
  std::vector<double> picked(st::kNumAugTransforms, 0), channel_on(st::kNumAugTransforms, 0);
  std::vector<double> channel_seen(st::kNumAugTransforms, 0);
  double mirrored = 0, below_one = 0, brightness_on = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const st::AugmentPlan p = aug.Draw(batch, channels, 1, uint64_t(step));
    for (size_t t = 0; t + 1 < st::kNumAugTransforms; ++t) {
      for (int64_t b = 0; b < batch; ++b) picked[t] += p.applied[t][size_t(b)];
    }
    for (int64_t b = 0; b < batch; ++b) {
      for (size_t a = 0; a < 3; ++a) mirrored += p.mirror[size_t(b)][a];
      const auto& ang = p.angles[size_t(b)];
      for (double x : ang) REQUIRE(std::abs(x) <= M_PI / 6 + 1e-12);
      REQUIRE((p.scale[size_t(b)] >= 0.7 && p.scale[size_t(b)] <= 1.4));
      REQUIRE((p.noise_sigma[size_t(b)] >= 0 && p.noise_sigma[size_t(b)] <= 0.1));
      for (int64_t c = 0; c < channels; ++c) {
        const size_t k = size_t(b * channels + c);
        if (p.applied[shardify::AugIndex(st::AugTransform::kBlur)][size_t(b)]) {
          ++channel_seen[shardify::AugIndex(st::AugTransform::kBlur)];
          channel_on[shardify::AugIndex(st::AugTransform::kBlur)] += p.blur_sigma[k][0] > 0;
          if (p.blur_sigma[k][0] > 0) REQUIRE((p.blur_sigma[k][2] >= 0.5 && p.blur_sigma[k][2] <= 1.0));
        }
        if (p.applied[shardify::AugIndex(st::AugTransform::kLowRes)][size_t(b)]) {
          ++channel_seen[shardify::AugIndex(st::AugTransform::kLowRes)];
          channel_on[shardify::AugIndex(st::AugTransform::kLowRes)] += p.low_res[k] != 1;
          REQUIRE((p.low_res[k] >= 0.5 && p.low_res[k] <= 1.0));
        }
        if (p.brightness[k] != 1) {
          ++brightness_on;
          below_one += p.brightness[k] < 1;
          REQUIRE((p.brightness[k] >= 0.75 && p.brightness[k] <= 1.25));
        }
        REQUIRE((p.gamma[k] >= 0.7 && p.gamma[k] <= 1.5));
      }
    }
  }
  const double n = double(batch * steps);  // 4000 samples: 5 sigma is at most 0.04
  for (size_t t = 0; t + 1 < st::kNumAugTransforms; ++t) {
    INFO(st::AugTransforms()[t].name);
    CHECK(std::abs(picked[t] / n - o.probability[t]) < 0.04);
  }
  CHECK(std::abs(picked[shardify::AugIndex(st::AugTransform::kRotate)] / n - 0.7) < 0.04);
  CHECK(std::abs(mirrored / (3 * n) - 0.5) < 0.03);
  for (auto t : {st::AugTransform::kBlur, st::AugTransform::kLowRes}) {
    CHECK(std::abs(channel_on[shardify::AugIndex(t)] / channel_seen[shardify::AugIndex(t)] - 0.5) < 0.08);
  }
  CHECK(std::abs(below_one / brightness_on - 0.5) < 0.1);  // half the factors below 1
}
