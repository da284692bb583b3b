// What Train and Predict check before they touch any data (see train.h).
#include <algorithm>
#include <cstdio>

#include "format/layout.h"
#include "trainer/distributed_internal.h"
#include "trainer/loop_internal.h"
#include "trainer/train.h"

namespace shardify::trainer {
namespace {

Status CheckBatchSize(size_t batch_size) {
  if (batch_size <= kMaxBatchSize) return Status::Ok();
  return InvalidArgument("batch size must be at most " + std::to_string(kMaxBatchSize) + ", got " +
                         std::to_string(batch_size));
}

// A double as the shortest text that reads back as the same value.
std::string Exact(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.17g", v);
  return s;
}

std::string Pair(int64_t a, int64_t b) { return std::to_string(a) + " " + std::to_string(b); }

}  // namespace

namespace detail {

AgreedValues AgreedOptions(const TrainOptions& o) {
  const char* presets[] = {"auto", "none", "nnunet"};
  std::string aug_p, patch;
  for (size_t t = 0; t < kNumAugTransforms; ++t) {
    aug_p += std::string(t ? "," : "") + AugTransforms()[t].name + "=" + Exact(o.nnunet.probability[t]);
  }
  for (const int64_t p : o.patch) patch += (patch.empty() ? "" : "x") + std::to_string(p);
  std::string masked = o.nnunet.mask_image_channels ? "none" : "from the dataset";
  for (const int64_t c : o.nnunet.mask_image_channels.value_or(std::vector<int64_t>{})) {
    masked = (masked == "none" ? "" : masked + ",") + std::to_string(c);
  }
  const AugmentOptions& a = o.augment;
  return {{"format version", std::to_string(kFormatVersion)},
          {"models", ModelNameList(",")},
          {"--model", o.model.name},
          {"--base-channels", std::to_string(o.model.unet_base_channels)},
          {"--classes", std::to_string(o.num_classes)},
          {"fields", o.image_field + " " + o.label_field + " " + o.mask_field},
          {"--train-split", o.train_split},
          {"--val-split", o.val_split},
          {"--test-split", o.test_split},
          {"--best-metric", o.best_metric},
          {"--batch", std::to_string(o.batch_size)},
          {"--epochs", std::to_string(o.epochs)},
          {"--repeats", std::to_string(o.repeats)},
          {"--max-steps", std::to_string(o.max_steps)},
          {"--order", SampleOrderName(o.order)},
          {"drop last", o.drop_last ? "yes" : "no"},
          {"--optimizer", o.optimizer.name},
          {"--lr", Exact(o.optimizer.lr)},
          {"--weight-decay", Exact(o.optimizer.weight_decay)},
          {"momentum", Exact(o.optimizer.momentum)},
          {"--schedule", o.schedule.name},
          {"--warmup", Exact(o.schedule.warmup_fraction)},
          {"schedule divisors", Exact(o.schedule.start_div) + " " + Exact(o.schedule.final_div)},
          {"--accumulate", std::to_string(o.accumulate)},
          {"--seed", std::to_string(o.seed)},
          {"--deterministic", o.deterministic ? "yes" : "no"},
          {"--no-amp", o.amp ? "no" : "yes"},
          {"--mean", o.mean ? Exact(*o.mean) : "from the dataset"},
          {"--std", o.stddev ? Exact(*o.stddev) : "from the dataset"},
          {"--resize", Pair(a.resize_h, a.resize_w)},
          {"--crop", Pair(a.crop_h, a.crop_w)},
          {"--flip-x --flip-y", std::to_string(a.flip_x) + " " + std::to_string(a.flip_y)},
          {"--rotate", Exact(a.rotate_deg)},
          {"--scale", Exact(a.scale)},
          {"--translate", Exact(a.translate)},
          {"--intensity-scale", Exact(a.intensity_scale)},
          {"--intensity-shift", Exact(a.intensity_shift)},
          {"--aug", presets[static_cast<int>(o.aug)]},
          {"--aug-p", aug_p},
          {"--aug-mask-mode", MaskModeName(o.nnunet.mask_mode)},
          {"--aug-ignore-label", o.nnunet.ignore_label ? std::to_string(*o.nnunet.ignore_label) : "none"},
          {"--aug-mask-image", masked},
          {"--patch", patch},
          {"--fg-fraction", Exact(o.foreground_fraction)},
          {"--overlap", Exact(o.overlap)},
          {"--resume", o.resume.empty() ? "no" : "yes"},
          {"--dist-backend", o.dist.backend},
          {"--bucket-mb", Exact(o.dist.bucket_mb)}};
}

}  // namespace detail

Status CheckTrainOptions(const TrainOptions& o) {
  if (FindModel(o.model.name) == nullptr) {
    return InvalidArgument("unknown model '" + o.model.name + "' (" + ModelNameList(", ") + ")");
  }
  if (o.batch_size < 1 || o.epochs < 1 || o.accumulate < 1 || o.repeats < 1) {
    return InvalidArgument("batch size, epochs, accumulation and repeats must be >= 1");
  }
  RETURN_IF_ERROR(CheckBatchSize(o.batch_size));
  for (const int64_t side : {o.augment.resize_h, o.augment.resize_w, o.augment.crop_h, o.augment.crop_w}) {
    if (side < 0 || side > kMaxImageSide) {
      return InvalidArgument("--resize and --crop sizes must be 1.." + std::to_string(kMaxImageSide) + ", got " +
                             std::to_string(side));
    }
  }
  RETURN_IF_ERROR(CheckOptimizer(o.optimizer));
  RETURN_IF_ERROR(CheckSchedule(o.schedule));
  RETURN_IF_ERROR(detail::CheckDeviceName(o.device));
  RETURN_IF_ERROR(CheckDistributedOptions(o.dist));
  if (IsVolumeModel(o.model.name)) {
    if (o.patch.size() != 3 || std::any_of(o.patch.begin(), o.patch.end(), [](int64_t p) { return p < 1; })) {
      return InvalidArgument("model '" + o.model.name + "' needs a patch size D x H x W of positive sizes (--patch)");
    }
    if (!(o.foreground_fraction >= 0 && o.foreground_fraction <= 1) || !(o.overlap >= 0 && o.overlap < 1)) {
      return InvalidArgument("foreground fraction must be in [0, 1] and overlap in [0, 1)");
    }
  } else if (!o.patch.empty()) {
    return InvalidArgument("--patch is for volume models (unet3d), not '" + o.model.name + "'");
  }
  return Status::Ok();
}

Status CheckPredictOptions(const PredictOptions& o) {
  if (o.batch_size < 1) return InvalidArgument("batch size must be >= 1");
  RETURN_IF_ERROR(CheckBatchSize(o.batch_size));
  return detail::CheckDeviceName(o.device);
}

}  // namespace shardify::trainer
