// Unit tests of trainer/ pieces that need no dataset: bridge, transforms, metrics,
// models, schedules, checkpoints, reports.
#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "../common/watchdog.h"
#include "catch_torch.h"
#include "trainer/metrics.h"
#include "trainer/models.h"
#include "trainer/optim.h"
#include "trainer/report.h"
#include "trainer/transforms.h"

namespace st = shardify::trainer;
using shardify::Batch;
using shardify::BatchField;
using shardify::DType;
using shardify::FieldKind;

namespace {

// A hand-made batch of B images [B, 1, H, W] u8 with value (i * 7 + p) % 251, labels i % 3.
std::shared_ptr<Batch> MakeBatch(int64_t b, int64_t h, int64_t w, std::vector<uint8_t>& pixels,
                                 std::vector<int64_t>& labels) {
  pixels.resize(size_t(b * h * w));
  for (size_t p = 0; p < pixels.size(); ++p) pixels[p] = uint8_t((p * 7) % 251);
  labels.resize(size_t(b));
  for (int64_t i = 0; i < b; ++i) labels[size_t(i)] = i % 3;
  auto batch = std::make_shared<Batch>();
  for (int64_t i = 0; i < b; ++i) batch->indices.push_back(uint64_t(100 + i));
  BatchField img{"image", FieldKind::kNdarray, DType::kU8, {b, 1, h, w}, {}, pixels.data(), pixels.size(), nullptr};
  BatchField lab{"label", FieldKind::kInt, DType::kI64, {b}, {}, labels.data(), labels.size() * 8, nullptr};
  batch->fields = {img, lab};
  return batch;
}

}  // namespace

TEST_CASE("trainer: std::filesystem binds to libstdc++, not to the copy PyTorch's wheels export") {
  // The symbols a program linking LibTorch calls (tests' TempDir, the writer's renames).
  for (const char* symbol : {"_ZNSt10filesystem10remove_allERKNS_7__cxx114pathERSt10error_code",
                             "_ZNSt10filesystem6renameERKNS_7__cxx114pathES3_RSt10error_code",
                             "_ZNSt10filesystem18create_directoriesERKNS_7__cxx114pathERSt10error_code"}) {
    void* bound = ::dlsym(RTLD_DEFAULT, symbol);
    REQUIRE(bound != nullptr);
    Dl_info info{};
    REQUIRE(::dladdr(bound, &info) != 0);
    INFO(symbol << " binds to " << info.dli_fname);
    CHECK(std::string(info.dli_fname).find("libstdc++") != std::string::npos);
  }
}

TEST_CASE("trainer: the bridge wraps batch memory without a copy and keeps the batch alive") {
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  std::shared_ptr<Batch> batch = MakeBatch(4, 5, 6, pixels, labels);
  std::weak_ptr<Batch> watch = batch;
  auto image = st::FieldTensor(batch, "image");
  auto label = st::FieldTensor(batch, "label");
  REQUIRE(image.ok());
  REQUIRE(label.ok());
  CHECK(image->data_ptr() == static_cast<void*>(pixels.data()));
  CHECK(label->data_ptr() == static_cast<void*>(labels.data()));
  CHECK(image->sizes().vec() == std::vector<int64_t>{4, 1, 5, 6});
  CHECK(label->scalar_type() == torch::kLong);
  CHECK(label->sum().item<int64_t>() == 0 + 1 + 2 + 0);
  // On the CPU the device move is a no-op: still the same memory.
  CHECK(st::ToDevice(*image, torch::kCPU, false).data_ptr() == static_cast<void*>(pixels.data()));
  batch.reset();
  CHECK_FALSE(watch.expired());  // the tensors hold the batch
  *image = torch::Tensor();
  CHECK_FALSE(watch.expired());
  *label = torch::Tensor();
  CHECK(watch.expired());
}

TEST_CASE("trainer: the bridge rejects missing fields and inconsistent sizes") {
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  std::shared_ptr<Batch> batch = MakeBatch(2, 3, 3, pixels, labels);
  CHECK(st::FieldTensor(batch, "mask").status().code() == shardify::StatusCode::kNotFound);
  batch->fields[0].bytes -= 1;
  auto bad = st::FieldTensor(batch, "image");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("image"));
}

TEST_CASE("trainer: images become normalized float [B, C, H, W] from any layout and dtype") {
  torch::Tensor u8 = torch::tensor({0, 255, 51, 102}, torch::kByte).view({1, 2, 2});
  torch::Tensor f = st::ToFloatImage(u8, DType::kU8, 51.0, 2.0);
  CHECK(f.sizes().vec() == std::vector<int64_t>{1, 1, 2, 2});
  CHECK(f.flatten()[1].item<float>() == Approx(102.0));
  // 60000 stored as u16 reads back as 60000 even though LibTorch sees int16.
  uint16_t raw[2] = {60000, 7};
  torch::Tensor as_i16 = torch::from_blob(raw, {1, 1, 1, 2}, torch::kShort);
  torch::Tensor g = st::ToFloatImage(as_i16, DType::kU16, 0.0, 1.0);
  CHECK(g.flatten()[0].item<float>() == Approx(60000.0));
  CHECK(st::ToLabelMap(torch::ones({2, 1, 3, 3}, torch::kByte), DType::kU8).sizes().vec() ==
        std::vector<int64_t>{2, 3, 3});
}

namespace {

// A label map of four constant blocks, and an image that is 10x the label.
st::ImageMask BlockPair(int64_t b, int64_t h, int64_t w) {
  torch::Tensor mask = torch::zeros({b, h, w}, torch::kLong);
  mask.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, h / 2), torch::indexing::Slice(w / 3, w)}, 1);
  mask.index_put_({torch::indexing::Slice(), torch::indexing::Slice(h / 2, h), torch::indexing::Slice(0, w / 4)}, 2);
  mask.index_put_({torch::indexing::Slice(), torch::indexing::Slice(h * 3 / 4, h), torch::indexing::Slice(w / 2, w)},
                  3);
  return {(mask * 10).to(torch::kFloat).unsqueeze(1), mask};
}

// Share of pixels where the image still equals 10x the mask.
double Agreement(const st::ImageMask& io) {
  torch::Tensor same = ((io.image.squeeze(1) - io.mask.to(torch::kFloat) * 10).abs() < 1e-3);
  return same.to(torch::kFloat).mean().item<double>();
}

// The same, over pixels whose 3x3 mask neighbourhood is one label (away from the block
// borders, which bilinear sampling blurs in the image but not in the mask).
double InteriorAgreement(const st::ImageMask& io) {
  namespace F = torch::nn::functional;
  torch::Tensor m = io.mask.to(torch::kFloat).unsqueeze(1);
  auto pool = F::MaxPool2dFuncOptions(3).stride(1).padding(1);
  torch::Tensor interior = (F::max_pool2d(m, pool) == -F::max_pool2d(-m, pool)).squeeze(1);
  torch::Tensor close = (io.image.squeeze(1) - io.mask.to(torch::kFloat) * 10).abs() < 0.5;
  return (close & interior).sum().item<double>() / interior.sum().item<double>();
}

}  // namespace

TEST_CASE("trainer: augmentation moves image and mask together") {
  st::AugmentOptions o;
  o.seed = 7;
  o.flip_x = o.flip_y = true;
  SECTION("flips are exact") {
    st::ImageMask out = st::Augment(BlockPair(8, 24, 32), o, 0, 0);
    CHECK(Agreement(out) == 1.0);
    CHECK_FALSE(torch::equal(out.mask, BlockPair(8, 24, 32).mask));  // something flipped
  }
  SECTION("affine, crop/pad and resize keep them aligned") {
    o.rotate_deg = 25;
    o.scale = 0.2;
    o.translate = 0.1;
    o.crop_h = 20;
    o.crop_w = 40;
    o.resize_h = 30;
    o.resize_w = 30;
    st::ImageMask out = st::Augment(BlockPair(8, 24, 32), o, 1, 2);
    CHECK(out.image.sizes().vec() == std::vector<int64_t>{8, 1, 30, 30});
    CHECK(out.mask.sizes().vec() == std::vector<int64_t>{8, 30, 30});
    CHECK(InteriorAgreement(out) > 0.9);
    // A mask that is not the image's (mirrored) disagrees widely.
    st::ImageMask crossed{out.image, out.mask.flip(2)};
    CHECK(InteriorAgreement(crossed) < 0.7);
  }
  SECTION("the same (seed, epoch, step) gives the same draw; another step another") {
    o.rotate_deg = 30;
    o.intensity_scale = 0.3;
    o.intensity_shift = 1.0;
    st::ImageMask a = st::Augment(BlockPair(4, 16, 16), o, 3, 5);
    st::ImageMask b = st::Augment(BlockPair(4, 16, 16), o, 3, 5);
    st::ImageMask c = st::Augment(BlockPair(4, 16, 16), o, 3, 6);
    CHECK(torch::equal(a.image, b.image));
    CHECK(torch::equal(a.mask, b.mask));
    CHECK_FALSE(torch::equal(a.image, c.image));
    CHECK(a.mask.max().item<int64_t>() <= 3);  // intensity never touches the mask
  }
}

TEST_CASE("trainer: AUC matches hand-computed values") {
  CHECK(st::BinaryAuc({0.1, 0.4, 0.35, 0.8}, {false, false, true, true}) == Approx(0.75));
  CHECK(st::BinaryAuc({0.5, 0.5, 0.2}, {true, false, false}) == Approx(0.75));  // tie counts 1/2
  CHECK(std::isnan(st::BinaryAuc({0.1, 0.2}, {true, true})));
  // Three classes; class 2 never appears, so the macro mean covers classes 0 and 1.
  st::ClassMetrics m(3);
  torch::Tensor logits =
      torch::tensor({{2.0f, 0.0f, 0.0f}, {0.0f, 1.0f, 0.0f}, {1.0f, 0.5f, 0.0f}, {0.0f, 3.0f, 0.0f}});
  m.Add(logits, torch::tensor({0, 0, 1, 1}, torch::kLong));
  CHECK(m.count() == 4);
  CHECK(m.Accuracy() == Approx(0.5));
  // p0 (softmax column 0) ranks the samples 3 < 1 < 2 < 0; positives {0, 1} beat 3 of
  // the 4 (positive, negative) pairs: AUC0 = 0.75. p1 ranks 0 < 2 < 1 < 3; positives
  // {2, 3}: AUC1 = 0.75. Macro mean 0.75; predictions 0, 1, 0, 1: accuracy 0.5.
  CHECK(m.MacroAuc() == Approx(0.75));
}

TEST_CASE("trainer: AUC of NaN scores (a diverged model) is NaN, without hanging") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double auc = shardify::testing::WithinSeconds(30, "BinaryAuc with NaN scores", [nan] {
    return st::BinaryAuc({nan, 0.4, nan, 0.8, 0.1}, {true, false, true, false, true});
  });
  CHECK(std::isnan(auc));
  st::ClassMetrics m(2);
  m.Add(torch::full({6, 2}, nan), torch::tensor({0, 1, 0, 1, 0, 1}, torch::kLong));
  const double macro = shardify::testing::WithinSeconds(30, "MacroAuc of NaN logits", [&m] { return m.MacroAuc(); });
  CHECK(std::isnan(macro));
}

TEST_CASE("trainer: CSV fields are quoted as RFC 4180 says") {
  CHECK(st::CsvField("prob_cat") == "prob_cat");
  CHECK(st::CsvField("") == "");
  CHECK(st::CsvField("a,b") == "\"a,b\"");
  CHECK(st::CsvField("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(st::CsvField("two\nlines") == "\"two\nlines\"");
  CHECK(st::CsvField("cr\r") == "\"cr\r\"");
}

TEST_CASE("trainer: Dice per class matches hand-computed values") {
  st::DiceMetrics d(3);
  torch::Tensor pred = torch::tensor({0, 1, 1, 2, 2, 0}, torch::kLong).view({1, 2, 3});
  torch::Tensor target = torch::tensor({0, 1, 2, 2, 0, 0}, torch::kLong).view({1, 2, 3});
  d.Add(pred, target);
  std::vector<double> per = d.PerClass();
  REQUIRE(per.size() == 3);
  CHECK(per[0] == Approx(2.0 * 2 / (2 + 3)));
  CHECK(per[1] == Approx(2.0 * 1 / (2 + 1)));
  CHECK(per[2] == Approx(2.0 * 1 / (2 + 2)));
  CHECK(d.MeanForeground() == Approx((2.0 / 3 + 0.5) / 2));
  // A perfect prediction drives Dice+CE towards 0.
  torch::Tensor logits = torch::one_hot(target, 3).permute({0, 3, 1, 2}).to(torch::kFloat) * 50;
  CHECK(st::DiceCeLoss(logits, target).item<double>() < 1e-3);
  CHECK(st::DiceCeLoss(torch::zeros_like(logits), target).item<double>() > 0.5);
}

TEST_CASE("trainer: every model maps images to logits of the right shape") {
  torch::NoGradGuard no_grad;
  for (const st::ModelInfo& info : st::Models()) {
    const std::string name = info.name;
    st::ModelSpec spec;
    spec.name = name;
    spec.in_channels = 1;
    spec.num_classes = 3;
    spec.height = spec.width = 32;
    spec.unet_base_channels = 4;
    auto model = st::MakeModel(spec);
    REQUIRE(model.ok());
    (*model)->eval();
    INFO(name);
    if (st::IsVolumeModel(name)) {
      torch::Tensor y = (*model)->forward(torch::randn({2, 1, 8, 32, 32}));
      CHECK(y.sizes().vec() == std::vector<int64_t>{2, 3, 8, 32, 32});
      continue;
    }
    torch::Tensor y = (*model)->forward(torch::randn({2, 1, 32, 32}));
    if (st::IsSegmentationModel(name))
      CHECK(y.sizes().vec() == std::vector<int64_t>{2, 3, 32, 32});
    else
      CHECK(y.sizes().vec() == std::vector<int64_t>{2, 3});
  }
  st::ModelSpec bad;
  bad.name = "vgg";
  CHECK(st::MakeModel(bad).status().code() == shardify::StatusCode::kInvalidArgument);
}

TEST_CASE("trainer: a model too large for memory is an out-of-memory error of one line, not an internal one") {
  st::ModelSpec huge;  // an mlp whose first layer would take 2^20 * 2^20 * 128 floats (512 PiB)
  huge.height = huge.width = int64_t{1} << 20;
  const auto model = st::MakeModel(huge);
  REQUIRE_FALSE(model.ok());
  CHECK(model.status().code() == shardify::StatusCode::kResourceExhausted);
  CHECK_THAT(model.status().message(), Catch::StartsWith("model 'mlp' for inputs 1x1048576x1048576: out of memory"));
  CHECK(model.status().message().find('\n') == std::string::npos);
}

TEST_CASE("trainer: schedules start, peak and end where they should") {
  st::ScheduleOptions s;
  s.name = "onecycle";
  s.total_steps = 100;
  s.warmup_fraction = 0.3;
  CHECK(st::ScheduledLr(s, 1.0, 0) == Approx(1.0 / 25));
  CHECK(st::ScheduledLr(s, 1.0, 30) == Approx(1.0));
  CHECK(st::ScheduledLr(s, 1.0, 99) == Approx(1.0 / 25 / 1e4));
  CHECK(st::ScheduledLr(s, 1.0, 15) > st::ScheduledLr(s, 1.0, 10));
  s.name = "cosine";
  s.warmup_fraction = 0;
  s.final_div = 100;
  CHECK(st::ScheduledLr(s, 2.0, 0) == Approx(2.0));
  CHECK(st::ScheduledLr(s, 2.0, 99) == Approx(0.02));
  CHECK(st::ScheduledLr(s, 2.0, 50) < st::ScheduledLr(s, 2.0, 40));
  s.name = "linear";
  CHECK_FALSE(st::CheckSchedule(s).ok());
}

TEST_CASE("trainer: a checkpoint restores weights, optimizer state and meta") {
  shardify::testing::TempDir dir;
  st::ModelSpec spec;
  spec.name = "cnn";
  spec.height = spec.width = 12;
  torch::manual_seed(1);
  auto a = st::MakeModel(spec);
  REQUIRE(a.ok());
  auto opt = st::MakeOptimizer((*a)->parameters(), {"adamw", 1e-2, 1e-2, 0.9});
  REQUIRE(opt.ok());
  torch::Tensor x = torch::randn({4, 1, 12, 12});
  st::ClassificationLoss((*a)->forward(x), torch::tensor({0, 1, 2, 3}, torch::kLong)).backward();
  (*opt)->step();
  st::CheckpointMeta meta;
  meta.model = spec;
  meta.task = "classification";
  meta.classes = {"a", "b"};
  meta.optimizer_step = 17;
  meta.sampler = {2, 5};
  meta.best_metric = 0.5;
  meta.has_best = true;
  REQUIRE(st::SaveCheckpoint(dir / "c.pt", **a, opt->get(), meta).ok());
  torch::manual_seed(2);
  auto b = st::MakeModel(spec);
  auto opt_b = st::MakeOptimizer((*b)->parameters(), {"adamw", 1e-2, 1e-2, 0.9});
  REQUIRE(st::LoadCheckpoint(dir / "c.pt", **b, opt_b->get()).ok());
  auto pa = (*a)->named_parameters(), pb = (*b)->named_parameters();
  for (const auto& item : pa) CHECK(torch::equal(item.value(), pb[item.key()]));
  auto back = st::ReadCheckpointMeta(dir / "c.pt");
  REQUIRE(back.ok());
  CHECK(back->optimizer_step == 17);
  CHECK(back->sampler == shardify::SamplerState{2, 5});
  CHECK(back->classes == meta.classes);
  CHECK(back->model.name == "cnn");
  std::ofstream(dir / "junk.pt") << "not a checkpoint";
  CHECK(st::ReadCheckpointMeta(dir / "junk.pt").status().code() == shardify::StatusCode::kCorruption);
}

namespace {

std::vector<char> ReadAllBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAllBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

// An MLP with an Adam optimizer, saved to `path` (recording the optimizer in the meta).
struct SavedMlp {
  std::shared_ptr<st::Model> model;
  std::unique_ptr<torch::optim::Optimizer> adam;
};
SavedMlp SaveMlp(const std::string& path) {
  st::ModelSpec spec;
  spec.name = "mlp";
  auto model = st::MakeModel(spec);
  REQUIRE(model.ok());
  auto adam = st::MakeOptimizer((*model)->parameters(), {"adam", 1e-3, 0, 0.9});
  REQUIRE(adam.ok());
  st::CheckpointMeta meta;
  meta.model = spec;
  meta.task = "classification";
  meta.has_optimizer = true;
  meta.optimizer = {"adam", 1e-3, 0, 0.9};
  REQUIRE(st::SaveCheckpoint(path, **model, adam->get(), meta).ok());
  return {std::move(model).value(), std::move(adam).value()};
}

}  // namespace

TEST_CASE("trainer: a checkpoint carries a checksum, a flipped byte anywhere is refused") {
  shardify::testing::TempDir dir;
  SavedMlp saved = SaveMlp(dir / "c.pt");
  st::Model& model = *saved.model;
  torch::optim::Optimizer* opt = saved.adam.get();
  const std::vector<char> good = ReadAllBytes(dir / "c.pt");
  REQUIRE(good.size() > 1000);
  for (size_t at : {size_t{40}, good.size() / 2, good.size() - 20, good.size() - 1}) {
    INFO("byte " << at << " of " << good.size());
    std::vector<char> bad = good;
    bad[at] ^= 0x01;
    WriteAllBytes(dir / "bad.pt", bad);
    const shardify::Status load = st::LoadCheckpoint(dir / "bad.pt", model, opt);
    CHECK(load.code() == shardify::StatusCode::kCorruption);
    CHECK_THAT(load.message(),
               Catch::Contains("bad.pt") && (Catch::Contains("checksum") || Catch::Contains("trailer")));
    CHECK(st::ReadCheckpointMeta(dir / "bad.pt").status().code() == shardify::StatusCode::kCorruption);
  }
}

TEST_CASE("trainer: a checkpoint without its trailer is refused, unless asked for as a legacy one") {
  shardify::testing::TempDir dir;
  SavedMlp saved = SaveMlp(dir / "c.pt");
  const std::vector<char> good = ReadAllBytes(dir / "c.pt");
  // Cut just before the trailer: a bare archive, as written before the trailer existed.
  WriteAllBytes(dir / "old.pt", std::vector<char>(good.begin(), good.end() - 16));
  const shardify::Status refused = st::LoadCheckpoint(dir / "old.pt", *saved.model, saved.adam.get());
  CHECK(refused.code() == shardify::StatusCode::kCorruption);
  CHECK_THAT(refused.message(), Catch::Contains("old.pt: no checksum trailer") && Catch::Contains("written before") &&
                                    Catch::Contains("--legacy-checkpoint"));
  CHECK(st::ReadCheckpointMeta(dir / "old.pt").status().message() == refused.message());
  const auto accept = st::LegacyCheckpoint::kAccept;
  CHECK(st::LoadCheckpoint(dir / "old.pt", *saved.model, saved.adam.get(), accept).ok());
  CHECK(st::ReadCheckpointMeta(dir / "old.pt", accept).ok());
  // The flag accepts a bare archive, not anything without a trailer, and still checks one that has it.
  WriteAllBytes(dir / "cut.pt", std::vector<char>(good.begin(), good.end() - 17));
  CHECK_THAT(st::ReadCheckpointMeta(dir / "cut.pt", accept).status().message(), Catch::Contains("not a checkpoint"));
  std::vector<char> flipped = good;
  flipped[good.size() / 2] ^= 0x01;
  WriteAllBytes(dir / "bad.pt", flipped);
  CHECK_THAT(st::ReadCheckpointMeta(dir / "bad.pt", accept).status().message(), Catch::Contains("checksum mismatch"));
}

TEST_CASE("trainer: resuming with another optimizer says what differs") {
  shardify::testing::TempDir dir;
  SavedMlp saved = SaveMlp(dir / "c.pt");
  auto back = st::ReadCheckpointMeta(dir / "c.pt");
  REQUIRE(back.ok());
  REQUIRE(back->has_optimizer);
  CHECK(st::CheckResumeOptimizer(dir / "c.pt", *back, {"adam", 5e-4, 0, 0.9}).ok());  // the rate may change
  const shardify::Status other = st::CheckResumeOptimizer(dir / "c.pt", *back, {"sgd", 1e-3, 0, 0.9});
  CHECK(other.code() == shardify::StatusCode::kInvalidArgument);
  CHECK_THAT(other.message(), Catch::Contains("--optimizer adam") && Catch::Contains("--optimizer sgd"));
  CHECK_THAT(st::CheckResumeOptimizer(dir / "c.pt", *back, {"adam", 1e-3, 0.01, 0.9}).message(),
             Catch::Contains("--weight-decay 0.01"));
  // Without the record (older checkpoints), loading the state into another optimizer is an
  // error that says so, not a LibTorch assertion.
  auto sgd = st::MakeOptimizer(saved.model->parameters(), {"sgd", 1e-3, 0, 0.9});
  REQUIRE(sgd.ok());
  const shardify::Status load = st::LoadCheckpoint(dir / "c.pt", *saved.model, sgd->get());
  CHECK(load.code() == shardify::StatusCode::kInvalidArgument);
  CHECK_THAT(load.message(), Catch::Contains("does not fit") && Catch::Contains("--optimizer"));
}

TEST_CASE("trainer: metrics lines and the training curve") {
  std::vector<st::EpochRecord> h(3);
  for (int i = 0; i < 3; ++i) {
    h[i].epoch = uint64_t(i + 1);
    h[i].train_loss = 1.0 / (i + 1);
    h[i].val_loss = std::nan("");
    h[i].metrics = {{"val_accuracy", 0.5 + 0.1 * i}};
  }
  const std::string line = st::EpochJson(h[1]);
  CHECK_THAT(line, Catch::Contains("\"epoch\":2"));
  CHECK_THAT(line, Catch::Contains("\"val_loss\":null"));
  CHECK_THAT(line, Catch::Contains("\"val_accuracy\":0.6"));
  shardify::media::RgbImage img = st::RenderCurve(h, "val_accuracy", 200, 120);
  REQUIRE(img.pixels.size() == 200u * 120u * 3u);
  size_t blue = 0, green = 0;
  for (size_t p = 0; p < img.pixels.size(); p += 3) {
    blue += img.pixels[p] == 31 && img.pixels[p + 1] == 119 && img.pixels[p + 2] == 180;
    green += img.pixels[p] == 44 && img.pixels[p + 1] == 160 && img.pixels[p + 2] == 44;
  }
  CHECK(blue > 50);
  CHECK(green > 50);
  shardify::testing::TempDir dir;
  REQUIRE(st::WriteCurvePng(dir / "c.png", h, "val_accuracy").ok());
  std::ifstream png(dir / "c.png", std::ios::binary);
  char magic[4] = {};
  png.read(magic, 4);
  CHECK(std::memcmp(magic, "\x89PNG", 4) == 0);
}
