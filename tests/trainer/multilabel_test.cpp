// Multi-label segmentation (one mask channel per class, as the rle layout stores
// UW-Madison masks), runs cut short by max_steps or a stop request, and per-sample resize.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "../common/process.h"
#include "../common/temp_dir.h"
#include "catch_torch.h"
#include "fixtures.h"
#include "format/dataset.h"
#include "format/writer.h"
#include "trainer/loop_internal.h"
#include "trainer/metrics.h"
#include "trainer/train.h"
#include "trainer/transforms.h"

namespace st = shardify::trainer;
using namespace shardify;

namespace {

using testing::CountLines;
using testing::WriteOrganFixture;

const std::vector<std::string> kOrgans = {"large_bowel", "small_bowel", "stomach"};

st::TrainOptions OrganRun(const std::string& data, const std::string& out) {
  st::TrainOptions o;
  o.data_dir = data;
  o.out_dir = out;
  o.model.name = "unet";
  o.model.unet_base_channels = 8;
  o.batch_size = 8;
  o.epochs = 12;
  o.threads = 2;
  o.optimizer.lr = 1e-2;
  o.aug = st::AugPreset::kNone;
  o.augment.resize_h = o.augment.resize_w = 32;
  o.seed = 3;
  return o;
}

double MetricOf(const std::vector<std::pair<std::string, double>>& m, const std::string& name) {
  for (const auto& [k, v] : m) {
    if (k == name) return v;
  }
  return std::nan("");
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE(
    "trainer: a mask with one channel per class is multi-label, while label maps and old rle datasets keep their "
    "meaning") {
  auto field = [](Shape shape, std::vector<KeyValue> meta) {
    return FieldSpec{"mask", FieldKind::kNdarray, DType::kU8, std::move(shape), {}, std::move(meta)};
  };
  const std::string organs = R"({"large_bowel":0,"small_bowel":1,"stomach":2})";
  st::detail::MaskClasses flagged =
      st::detail::DescribeMask(field({3, -1, -1}, {{"labels", organs}, {"multi_label", "true"}}));
  CHECK(flagged.multi_label);
  CHECK(flagged.names == kOrgans);
  // An rle dataset written before the "multi_label" key: three channels named 0..2.
  CHECK(st::detail::DescribeMask(field({3, -1, -1}, {{"labels", organs}})).multi_label);
  CHECK_FALSE(st::detail::DescribeMask(field({3, -1, -1}, {{"labels", organs}, {"multi_label", "false"}})).multi_label);
  // nnU-Net label maps, masks without names, RGB masks: one label per pixel.
  const auto nnunet = st::detail::DescribeMask(field({1, -1, -1, -1}, {{"labels", R"({"background":0,"tumor":1})"}}));
  CHECK_FALSE(nnunet.multi_label);
  CHECK(nnunet.names == std::vector<std::string>{"background", "tumor"});
  CHECK_FALSE(st::detail::DescribeMask(field({3, 8, 8}, {})).multi_label);
  CHECK_FALSE(st::detail::DescribeMask(field({2, 8, 8}, {{"labels", R"({"background":0,"a":1,"b":2})"}})).multi_label);
}

TEST_CASE("trainer: multi-label masks pack into one map and back, with unlabeled pixels kept apart") {
  // [1, 3, 1, 4]: pixel 0 none, 1 class 0, 2 classes 0 and 2 (overlap), 3 padding (255).
  torch::Tensor mask = torch::tensor({0, 1, 1, 255, 0, 0, 0, 255, 0, 0, 1, 255}, torch::kByte).view({1, 3, 1, 4});
  torch::Tensor packed = st::PackLabels(mask, DType::kU8);
  REQUIRE(packed.sizes().vec() == std::vector<int64_t>{1, 1, 4});
  CHECK(torch::equal(packed.flatten(), torch::tensor({0, 1, 5, -1}, torch::kLong)));
  torch::Tensor back = st::UnpackLabels(packed, 3);
  CHECK(torch::equal(back, (mask == 1).to(torch::kFloat)));
  // Packed maps resize by nearest neighbour like label maps, codes intact.
  st::ImageMask io = st::Resize({torch::zeros({1, 1, 1, 4}), packed}, 2, 8);
  CHECK(torch::equal(io.mask[0][1], torch::tensor({0, 0, 1, 1, 5, 5, -1, -1}, torch::kLong)));
}

TEST_CASE("trainer: BCE + soft Dice per class is low for right and high for wrong logits, and skips unlabeled pixels") {
  torch::Tensor mask = torch::tensor({0, 1, 1, 1, 0, 0, 1, 1}, torch::kByte).view({1, 2, 2, 2});
  torch::Tensor target = st::PackLabels(mask, DType::kU8);
  torch::Tensor right = (mask.to(torch::kFloat) * 2 - 1) * 20, wrong = -right;
  const double good = st::BceDiceLoss(right, target).item<double>(),
               bad = st::BceDiceLoss(wrong, target).item<double>();
  CHECK(good < 0.01);
  CHECK(bad > 1.5);
  CHECK(st::BceDiceFromProbs(torch::sigmoid(right), target).item<double>() == Approx(good).margin(1e-3));
  // Unlabeled pixels (-1) change nothing whatever the logits there.
  torch::Tensor partly = target.clone();
  partly.view(-1)[0] = -1;
  torch::Tensor noisy = right.clone();
  noisy.select(3, 0).select(2, 0).fill_(-50);
  CHECK(st::BceDiceLoss(noisy, partly).item<double>() < 0.01);
  // Dice per class over hard predictions; the mean covers every class.
  st::DiceMetrics dice(2, true);
  dice.Add(right > 0, target);
  CHECK(dice.PerClass() == std::vector<double>{1.0, 1.0});
  st::DiceMetrics half(2, true);
  half.Add(torch::ones({1, 2, 2, 2}, torch::kBool), target);  // class 0: 3 of 4 right, class 1: 2 of 4
  CHECK(half.PerClass()[0] == Approx(2.0 * 3 / (4 + 3)));
  CHECK(half.PerClass()[1] == Approx(2.0 * 2 / (4 + 2)));
  CHECK(half.MeanForeground() == Approx((6.0 / 7 + 4.0 / 6) / 2));
}

TEST_CASE("trainer: each sample of a padded batch is resized from its own size, not squashed with the padding") {
  // Sample 0 is 4x4 (ones) padded to the batch's 4x8; sample 1 is 4x8 (twos).
  torch::Tensor image = torch::zeros({2, 1, 4, 8});
  image[0].narrow(2, 0, 4).fill_(1);
  image[1].fill_(2);
  torch::Tensor mask = torch::zeros({2, 4, 8}, torch::kLong);
  mask[0].narrow(1, 0, 4).fill_(3);
  st::ImageMask io = st::ResizeEach({image, mask}, {{4, 4}, {4, 8}}, 6, 6);
  REQUIRE(io.image.sizes().vec() == std::vector<int64_t>{2, 1, 6, 6});
  CHECK(io.image[0].min().item<float>() == Approx(1.0));  // no zeros drawn in from the padding
  CHECK(io.image[1].min().item<float>() == Approx(2.0));
  CHECK((io.mask[0] == 3).all().item<bool>());
  // Equal sizes: the batch is resized in one piece, exactly as Resize does.
  torch::Tensor same = torch::rand({2, 1, 5, 7});
  CHECK(torch::equal(st::ResizeEach({same, {}}, {{5, 7}, {5, 7}}, 3, 4).image, st::Resize({same, {}}, 3, 4).image));
  // Without a resize, different sizes stay padded (there is no common size to give them).
  CHECK(st::ResizeEach({image, mask}, {{4, 4}, {4, 8}}, 0, 0).image.size(3) == 8);
}

TEST_CASE(
    "trainer: three overlapping organs train to Dice > 0.5 each, reported by name, and predict writes [3, H, W] "
    "masks",
    "[slow]") {
  testing::TempDir dir;
  REQUIRE(WriteOrganFixture(dir / "data").ok());
  st::TrainOptions o = OrganRun(dir / "data", dir / "out");
  auto r = st::Train(o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->best_metric_name == "val_dice");
  const auto& last = r->history.back().metrics;
  for (const std::string& organ : kOrgans) {
    INFO(organ);
    CHECK(MetricOf(last, "val_dice_" + organ) > 0.5);
  }
  const double mean = MetricOf(last, "val_dice");
  CHECK(mean == Approx((MetricOf(last, "val_dice_large_bowel") + MetricOf(last, "val_dice_small_bowel") +
                        MetricOf(last, "val_dice_stomach")) /
                       3));
  CHECK(std::isnan(MetricOf(last, "val_dice_0")));  // no numbered (background) class
  CHECK_THAT(ReadText(dir / "out/metrics.jsonl"), Catch::Contains("\"val_dice_stomach\""));

  st::PredictOptions p;
  p.checkpoint = dir / "out/best.pt";
  p.data_dir = dir / "data";
  p.split = "val";
  p.out = dir / "pred";
  auto pr = st::Predict(p);
  INFO(pr.status().ToString());
  REQUIRE(pr.ok());
  CHECK(MetricOf(pr->metrics, "dice") > 0.5);
  auto src = Dataset::Open(dir / "data");
  auto out = Dataset::Open(dir / "pred");
  REQUIRE(src.ok());
  REQUIRE(out.ok());
  const Manifest& m = (*out)->manifest();
  const int mask = m.FindField("mask"), path = m.FindField("path"), spacing = m.FindField("mask.spacing");
  REQUIRE(mask >= 0);
  REQUIRE(path >= 0);
  REQUIRE(spacing >= 0);
  CHECK(m.fields[mask].shape == Shape{3, -1, -1});
  bool flagged = false;
  for (const KeyValue& kv : m.fields[mask].meta) flagged = flagged || (kv.key == "multi_label" && kv.value == "true");
  CHECK(flagged);
  REQUIRE((*out)->num_samples() == 16);
  Decoder d;
  double agree = 0, total = 0;
  for (uint64_t i = 0; i < 16; ++i) {
    auto pv = (*out)->Sample(i);
    auto sv = (*src)->Sample(48 + i);
    REQUIRE(pv.ok());
    REQUIRE(sv.ok());
    // At the slice's own size (the --resize 32x32 undone), with its path and spacing.
    const Shape own = *sv->shape(1);
    REQUIRE(*pv->shape(size_t(mask)) == own);
    CHECK(*pv->bytes_value(size_t(path)) == *sv->bytes_value(3));
    std::vector<uint8_t> pm(size_t(*pv->raw_size(size_t(mask)))), sm(pm.size());
    double sp[2];
    REQUIRE(pv->Decode(size_t(mask), pm.data(), pm.size(), d).ok());
    REQUIRE(sv->Decode(1, sm.data(), sm.size(), d).ok());
    REQUIRE(pv->Decode(size_t(spacing), sp, sizeof sp, d).ok());
    CHECK(sp[0] == 1.5);
    for (size_t k = 0; k < pm.size(); ++k) {
      CHECK(pm[k] <= 1);
      agree += pm[k] == sm[k];
      total += 1;
    }
  }
  CHECK(agree / total > 0.9);
}

TEST_CASE("trainer: a 3-step run validates the model and writes last.pt, metrics.jsonl and the curve") {
  testing::TempDir dir;
  REQUIRE(WriteOrganFixture(dir / "data", 32, 8).ok());
  st::TrainOptions o = OrganRun(dir / "data", dir / "out");
  o.epochs = 2;
  o.max_steps = 3;  // an epoch has 4
  uint64_t epochs_reported = 0;
  o.on_epoch = [&](const st::EpochRecord& r) {
    ++epochs_reported;
    CHECK(r.partial);
    CHECK(r.steps == 3);
  };
  auto r = st::Train(o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(epochs_reported == 1);
  CHECK(r->epochs == 0);
  CHECK(r->steps == 3);
  CHECK(std::isfinite(MetricOf(r->metrics, "val_dice")));
  CHECK(std::isfinite(MetricOf(r->metrics, "val_dice_small_bowel")));
  CHECK(r->validation_seconds > 0);
  CHECK(r->wall_seconds >= r->seconds + r->validation_seconds);
  CHECK(std::filesystem::exists(dir / "out/last.pt"));
  CHECK(std::filesystem::exists(dir / "out/best.pt"));
  CHECK(std::filesystem::exists(dir / "out/curve.png"));
  REQUIRE(CountLines(dir / "out/metrics.jsonl") == 1);
  const std::string line = ReadText(dir / "out/metrics.jsonl");
  CHECK_THAT(line, Catch::Contains("\"partial\":true") && Catch::Contains("\"steps\":3") &&
                       Catch::Contains("\"val_dice_large_bowel\""));
  const std::string json = st::SummaryJson(*r);
  CHECK_THAT(json, Catch::Contains("\"epochs\":0") && Catch::Contains("\"steps\":3") &&
                       Catch::Contains("\"wall_seconds\"") && Catch::Contains("\"validation_seconds\"") &&
                       Catch::Contains("\"val_dice\""));
  // The checkpoint resumes within the epoch: the run goes on to the end of epoch 2.
  st::TrainOptions more = o;
  more.max_steps = 0;
  more.on_epoch = nullptr;
  more.resume = dir / "out/last.pt";
  auto rest = st::Train(more);
  INFO(rest.status().ToString());
  REQUIRE(rest.ok());
  CHECK(rest->epochs == 2);
  CHECK(rest->steps == 5);
}

TEST_CASE("trainer: a stop request ends the run like max_steps, and progress comes by time as well as by count") {
  testing::TempDir dir;
  REQUIRE(WriteOrganFixture(dir / "data", 32, 8).ok());
  st::TrainOptions o = OrganRun(dir / "data", dir / "out");
  o.epochs = 3;
  o.progress_every = 1000;
  o.progress_seconds = 0;  // every step is due by time
  std::atomic<bool> stop{false};
  o.stop = &stop;
  uint64_t calls = 0;
  o.on_step = [&](const st::StepInfo& s) {
    ++calls;
    if (s.epoch == 1 && s.step == 1) stop = true;  // as Ctrl-C would
  };
  std::vector<std::string> evaluated;
  o.on_eval = [&](const std::string& split, uint64_t done, uint64_t total) {
    CHECK(done <= total);
    evaluated.push_back(split);
  };
  auto r = st::Train(o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(calls == 6);  // 4 steps of epoch 1, 2 of epoch 2
  CHECK(r->epochs == 1);
  CHECK(r->steps == 6);
  REQUIRE(r->history.size() == 2);
  CHECK_FALSE(r->history[0].partial);
  CHECK(r->history[1].partial);
  CHECK(CountLines(dir / "out/metrics.jsonl") == 2);
  CHECK(!evaluated.empty());
}

TEST_CASE("trainer: Ctrl-C stops shardtrain after its step, writes its outputs and exits 130", "[subprocess]") {
  testing::TempDir dir;
  REQUIRE(WriteOrganFixture(dir / "data", 32, 8).ok());
  const std::string log = dir / "log.txt";
  const pid_t pid =
      testing::Spawn({SHARDTRAIN_BIN, "train", dir / "data", "-o", dir / "out", "--model", "unet", "--epochs", "100000",
                      "--batch", "8", "--base-channels", "4", "--resize", "32", "32", "--progress-seconds", "0.05"},
                     log);
  REQUIRE(pid > 0);
  // Waits until training reports progress (the handler is in place by then), at most 5 minutes.
  bool started = false;
  for (int i = 0; i < 3000 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    started = ReadText(log).find("epoch 1/") != std::string::npos;
  }
  REQUIRE(started);
  kill(pid, SIGINT);
  const int code = testing::WaitExitCode(pid);
  INFO(ReadText(log));
  REQUIRE(code != -1);  // not killed by a signal
  CHECK(code == 130);
  CHECK(std::filesystem::exists(dir / "out/last.pt"));
  CHECK(CountLines(dir / "out/metrics.jsonl") >= 1);
  CHECK_THAT(ReadText(log), Catch::Contains("val_dice_stomach"));
}
