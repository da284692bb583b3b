// Optimizers, learning-rate schedules and checkpoints of shardtrain (their options and
// the schedule itself: optim_options.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "reader/sampler.h"
#include "trainer/models.h"
#include "trainer/optim_options.h"

namespace shardify::trainer {

Result<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(const std::vector<torch::Tensor>& params,
                                                               const OptimizerOptions& options);

// Sets the rate of every parameter group.
void SetLr(torch::optim::Optimizer& optimizer, double lr);

// What a checkpoint records besides the weights and optimizer state.
struct CheckpointMeta {
  ModelSpec model;
  std::string task;  // "classification" | "segmentation"
  std::vector<std::string> classes;
  double mean = 0, stddev = 1;  // image normalization used in training
  int64_t resize_h = 0, resize_w = 0;
  uint64_t epochs_done = 0;    // completed epochs
  int64_t optimizer_step = 0;  // optimizer steps taken (the schedule's state)
  SamplerState sampler;        // where the training loader resumes
  int world_size = 1;          // ranks of the run that wrote it (1 before it was recorded)
  double best_metric = 0;
  bool has_best = false;
  std::string best_metric_name;
  std::vector<int64_t> patch;             // volumes: training patch = sliding window (empty for 2D)
  double overlap = 0.5;                   // volumes: sliding-window overlap
  bool multi_label = false;               // one sigmoid output per class (a multi-label mask)
  std::vector<std::string> mask_classes;  // multi-label: the class of each output channel
  bool has_optimizer = false;             // false in checkpoints written before it was recorded
  OptimizerOptions optimizer;             // what the optimizer state belongs to (lr aside: the
                                          // schedule sets it at every step)
};

// InvalidArgument saying what differs when a run with `wanted` cannot continue from a
// checkpoint whose optimizer is `meta` (name, weight decay, and momentum for sgd); Ok
// when they agree or the checkpoint does not record it.
Status CheckResumeOptimizer(const std::string& path, const CheckpointMeta& meta, const OptimizerOptions& wanted);

// A checkpoint file is a LibTorch archive (records "model", "optimizer" when saved with
// one, and "meta", the CheckpointMeta as JSON) followed by a 16-byte trailer: the magic
// 89 'S' 'F' 'C' 0D 0A 1A 0A, then the XXH3-64 (seed 0, little-endian) of every byte
// before the trailer. Readers refuse a file whose checksum does not match (Corruption).
//
// A file without the trailer is a Corruption error that says so and names the way out: it
// is truncated or damaged, or a bare archive written before checkpoints had the trailer,
// which a reader accepts, unchecked, only when asked to with LegacyCheckpoint::kAccept
// (optim_options.h; shardtrain --legacy-checkpoint).

// Writes model, optimizer (may be null) and meta to `path` (via "<path>.tmp", fsync and rename).
Status SaveCheckpoint(const std::string& path, Model& model, const torch::optim::Optimizer* optimizer,
                      const CheckpointMeta& meta);
// Reads only the meta (to build the model before loading weights); verifies the checksum.
Result<CheckpointMeta> ReadCheckpointMeta(const std::string& path, LegacyCheckpoint legacy = LegacyCheckpoint::kRefuse);
// Loads weights into `model` and, when non-null, the state of `optimizer`; verifies the
// checksum first.
Status LoadCheckpoint(const std::string& path, Model& model, torch::optim::Optimizer* optimizer,
                      LegacyCheckpoint legacy = LegacyCheckpoint::kRefuse);

}  // namespace shardify::trainer
