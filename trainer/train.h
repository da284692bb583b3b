// Train and Predict: the shardtrain loop over shard datasets.
//
// Train reads `train_split` through a Loader (decoded by C++ threads, prefetched; random
// patches for volumes), turns
// each batch into tensors without copying, normalizes and augments on the device, and
// steps the model. After every epoch it validates on `val_split` (when the dataset has
// it), appends a line to <out_dir>/metrics.jsonl, redraws <out_dir>/curve.png and writes
// <out_dir>/last.pt (and best.pt when the chosen metric improved). A run resumed from
// last.pt continues exactly: same weights, optimizer state, schedule step, sample order
// and augmentation as the uninterrupted run.
//
// Distributed (options.dist.world_size > 1, see distributed.h): every rank calls Train with
// its own rank; each reads its part of every epoch, gradients are averaged over the ranks
// (the batch size is per rank), validation and test are split and their metrics reduced.
// Only rank 0 writes to out_dir and calls on_step, on_epoch, on_eval and on_note; every
// rank returns the global figures. A rank that fails or stops answering makes the others
// return an IOError naming it within dist.timeout_s.
//
// Errors: Status/Result, never exceptions (LibTorch exceptions are caught here). Library
// code prints nothing; progress goes to the callbacks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"
#include "format/fields.h"
#include "reader/augment.h"
#include "reader/sampler.h"
#include "trainer/augment_options.h"
#include "trainer/distributed.h"
#include "trainer/model_table.h"
#include "trainer/optim_options.h"
#include "trainer/report.h"

namespace shardify::trainer {

struct StepInfo {
  uint64_t epoch = 0, step = 0, steps_per_epoch = 0;  // 0-based epoch and step
  double loss = 0;                                    // mean training loss of the epoch so far
  double samples_per_s = 0;                           // this epoch so far
  double data_wait_fraction = 0;                      // this epoch so far
  double last_step_loss = 0;                          // loss of this step's batch (synchronizes the device)
};

// The largest batch_size of TrainOptions and PredictOptions (per rank): more samples than
// this in one batch fit no device's memory for any model here, and a typo such as
// 100000000 should be a usage error, not an allocation of the whole split.
inline constexpr size_t kMaxBatchSize = 65536;
// The largest height or width of augment.resize_* and augment.crop_* (0: off).
inline constexpr int64_t kMaxImageSide = 16384;

struct TrainOptions {
  std::string data_dir;
  std::string out_dir;      // created if missing
  ModelSpec model;          // name, unet_base_channels; the sizes come from the data
  int64_t num_classes = 0;  // 0 = manifest classes (or the mask's labels / maximum)
  std::string image_field = kImageField, label_field = kLabelField, mask_field = kMaskField;
  std::string train_split = "train", val_split = "val";
  std::string test_split;  // evaluated once at the end; "" = none
  size_t batch_size = 64;
  uint64_t epochs = 5;
  uint64_t repeats = 1;  // passes over the training split per epoch (few large volumes)
  SampleOrder order = SampleOrder::kShuffle;
  size_t threads = 0, prefetch = 4;  // loader decode threads (0 = all cores / dist.local_world_size), batches ahead
  IoMode io = IoMode::kMmap;         // how shards are read (format/dataset.h)
  bool drop_last = false;            // drop the last partial training batch of each epoch
  OptimizerOptions optimizer;
  ScheduleOptions schedule;     // total_steps is computed by Train
  int accumulate = 1;           // batches per optimizer step
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  uint64_t seed = 0;
  bool deterministic = false;          // deterministic algorithms, no cuDNN benchmark
  bool amp = true;                     // bf16 autocast on CUDA when LibTorch has it; off on CPU
  std::optional<double> mean, stddev;  // default: the dataset's statistics of the image
  AugmentOptions augment;              // its resize also applies to validation; seed = seed
  // nnU-Net's augmentation (augment.h), after `augment`: by default for segmentation models
  // (unet, unet3d). Its seed is `seed`; its paddings follow the patch padding. Volumes read
  // each patch with the margin its rotation and scaling need.
  AugPreset aug = AugPreset::kAuto;
  NnUnetAugmentOptions nnunet;
  std::string best_metric;  // default val_accuracy / val_dice (train_loss without val)
  // Volumes (model unet3d): the image [C, D, H, W] (and mask) are read as random patches of
  // this spatial size {D, H, W}, the last round(batch * foreground_fraction) of each batch
  // centred on foreground of a class present in the case (from the field
  // "<mask_field>.fg_locations", when the converter stored it), parts outside the volume
  // padded (image 0; mask -1, which nnU-Net's augmentation makes background 0 and the loss
  // ignores without it). Validation and test run sliding windows over whole
  // volumes with `overlap`. The 2D augmentations of `augment` do not apply to volumes.
  std::vector<int64_t> patch;
  double foreground_fraction = 0.33;
  double overlap = 0.5;
  std::string resume;  // a last.pt to continue from (readable by every rank)
  LegacyCheckpoint legacy_checkpoint = LegacyCheckpoint::kRefuse;  // may resume be one without trailer (optim.h)
  DistributedOptions dist;                                         // world_size 1: this process alone
  // A run ends early after `max_steps` training batches (0 = no limit), or once `*stop` is
  // set (polled between batches; e.g. by a Ctrl-C handler). Ending within an epoch, it
  // validates the current model (when there is a validation split) and writes last.pt
  // (resumable from that step), best.pt when improved, a metrics line marked "partial"
  // and the curve, as at an epoch's end. Distributed, `max_steps` must be the same on
  // every rank; `*stop` set on any rank stops them all after the same step: the next one
  // whose gradients are averaged (with `accumulate` > 1, the next optimizer step).
  uint64_t max_steps = 0;
  const std::atomic<bool>* stop = nullptr;
  uint64_t progress_every = 50;  // batches between on_step calls (and at each epoch end)
  double progress_seconds = 2;   // on_step also when this long has passed since the last
  std::function<void(const StepInfo&)> on_step;
  std::function<void(const EpochRecord&)> on_epoch;
  // Validation and test progress: split, samples done, split size (distributed: rank 0's
  // samples and share); at most every progress_seconds, and when the split is done.
  std::function<void(const std::string& split, uint64_t done, uint64_t total)> on_eval;
  std::function<void(const std::string&)> on_note;  // what the user should know (e.g. an inexact resume)
};

struct TrainSummary {
  uint64_t epochs = 0;            // epochs completed (including those before a resume)
  uint64_t steps = 0;             // training batches of this run
  bool stopped = false;           // ended early by options.stop (on any rank)
  double seconds = 0;             // wall time of this run's training steps
  double wall_seconds = 0;        // wall time of the whole run: steps, validation, test, files
  double validation_seconds = 0;  // of which validation and test
  double samples_per_s = 0;       // over `seconds`
  double data_wait_fraction = 0;  // time blocked in Loader::Next / step time, this run
  std::string best_metric_name;
  double best_metric = 0;                               // NaN when never measured
  std::vector<EpochRecord> history;                     // this run's epochs
  std::vector<std::pair<std::string, double>> metrics;  // last epoch's, plus test_* ones
  std::string device;
  int rank = 0, world_size = 1;
  double allreduce_fraction = 0;  // step time blocked on the gradient all-reduce (after backward)
};

// The summary as one JSON object (epochs, steps, seconds, wall_seconds,
// validation_seconds, samples_per_s, data_wait_fraction, best_metric, best_metric_name,
// metrics, device, rank, world_size, allreduce_fraction).
std::string SummaryJson(const TrainSummary& s);

// Checks what can be checked without the data (names of model, optimizer, schedule and
// device; sizes, rates and fractions): InvalidArgument for a bad value. Train runs it
// first; a CLI runs it before Train to tell usage errors from failed runs.
Status CheckTrainOptions(const TrainOptions& options);

// A classification run needs labels: the training split must hold a sample with a label
// >= 0, a segmentation run a sample with a mask. A split without them is InvalidArgument.
//
// A run whose training loss becomes NaN or infinite (checked every `progress_every`
// batches and at each epoch's end) has diverged: Train stops it and returns an
// InvalidArgument that says so and gives the loss; last.pt and best.pt keep the last
// epoch that ended with a finite loss (nothing is written from the diverged weights).
Result<TrainSummary> Train(const TrainOptions& options);

struct PredictOptions {
  std::string checkpoint;                                          // a last.pt or best.pt
  LegacyCheckpoint legacy_checkpoint = LegacyCheckpoint::kRefuse;  // may it be one without trailer (optim.h)
  std::string data_dir;
  std::string split = "test";
  std::string out;          // classes: a CSV file; segmentation: a shard dataset dir
  size_t batch_size = 256;  // volumes: sliding windows per forward pass (at most 8)
  size_t threads = 0;
  IoMode io = IoMode::kMmap;  // how shards are read (format/dataset.h)
  std::string device = "auto";
  // Volumes: each mask back on its case's source grid (predict_grid.h), with the source's
  // header and geometry; otherwise on the stored grid, with the case's source.* record.
  bool source_grid = false;
};

struct PredictSummary {
  uint64_t samples = 0;
  std::vector<std::pair<std::string, double>> metrics;  // accuracy/auc or dice, when labeled
};

// Checks what can be checked without the data (batch size, device name).
Status CheckPredictOptions(const PredictOptions& options);

// Classes: CSV "index,label,predicted,prob_<class>..." in sample order (fields quoted as
// RFC 4180 says where a class name holds a comma, quote or line break; written to
// "<out>.tmp" and renamed when complete). Segmentation: a shard dataset with fields
// `index` (int) and `mask` (u8 [1, H, W]; multi-label u8 0/1 [K, H, W]; volumes
// [1, D, H, W] / [K, D, H, W] predicted by sliding windows with the checkpoint's patch and
// overlap) in split `split`, each mask at its sample's own size (a --resize undone), with
// the source's `path` and the geometry of its mask (or image) as `mask.spacing`,
// `.origin`, `.direction` (volumes: more, see predict_grid.h).
Result<PredictSummary> Predict(const PredictOptions& options);

}  // namespace shardify::trainer
