// Augmentation benchmark: nnU-Net's augmentation on the training device (here the CPU)
// alone per batch and per transform, the same on the host per sample (ApplySample, one
// thread), and the whole UNet-3D pipeline (patch read + augmentation + step) with and
// without it, on chunked phantom volumes with masks.
// Prints figures; asserts nothing.
// Usage: augment_bench [--quick] [--patch N] [--batch B] [--steps S] [--dir DIR]
// [--torch-threads T] (defaults: 64^3 patches, batch 2, 8 training steps per configuration,
// LibTorch's own thread count).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "format/chunking.h"
#include "format/writer.h"
#include "reader/loader.h"
#include "trainer/augment.h"
#include "trainer/train.h"

using namespace shardify;
namespace st = shardify::trainer;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void Die(const Status& s) {
  std::fprintf(stderr, "augment_bench: %s\n", s.ToString().c_str());
  std::exit(2);
}

// Phantom cases (i16, D x H x W): noisy soft tissue with a brighter ellipsoid organ,
// labeled 1, stored chunked and byte-shuffled as shardify stores volumes, with the
// foreground locations the converter keeps. Splits: train (all cases).
void WriteVolumes(const std::string& dir, int cases, int64_t d, int64_t h, int64_t w, int64_t patch) {
  const Shape chunks = ChooseChunkShape({1, d, h, w}, {patch, patch, patch}, 2);
  std::vector<FieldSpec> fields = {
      {"image", FieldKind::kNdarray, DType::kI16, {1, -1, -1, -1}, {}, {}, chunks, Filter::kByteShuffle},
      {"mask",
       FieldKind::kNdarray,
       DType::kU8,
       {1, -1, -1, -1},
       {},
       {{"labels", "{\"bg\": 0, \"organ\": 1}"}},
       ChooseChunkShape({1, d, h, w}, {patch, patch, patch}, 1)},
      {"mask.fg_locations", FieldKind::kNdarray, DType::kI32, {-1, 4}, {}, {{"role", "fg_locations"}}}};
  WriterOptions wo;
  wo.fsync = false;
  auto writer = DatasetWriter::Create(dir, fields, wo);
  if (!writer.ok()) Die(writer.status());
  uint64_t x = 99;
  for (int i = 0; i < cases; ++i) {
    std::vector<uint8_t> img(size_t(d * h * w) * 2), mask(size_t(d * h * w));
    std::vector<int32_t> loc;
    const double cz = d * (0.4 + 0.05 * i), cy = h * 0.5, cx = w * (0.45 + 0.03 * i);
    size_t n = 0;
    for (int64_t z = 0; z < d; ++z)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t c = 0; c < w; ++c, ++n) {
          x = x * 6364136223846793005ull + 1442695040888963407ull;
          const double r = std::pow((z - cz) / (d * 0.2), 2) + std::pow((y - cy) / (h * 0.15), 2) +
                           std::pow((c - cx) / (w * 0.18), 2);
          mask[n] = r < 1;
          const auto v = static_cast<int16_t>((r < 1 ? 300 : 40) + 20 * std::sin(z * 0.1 + y * 0.05) + double(x >> 59));
          std::memcpy(&img[2 * n], &v, 2);
          if (mask[n] && n % 7 == 0) loc.insert(loc.end(), {1, int32_t(z), int32_t(y), int32_t(c)});
        }
    std::vector<uint8_t> locb(loc.size() * 4);
    std::memcpy(locb.data(), loc.data(), locb.size());
    SampleInput s;
    s.values = {FieldValue::Array(std::move(img), {1, d, h, w}), FieldValue::Array(std::move(mask), {1, d, h, w}),
                FieldValue::Array(std::move(locb), {int64_t(loc.size() / 4), 4})};
    if (Status st = (*writer)->Append(std::move(s)); !st.ok()) Die(st);
  }
  if (Status st = (*writer)->Finish(); !st.ok()) Die(st);
}

// Milliseconds per batch of `aug` on a [batch, 1, read^3] input, over `steps` batches.
double AugmentMs(const st::NnUnetAugment& aug, int64_t batch, int64_t patch, int steps) {
  const int64_t read = patch + 2 * aug.margin()[0];
  const torch::Tensor image = torch::randn({batch, 1, read, read, read});
  const torch::Tensor mask = (image.select(1, 0) > 0.5).to(torch::kLong);
  st::ApplyOnDevice(aug, {image, mask}, 0, 0);  // warm-up
  const auto t0 = Clock::now();
  for (int s = 1; s <= steps; ++s) {
    const st::ImageMask out = st::ApplyOnDevice(aug, {image, mask}, 0, uint64_t(s));
    (void)out.image.sum().item<float>();  // the result is complete (on a device: synchronized)
  }
  return 1000 * Seconds(t0) / steps;
}

// Milliseconds per sample of `aug` on the host (ApplySample, one thread) on a [1, read^3]
// input, over `samples` samples.
double HostMs(const st::NnUnetAugment& aug, int64_t patch, int samples) {
  const int64_t read = patch + 2 * aug.margin()[0];
  const torch::Tensor image = torch::randn({1, read, read, read});
  const torch::Tensor mask = (image.select(0, 0) > 0.5).to(torch::kInt);
  torch::Tensor out = torch::empty({1, patch, patch, patch}),
                out_mask = torch::empty({patch, patch, patch}, torch::kInt);
  AugmentScratch scratch;
  auto apply = [&](uint64_t step) {
    const st::AugmentPlan plan = aug.Draw(1, 1, 0, step);
    const Status s = aug.ApplySample(plan, 0, 1, image.data_ptr<float>(), mask.data_ptr<int32_t>(),
                                     out.data_ptr<float>(), out_mask.data_ptr<int32_t>(), &scratch);
    if (!s.ok()) Die(s);
  };
  apply(0);  // warm-up: the scratch sized
  const auto t0 = Clock::now();
  for (int s = 1; s <= samples; ++s) apply(uint64_t(s));
  return 1000 * Seconds(t0) / samples;
}

st::NnUnetAugment MakeAug(int64_t patch, const std::string& probabilities) {
  st::NnUnetAugmentOptions o;
  if (!probabilities.empty()) {
    if (Status s = st::ParseAugProbabilities(probabilities, &o); !s.ok()) Die(s);
  }
  auto a = st::NnUnetAugment::Create({patch, patch, patch}, o);
  if (!a.ok()) Die(a.status());
  return std::move(a).value();
}

// Patches per second of the Loader alone (read + decode), with a margin of `margin`.
double ReadRate(const std::string& dir, int64_t patch, int64_t margin, size_t batch, int batches) {
  LoaderOptions lo;
  lo.batch_size = batch;
  lo.sampler.epochs = 1000;
  lo.patch = PatchOptions();
  lo.patch->patch = {patch, patch, patch};
  if (margin > 0) lo.patch->margin = {margin, margin, margin};
  auto loader = Loader::Open(dir, lo);
  if (!loader.ok()) Die(loader.status());
  const auto t0 = Clock::now();
  for (int i = 0; i < batches; ++i) {
    auto b = (*loader)->Next();
    if (!b.ok()) Die(b.status());
  }
  return double(batches * batch) / Seconds(t0);
}

st::TrainSummary TrainRun(const std::string& data, const std::string& out, int64_t patch, size_t batch, int steps,
                          st::AugPreset aug) {
  st::TrainOptions o;
  o.data_dir = data;
  o.out_dir = out;
  o.model.name = "unet3d";
  o.patch = {patch, patch, patch};
  o.batch_size = batch;
  o.epochs = 1;
  o.repeats = 1000;  // one long epoch: the run stops at max_steps, before any validation
  o.max_steps = uint64_t(steps);
  o.val_split = "";
  o.aug = aug;
  o.seed = 1;
  auto r = st::Train(o);
  if (!r.ok()) Die(r.status());
  return *r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t patch = 64;
  size_t batch = 2;
  int steps = 8, aug_batches = 20;
  std::string dir = (std::filesystem::temp_directory_path() / "augment_bench").string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      patch = 32;
      steps = 3;
      aug_batches = 5;
    } else if (a == "--patch" && i + 1 < argc)
      patch = std::atoll(argv[++i]);
    else if (a == "--batch" && i + 1 < argc)
      batch = size_t(std::atoll(argv[++i]));
    else if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--torch-threads" && i + 1 < argc)
      torch::set_num_threads(std::atoi(argv[++i]));
    else {
      std::fprintf(
          stderr,
          "usage: augment_bench [--quick] [--patch N] [--batch B] [--steps S] [--dir DIR] [--torch-threads T]\n");
      return 2;
    }
  }
  if (patch < 8 || batch < 1 || steps < 1) {
    std::fprintf(stderr, "augment_bench: bad sizes\n");
    return 2;
  }
  std::filesystem::remove_all(dir);
  const std::string data = dir + "/volumes";
  const int64_t d = patch * 3 / 2, h = patch * 5 / 2, w = patch * 5 / 2;
  WriteVolumes(data, 4, d, h, w, patch);
  std::printf("4 phantom cases %lldx%lldx%lld i16 + u8 mask, patch %lld^3, batch %zu, %d torch threads\n", (long long)d,
              (long long)h, (long long)w, (long long)patch, batch, torch::get_num_threads());

  const st::NnUnetAugment nnunet = MakeAug(patch, "");
  const int64_t margin = nnunet.margin()[0];
  std::printf("margin %lld voxels a side: read %lld^3 per patch\n", (long long)margin, (long long)(patch + 2 * margin));
  std::printf("augmentation per batch, nnU-Net's probabilities: %.1f ms (host: %.1f ms a sample)\n",
              AugmentMs(nnunet, int64_t(batch), patch, aug_batches), HostMs(nnunet, patch, 4 * aug_batches));
  std::printf("every transform at p=1: host %.1f ms a sample\n", HostMs(MakeAug(patch, "all=1"), patch, aug_batches));
  for (const st::AugTransformInfo& t : st::AugTransforms()) {
    const st::NnUnetAugment one = MakeAug(patch, "all=0," + std::string(t.name) + "=1");
    std::printf("  %-10s at p=1: %.1f ms (host: %.1f ms a sample)\n", t.name,
                AugmentMs(one, int64_t(batch), patch, aug_batches), HostMs(one, patch, aug_batches));
  }
  std::printf("read only (Loader): %.1f patches/s at %lld^3, %.1f patches/s with the margin\n",
              ReadRate(data, patch, 0, batch, 4 * steps), (long long)patch,
              ReadRate(data, patch, margin, batch, 4 * steps));
  for (const st::AugPreset aug : {st::AugPreset::kNone, st::AugPreset::kNnUnet}) {
    const st::TrainSummary s = TrainRun(data, dir + "/run", patch, batch, steps, aug);
    std::printf("UNet-3D pipeline, --aug %s: %.2f patches/s (%d steps, %.2f s a step, data-wait %.1f%%)\n",
                aug == st::AugPreset::kNone ? "none  " : "nnunet", s.samples_per_s, steps, s.seconds / steps,
                100 * s.data_wait_fraction);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
