// What Train and Predict check before they touch any data (see train.h).
#include <algorithm>

#include "trainer/loop_internal.h"
#include "trainer/train.h"

namespace shardify::trainer {
namespace {

Status CheckBatchSize(size_t batch_size) {
  if (batch_size <= kMaxBatchSize) return Status::Ok();
  return InvalidArgument("batch size must be at most " + std::to_string(kMaxBatchSize) + ", got " +
                         std::to_string(batch_size));
}

}  // namespace

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
