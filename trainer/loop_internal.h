// Pieces shared by Train and Predict. Internal: not part of the public API.
#pragma once

#include <torch/torch.h>

#include <c10/core/Event.h>

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/dataset.h"
#include "format/status.h"
#include "reader/loader.h"
#include "trainer/models.h"

namespace shardify::trainer::detail {

class RankGroup;  // distributed_internal.h

// "auto" -> cuda when a device answers, else cpu. "cuda" without a device is an error.
Result<torch::Device> PickDevice(const std::string& name);
// InvalidArgument unless `name` is auto, cpu, cuda or cuda:N (whether a device answers is
// PickDevice's business).
Status CheckDeviceName(const std::string& name);

// Enables bf16 autocast for CUDA in its scope when `enable`; a no-op otherwise.
class AutocastScope {
 public:
  explicit AutocastScope(bool enable);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool previous_ = false;
};

// Holds batches whose asynchronous (pinned) copies to a CUDA device may still be running,
// so their ring slots are not refilled under the copy. On the CPU nothing is held.
class InFlightBatches {
 public:
  // Records an event after the copies already issued on the device's current stream.
  void Add(std::shared_ptr<Batch> batch, const torch::Device& device);
  // Releases batches whose copies are done; waits while more than `max_pending` remain.
  void Release(size_t max_pending);

 private:
  std::deque<std::pair<std::shared_ptr<Batch>, c10::Event>> pending_;
};

// How a batch becomes model inputs.
struct DataSpec {
  std::string image_field = "image", label_field = "label", mask_field = "mask";
  bool segmentation = false;
  double mean = 0, stddev = 1;
  int64_t resize_h = 0, resize_w = 0;  // applied in Evaluate/Predict (Train: via Augment)
  // Volumes (a 3D model): training reads patches of this spatial size; evaluation covers
  // whole volumes by sliding windows overlapping by `overlap`. Empty = 2D images.
  std::vector<int64_t> patch;
  double overlap = 0.5;
  int spatial_rank() const { return patch.empty() ? 2 : static_cast<int>(patch.size()); }
};

struct Inputs {
  torch::Tensor image;  // float [B, C, H, W] (volumes [B, C, D, H, W]) on the device, normalized
  torch::Tensor target; // int64: labels [B] or label maps [B, H, W] ([B, D, H, W])
};

// Errors name the dataset directory, the split and the batch's first sample.
Result<Inputs> BatchInputs(const std::shared_ptr<Batch>& batch, const DataSpec& spec,
                           const torch::Device& device, const std::string& where);

// Loss of a batch for the task.
torch::Tensor TaskLoss(const torch::Tensor& logits, const torch::Tensor& target, bool segmentation);

// Opens a sequential single-epoch loader over `split` (with `group`: over this rank's part).
Result<std::unique_ptr<Loader>> SplitLoader(const std::shared_ptr<const Dataset>& ds,
                                            const std::string& split, const DataSpec& spec,
                                            size_t batch_size, size_t threads, const RankGroup* group = nullptr);

struct EvalResult {
  double loss = 0;
  std::vector<std::pair<std::string, double>> metrics;  // "<prefix>_accuracy", ...
};

// Runs the model in eval mode over `split`; metric names start with `prefix` + "_".
// Volumes: one sliding-window pass per case, Dice per class averaged over the cases.
// With `group`, each rank evaluates its part and every rank returns the whole split's figures.
Result<EvalResult> Evaluate(Model& model, const std::shared_ptr<const Dataset>& ds,
                            const std::string& split, const DataSpec& spec, int64_t num_classes,
                            const torch::Device& device, size_t batch_size, size_t threads,
                            const std::string& prefix, RankGroup* group = nullptr);

// Sliding-window class probabilities [K, spatial...] of one normalized volume [C, spatial...].
torch::Tensor VolumeProbs(Model& model, const torch::Tensor& image, const DataSpec& spec, size_t batch_size);

}  // namespace shardify::trainer::detail
