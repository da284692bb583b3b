// Volumes: UNet-3D on patches, the 3D loss and metrics, sliding-window inference, and
// end-to-end training and prediction on a tiny chunked volume dataset.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "catch_torch.h"
#include "format/dataset.h"
#include "format/writer.h"
#include "mix.h"
#include "trainer/metrics.h"
#include "trainer/models.h"
#include "trainer/sliding_window.h"
#include "trainer/train.h"

namespace st = shardify::trainer;
using namespace shardify;

namespace {

using testing::Mix;

// Per-voxel "model": class 1 where channel 0 is positive, with confident logits.
class SignModel : public st::Model {
 public:
  torch::Tensor forward(torch::Tensor x) override {
    ++calls;
    torch::Tensor v = x.narrow(1, 0, 1) * 20;
    return torch::cat({-v, v}, 1);
  }
  int calls = 0;
};

// Volumes of varying size, i16, with a bright ellipsoid labeled 1 (u8 mask), stored
// chunked, with the foreground locations the converter would store. Splits: train, val.
// `multi_label`: the mask has a channel per class instead, "blob" (the ellipsoid) and
// "top" (its upper half, overlapping it). `far_label`: an i8 mask holding this label where
// the voxel lies well away from the ellipsoid (more than 2 voxels: no interpolation mixes
// it with the ellipsoid's label), as nnU-Net's preprocessing writes -1 outside the nonzero
// region.
Status WriteVolumeFixture(const std::string& dir, uint64_t train = 8, uint64_t val = 2, bool multi_label = false,
                          std::optional<int8_t> far_label = std::nullopt) {
  const std::vector<KeyValue> labels =
      multi_label ? std::vector<KeyValue>{{"labels", "{\"blob\": 0, \"top\": 1}"}, {"multi_label", "true"}}
                  : std::vector<KeyValue>{{"labels", "{\"background\": 0, \"blob\": 1}"}};
  const int64_t k = multi_label ? 2 : 1;
  std::vector<FieldSpec> fields = {
      {"image", FieldKind::kNdarray, DType::kI16, {1, -1, -1, -1}, {}, {}, {1, 8, 8, 8}},
      {"mask", FieldKind::kNdarray, far_label ? DType::kI8 : DType::kU8, {k, -1, -1, -1}, {}, labels, {1, 8, 8, 8}},
      {"mask.fg_locations", FieldKind::kNdarray, DType::kI32, {-1, 4}, {}, {{"role", "fg_locations"}}}};
  WriterOptions wo;
  wo.fsync = false;
  ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir, fields, wo));
  uint64_t x = 11;
  for (uint64_t i = 0; i < train + val; ++i) {
    const int64_t d = 18 + int64_t(Mix(x) % 5), h = 20 + int64_t(Mix(x) % 5), wd = 22 + int64_t(Mix(x) % 5);
    const double cz = 5 + double(Mix(x) % uint64_t(d - 10)), cy = 5 + double(Mix(x) % uint64_t(h - 10)),
                 cx = 5 + double(Mix(x) % uint64_t(wd - 10));
    std::vector<uint8_t> img(size_t(d * h * wd) * 2), mask(size_t(k * d * h * wd));
    std::vector<int32_t> loc;
    size_t n = 0;
    for (int64_t z = 0; z < d; ++z)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t c = 0; c < wd; ++c, ++n) {
          const double r = (z - cz) * (z - cz) / 16.0 + (y - cy) * (y - cy) / 20.0 + (c - cx) * (c - cx) / 12.0;
          const bool in = r < 1;
          mask[n] = in ? 1 : 0;
          if (far_label && r > 2.5) mask[n] = static_cast<uint8_t>(*far_label);
          if (multi_label) mask[size_t(d * h * wd) + n] = in && z < cz;
          const int16_t v = int16_t((in ? 600 : 100) + int64_t(Mix(x) % 300));
          std::memcpy(&img[2 * n], &v, 2);
          if (in && n % 3 == 0) loc.insert(loc.end(), {1, int32_t(z), int32_t(y), int32_t(c)});
        }
    std::vector<uint8_t> locb(loc.size() * 4);
    std::memcpy(locb.data(), loc.data(), locb.size());
    SampleInput in;
    in.split = i < train ? "train" : "val";
    in.values = {FieldValue::Array(std::move(img), {1, d, h, wd}), FieldValue::Array(std::move(mask), {k, d, h, wd}),
                 FieldValue::Array(std::move(locb), {int64_t(loc.size() / 4), 4})};
    RETURN_IF_ERROR(w->Append(std::move(in)));
  }
  return w->Finish();
}

st::TrainOptions VolumeRun(const std::string& data, const std::string& out) {
  st::TrainOptions o;
  o.data_dir = data;
  o.out_dir = out;
  o.model.name = "unet3d";
  o.model.unet_base_channels = 4;
  o.patch = {16, 16, 16};
  o.batch_size = 2;
  o.epochs = 4;
  o.threads = 2;
  o.optimizer.lr = 1e-2;
  o.seed = 3;
  return o;
}

}  // namespace

TEST_CASE("volumes: window starts cover every voxel and end flush with the volume") {
  CHECK(st::WindowStarts(10, 4, 0.5) == std::vector<int64_t>{0, 2, 4, 6});
  CHECK(st::WindowStarts(4, 8, 0.5) == std::vector<int64_t>{0});
  CHECK(st::WindowStarts(8, 8, 0.5) == std::vector<int64_t>{0});
  for (int64_t size : {5, 9, 16, 17, 31, 100}) {
    for (int64_t patch : {1, 3, 4, 5, 16}) {
      if (patch > size) continue;
      for (double overlap : {0.0, 0.25, 0.5, 0.9}) {
        const std::vector<int64_t> s = st::WindowStarts(size, patch, overlap);
        REQUIRE(!s.empty());
        CHECK(s.front() == 0);
        CHECK(s.back() == size - patch);
        std::vector<int> covered(size_t(size), 0);
        for (int64_t start : s)
          for (int64_t i = start; i < start + patch; ++i) covered[size_t(i)] += 1;
        CHECK(std::count(covered.begin(), covered.end(), 0) == 0);
        const auto step = int64_t(std::ceil(std::max(1.0, double(patch) * (1 - overlap))));
        for (size_t i = 1; i < s.size(); ++i) CHECK(s[i] - s[i - 1] <= step);
      }
    }
  }
}

TEST_CASE("volumes: sliding windows reproduce a per-voxel model exactly, small axes padded") {
  torch::manual_seed(1);
  torch::Tensor image = torch::randn({1, 7, 11, 13});
  for (bool gaussian : {true, false}) {
    SignModel model;
    st::SlidingWindowOptions o;
    o.patch = {4, 8, 16};  // W 13 < 16: padded, then cropped back
    o.overlap = 0.5;
    o.batch = 3;
    o.gaussian = gaussian;
    torch::Tensor probs = st::SlidingWindowProbs(model, image, o);
    REQUIRE(probs.sizes().vec() == std::vector<int64_t>{2, 7, 11, 13});
    torch::Tensor expected = torch::softmax(model.forward(image.unsqueeze(0)), 1)[0];
    CHECK(torch::allclose(probs, expected, 1e-5, 1e-6));
    CHECK(torch::equal(probs.argmax(0), (image[0] > 0).to(torch::kLong)));
    // D: starts 0,2,3 (ceil(3/2)+1 = 3 windows); H: 0,3; W: 0 -> 6 windows in 2 passes, + 1 call above.
    CHECK(model.calls == 3);
  }
}

TEST_CASE("volumes: UNet-3D maps [B, C, D, H, W] to logits of the same spatial size") {
  st::ModelSpec spec;
  spec.name = "unet3d";
  spec.in_channels = 2;
  spec.num_classes = 3;
  spec.unet_base_channels = 2;
  auto m = st::MakeModel(spec);
  REQUIRE(m.ok());
  CHECK(st::IsVolumeModel("unet3d"));
  CHECK(st::IsSegmentationModel("unet3d"));
  CHECK_FALSE(st::IsVolumeModel("unet"));
  torch::Tensor y = (*m)->forward(torch::randn({2, 2, 9, 12, 7}));  // odd sizes: ceil pooling, resized skips
  CHECK(y.sizes().vec() == std::vector<int64_t>{2, 3, 9, 12, 7});
}

TEST_CASE("volumes: Dice + CE ignores voxels outside the classes (padding)") {
  torch::manual_seed(2);
  torch::Tensor logits = torch::randn({2, 3, 4, 5, 6});
  torch::Tensor target = torch::randint(0, 3, {2, 4, 5, 6}, torch::kLong);
  torch::Tensor padded = target.clone();
  padded.narrow(1, 2, 2).fill_(255);  // depth 2..3 is padding
  const double loss = st::DiceCeLoss(logits, padded).item<double>();
  const double expected = st::DiceCeLoss(logits.narrow(2, 0, 2), target.narrow(1, 0, 2)).item<double>();
  CHECK(loss == Approx(expected).epsilon(1e-5));
  CHECK(st::DiceCeLoss(logits, target).item<double>() != Approx(expected).epsilon(1e-3));
  // A batch of padding only: cross-entropy 0, no NaN.
  CHECK(std::isfinite(st::DiceCeLoss(logits, torch::full({2, 4, 5, 6}, -1, torch::kLong)).item<double>()));
}

TEST_CASE("volumes: Dice per case is averaged over the cases where the class occurs") {
  st::CaseDiceMetrics m(3);
  // Case 1: class 1 exact (Dice 1); class 2 absent from both (not counted).
  m.Add(torch::tensor({0, 1, 1, 0}, torch::kLong), torch::tensor({0, 1, 1, 0}, torch::kLong));
  // Case 2: class 1: |P|=2, |T|=2, overlap 1 -> 0.5; class 2: predicted once, never true -> 0.
  m.Add(torch::tensor({1, 1, 2, 0}, torch::kLong), torch::tensor({1, 0, 0, 1}, torch::kLong));
  const std::vector<double> d = m.PerClass();
  REQUIRE(d.size() == 3);
  CHECK(d[1] == Approx(0.75));
  CHECK(d[2] == Approx(0.0));
  CHECK(m.MeanForeground() == Approx(0.375));
  CHECK(m.cases() == 2);
}

TEST_CASE("volumes: UNet-3D trains on patches, validates by sliding window, predicts whole volumes") {
  testing::TempDir dir;
  REQUIRE(WriteVolumeFixture(dir / "data").ok());
  st::TrainOptions o = VolumeRun(dir / "data", dir / "out");
  auto r = st::Train(o);
  REQUIRE(r.ok());
  REQUIRE(r->history.size() == 4);
  CHECK(r->best_metric_name == "val_dice");
  CHECK(r->history.back().train_loss < r->history.front().train_loss);
  const double val_dice = r->history.back().Metric("val_dice");
  CHECK(val_dice > 0.3);
  CHECK(val_dice <= 1.0);
  CHECK(std::isfinite(r->history.back().Metric("val_dice_1")));
  CHECK(std::isfinite(r->history.back().val_loss));

  st::PredictOptions p;
  p.checkpoint = dir / "out/last.pt";
  p.data_dir = dir / "data";
  p.split = "val";
  p.out = dir / "masks";
  p.batch_size = 2;  // the training batch: the same windows per pass, so the same numbers
  auto pr = st::Predict(p);
  REQUIRE(pr.ok());
  CHECK(pr->samples == 2);
  REQUIRE(pr->metrics.size() == 1);
  CHECK(pr->metrics[0].second == Approx(val_dice).epsilon(1e-6));  // same model, same windows
  auto masks = Dataset::Open(dir / "masks");
  auto data = Dataset::Open(dir / "data");
  REQUIRE(masks.ok());
  REQUIRE(data.ok());
  REQUIRE((*masks)->num_samples() == 2);
  for (uint64_t i = 0; i < 2; ++i) {
    auto pm = (*masks)->Sample(i);
    auto src = (*data)->Sample(8 + i);  // val cases follow the 8 training cases
    REQUIRE(pm.ok());
    REQUIRE(src.ok());
    auto predicted = pm->shape(1);
    auto image = src->shape(0);
    REQUIRE(predicted.ok());
    REQUIRE(image.ok());
    CHECK(*predicted == *image);  // [1, D, H, W], the case's own size
  }
}

TEST_CASE("volumes: a multi-label mask [K, D, H, W] trains one sigmoid per class and predicts [K, D, H, W]") {
  testing::TempDir dir;
  REQUIRE(WriteVolumeFixture(dir / "data", 8, 2, true).ok());
  st::TrainOptions o = VolumeRun(dir / "data", dir / "out");
  o.epochs = 2;
  auto r = st::Train(o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  const st::EpochRecord& last = r->history.back();
  CHECK(std::isfinite(last.val_loss));
  CHECK(std::isfinite(last.Metric("val_dice_blob")));
  CHECK(std::isfinite(last.Metric("val_dice_top")));
  CHECK(last.Metric("val_dice") == Approx((last.Metric("val_dice_blob") + last.Metric("val_dice_top")) / 2));
  st::PredictOptions p;
  p.checkpoint = dir / "out/last.pt";
  p.data_dir = dir / "data";
  p.split = "val";
  p.out = dir / "masks";
  auto pr = st::Predict(p);
  INFO(pr.status().ToString());
  REQUIRE(pr.ok());
  auto masks = Dataset::Open(dir / "masks");
  auto data = Dataset::Open(dir / "data");
  REQUIRE(masks.ok());
  REQUIRE(data.ok());
  for (uint64_t i = 0; i < 2; ++i) {
    Shape want = *(*data)->Sample(8 + i)->shape(1);  // the source mask: [2, D, H, W]
    CHECK(*(*masks)->Sample(i)->shape(1) == want);
  }
}

TEST_CASE("volumes: with nnU-Net's augmentation, labels below 0 validate as background, as nnU-Net's validation") {
  // nnU-Net's validation turns -1 (outside the nonzero region) into background before its
  // pseudo-Dice and loss: nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py,
  // get_validation_transforms, begins with RemoveLabelTansform(-1, 0) (MIC-DKFZ/nnUNet at
  // 017de4adbc55709423ac569c51191df8a6af7ee5). Training already does the same last, so the
  // same data with 0 in place of -1 trains the same model and must validate the same.
  testing::TempDir dir;
  REQUIRE(WriteVolumeFixture(dir / "minus", 4, 2, false, int8_t{-1}).ok());
  REQUIRE(WriteVolumeFixture(dir / "zero", 4, 2, false, int8_t{0}).ok());
  auto run = [&](const std::string& data, const std::string& out) {
    st::TrainOptions o = VolumeRun(dir / data, dir / out);
    o.epochs = 1;
    auto r = st::Train(o);
    REQUIRE(r.ok());
    REQUIRE(r->history.size() == 1);
    std::map<std::string, double> m(r->history[0].metrics.begin(), r->history[0].metrics.end());
    m["val_loss"] = r->history[0].val_loss;
    return m;
  };
  const auto minus = run("minus", "a"), zero = run("zero", "b");
  for (const char* name : {"val_dice", "val_loss"}) {
    INFO(name);
    REQUIRE(minus.count(name) == 1);
    CHECK(minus.at(name) == Approx(zero.at(name)).margin(1e-6));
  }
}

TEST_CASE("volumes: bad volume options give clear errors") {
  testing::TempDir dir;
  REQUIRE(WriteVolumeFixture(dir / "data", 2, 1).ok());
  st::TrainOptions o = VolumeRun(dir / "data", dir / "out");
  o.patch = {};
  auto r = st::Train(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains("--patch"));
  o = VolumeRun(dir / "data", dir / "out");
  o.overlap = 1.0;
  CHECK(st::Train(o).status().code() == StatusCode::kInvalidArgument);
  o = VolumeRun(dir / "data", dir / "out");
  o.model.name = "unet";  // 2D model on volumes: a patch makes no sense
  r = st::Train(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("unet3d"));
  o.patch = {};
  r = st::Train(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains(dir / "data"));
  o = VolumeRun(dir / "data", dir / "out");
  o.nnunet.ignore_label = 1;  // a class: the loss would learn it
  r = st::Train(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("--aug-ignore-label 1 is a class"));
  o.nnunet.ignore_label.reset();
  o.nnunet.mask_image_channels = std::vector<int64_t>{3};
  CHECK_THAT(st::Train(o).status().message(), Catch::Contains("--aug-mask-image: channel 3"));
}

TEST_CASE("volumes: nnU-Net's augmentation is on by default for unet3d, and a resumed run repeats it") {
  testing::TempDir dir;
  REQUIRE(WriteVolumeFixture(dir / "data", 4, 1).ok());
  auto record = [](std::vector<double>& into, uint64_t epoch) {
    return [&into, epoch](const st::StepInfo& s) {
      if (s.epoch == epoch) into.push_back(s.last_step_loss);
    };
  };
  std::vector<double> straight, plain, resumed, first_epoch;
  st::TrainOptions a = VolumeRun(dir / "data", dir / "a");
  a.epochs = 2;
  a.progress_every = 1;
  a.on_step = record(straight, 1);
  REQUIRE(st::Train(a).ok());
  st::TrainOptions n = a;  // the same run without augmentation sees other batches
  n.out_dir = dir / "n";
  n.aug = st::AugPreset::kNone;
  n.on_step = record(plain, 1);
  REQUIRE(st::Train(n).ok());
  REQUIRE(plain.size() == straight.size());
  CHECK(plain != straight);
  st::TrainOptions b = a;  // stopped after the first epoch (2 batches), then resumed
  b.out_dir = dir / "b";
  b.max_steps = 2;
  b.on_step = record(first_epoch, 0);
  REQUIRE(st::Train(b).ok());
  REQUIRE(first_epoch.size() == 2);
  st::TrainOptions c = a;
  c.out_dir = dir / "b";
  c.resume = dir / "b/last.pt";
  c.on_step = record(resumed, 1);
  auto r = st::Train(c);
  REQUIRE(r.ok());
  REQUIRE(straight.size() == 2);
  REQUIRE(resumed.size() == straight.size());
  for (size_t i = 0; i < straight.size(); ++i) CHECK(resumed[i] == Approx(straight[i]).epsilon(1e-5));
}
