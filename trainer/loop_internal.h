// Pieces shared by Train and Predict. Internal: not part of the public API.
#pragma once

#include <c10/core/Event.h>
#include <torch/torch.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"
#include "format/fields.h"
#include "reader/loader.h"
#include "trainer/augment.h"
#include "trainer/models.h"

namespace shardify::trainer::detail {

class RankGroup;  // distributed_internal.h

// An exception LibTorch threw while doing `context` ("training on DIR") as a Status of one
// line (no C++ backtrace): a failed allocation of host or device memory is
// ResourceExhausted ("out of memory"), anything else Internal.
Status FromTorchException(const std::string& context, const std::exception& e);

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
  std::string image_field = kImageField, label_field = kLabelField, mask_field = kMaskField;
  bool segmentation = false;
  double mean = 0, stddev = 1;
  int64_t resize_h = 0, resize_w = 0;  // applied in Evaluate/Predict (Train: via Augment)
  // Volumes (a 3D model): training reads patches of this spatial size; evaluation covers
  // whole volumes by sliding windows overlapping by `overlap`. Empty = 2D images.
  std::vector<int64_t> patch;
  double overlap = 0.5;
  // Multi-label masks [K, spatial...]: targets are packed (PackLabels), the model has K
  // sigmoid outputs, Dice is reported per class name.
  bool multi_label = false;
  std::vector<std::string> class_names;  // multi-label: the mask's classes, by channel
  bool targets = true;                   // false: images only (an unlabeled split); the target is -1 per sample
  int spatial_rank() const { return patch.empty() ? 2 : static_cast<int>(patch.size()); }
  // The field the model learns to predict: the mask (segmentation) or the label.
  const std::string& target_field() const { return segmentation ? mask_field : label_field; }
};

// How a mask field labels its pixels (docs/fields.md): multi-label when its meta
// "multi_label" is "true", or, without that key, when it has K > 1 channels and its "labels"
// name K classes numbered 0..K-1 (the rle layout before the key existed). `names` lists
// the entries of "labels", those with an integer value by value first (empty without).
struct MaskClasses {
  bool multi_label = false;
  std::vector<std::string> names;
};
MaskClasses DescribeMask(const FieldSpec& mask);

struct Inputs {
  torch::Tensor image;                      // float [B, C, H, W] (volumes [B, C, D, H, W]) on the device, normalized
  torch::Tensor target;                     // int64: labels [B], label maps [B, H, W] ([B, D, H, W]) or packed
                                            // multi-label maps of the same shape
  std::vector<std::vector<int64_t>> sizes;  // 2D: each sample's own {H, W} before any resize
};

// With spec.resize_h/w (2D), each sample is resized from its own size (ResizeEach).
// Errors name the dataset directory, the split and the batch's first sample.
Result<Inputs> BatchInputs(const std::shared_ptr<Batch>& batch, const DataSpec& spec, const torch::Device& device,
                           const std::string& where);

// Loss of a batch for the task.
torch::Tensor TaskLoss(const torch::Tensor& logits, const torch::Tensor& target, const DataSpec& spec);

// Opens a sequential single-epoch loader over `split` (with `group`: over this rank's part),
// for evaluation and prediction: the image field, and the target field when spec.targets.
// Volumes (spec.patch set) are read one batch ahead only.
Result<std::unique_ptr<Loader>> SplitLoader(const std::shared_ptr<const Dataset>& ds, const std::string& split,
                                            const DataSpec& spec, size_t batch_size, size_t threads,
                                            const RankGroup* group = nullptr);

struct EvalResult {
  double loss = 0;
  std::vector<std::pair<std::string, double>> metrics;  // "<prefix>_accuracy", ...
};

// Called after each batch (case) evaluated with the samples done and the split's total
// (with a group: this rank's samples done and its share of the split).
using EvalProgress = std::function<void(uint64_t done, uint64_t total)>;

// What an evaluation reads and where it runs.
struct EvalContext {
  std::shared_ptr<const Dataset> ds;
  DataSpec spec;
  int64_t num_classes = 0;
  torch::Device device = torch::kCPU;
  size_t batch_size = 1;       // of images; of sliding windows for volumes
  size_t threads = 0;          // decode threads
  EvalProgress progress;       // may be empty
  RankGroup* group = nullptr;  // with a group, each rank evaluates its part
  // nnU-Net's augmentation of training, if it runs: the voxels of validation's masks outside
  // the labelled data (OutsideLabelled) then take the label they take in training's
  // batches, before the loss and Dice, as in nnU-Net's validation; without it, they are
  // left out.
  std::shared_ptr<const NnUnetAugment> nnunet;
};

// Runs the model in eval mode over `split`; metric names start with `prefix` + "_".
// Volumes: one sliding-window pass per case, Dice per class averaged over the cases.
// Multi-label: per-class sigmoids thresholded at 0.5, "<prefix>_dice_<class name>".
// With a group, every rank returns the whole split's figures; `progress` then counts this
// rank's part.
Result<EvalResult> Evaluate(Model& model, const EvalContext& c, const std::string& split, const std::string& prefix);

// Sliding-window class probabilities [K, spatial...] of one normalized volume [C, spatial...].
torch::Tensor VolumeProbs(Model& model, const torch::Tensor& image, const DataSpec& spec, size_t batch_size);

// Hard predictions of model outputs [B, K, spatial...]: class maps [B, spatial...] (argmax),
// or multi-label 0/1 [B, K, spatial...] (threshold 0.5). `probs`: outputs are probabilities.
torch::Tensor Predictions(const torch::Tensor& outputs, const DataSpec& spec, bool probs);

}  // namespace shardify::trainer::detail
