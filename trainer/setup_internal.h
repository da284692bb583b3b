// What a training run decides before its first step: the dataset and what its fields
// mean, the model's shape, the device, the augmentation, the metric that picks the best
// checkpoint, the checkpoint resumed from. Internal to trainer/: loop.cpp trains with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"
#include "trainer/augment.h"
#include "trainer/loop_internal.h"
#include "trainer/optim.h"
#include "trainer/train.h"

namespace shardify::trainer::detail {

// Everything decided before the first step.
struct Setup {
  std::shared_ptr<const Dataset> ds;
  DataSpec spec;
  ModelSpec model;
  std::vector<std::string> classes;
  torch::Device device{torch::kCPU};
  bool has_val = false;
  std::string best_name, curve_metric;
  CheckpointMeta resumed;
  std::shared_ptr<const NnUnetAugment> nnunet;  // null: --aug none
  // nnunet runs in the train Loader's decode threads (LoaderOptions::augment: the host
  // implementation), which hand over normalized, augmented patches: CPU training on
  // patches of one label map. Otherwise it runs on the device after the copy.
  bool augment_in_loader = false;
  int rank = 0, world_size = 1;  // distributed: this process's place
};

// Label of patch voxels outside the volume: outside [0, K), so the loss ignores it.
constexpr int64_t kLabelPad = -1;

// Whether a larger value of `metric` is better (not a loss).
inline bool HigherIsBetter(const std::string& metric) {
  return metric.size() < 4 || metric.compare(metric.size() - 4, 4, "loss") != 0;
}

// Checks the options, opens the dataset and fills `s`; refuses data the options cannot
// train on (no labels, a checkpoint of another model), before anything is written.
Status Prepare(const TrainOptions& o, Setup& s);

}  // namespace shardify::trainer::detail
