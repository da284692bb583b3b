// Losses and metrics of shardtrain.
//
// Classification: cross-entropy; accuracy; macro one-vs-rest ROC AUC.
// Segmentation: cross-entropy + soft Dice (multi-label: binary cross-entropy + soft Dice
// per class); Dice per class accumulated over a whole split
// (sums of intersections and sizes, not a mean of per-batch values), or for volumes the
// mean over cases of each case's Dice (as nnU-Net reports it).
// Functions here may throw c10::Error on mismatched tensors (the loop catches it).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace shardify::trainer {

// logits [B, K], labels int64 [B] -> scalar mean cross-entropy.
torch::Tensor ClassificationLoss(const torch::Tensor& logits, const torch::Tensor& labels);

// logits [B, K, spatial...] (2D or 3D), target int64 [B, spatial...] -> cross-entropy +
// (1 - mean soft Dice over the K classes, computed on softmax probabilities over the whole
// batch). Voxels whose target is outside [0, K) (padding, ignore labels) count in neither
// term; a batch without a valid voxel gives cross-entropy 0.
torch::Tensor DiceCeLoss(const torch::Tensor& logits, const torch::Tensor& target);
// The same from log-probabilities [B, K, spatial...] (e.g. log of averaged window outputs).
torch::Tensor DiceCeFromLogProbs(const torch::Tensor& log_probs, const torch::Tensor& target);

// Multi-label segmentation: logits [B, K, spatial...], target packed [B, spatial...]
// (PackLabels: bit k = class k, -1 = unlabeled) -> binary cross-entropy over every class
// and pixel + (1 - mean soft Dice over the K classes, each computed on sigmoid
// probabilities over the whole batch): the usual loss of the UW-Madison GI tract task.
// Unlabeled pixels count in neither term.
torch::Tensor BceDiceLoss(const torch::Tensor& logits, const torch::Tensor& target);
// The same from probabilities [B, K, spatial...] (e.g. averaged sliding-window outputs).
torch::Tensor BceDiceFromProbs(const torch::Tensor& probs, const torch::Tensor& target);

// Area under the ROC curve of `scores` for the binary `positive` flags (ties count 1/2:
// the Mann-Whitney statistic). NaN when either class is absent or a score is NaN.
double BinaryAuc(const std::vector<double>& scores, const std::vector<bool>& positive);

// Accumulates classification results over a split.
class ClassMetrics {
 public:
  explicit ClassMetrics(int64_t num_classes) : k_(num_classes) {}
  // logits [B, K] (any device), labels int64 [B]. Samples with label outside [0, K) are
  // ignored (unlabeled data uses -1).
  void Add(const torch::Tensor& logits, const torch::Tensor& labels);
  int64_t count() const { return static_cast<int64_t>(labels_.size()); }
  int64_t num_classes() const { return k_; }
  double Accuracy() const;  // NaN when empty
  // Mean over classes that have both positives and negatives of the one-vs-rest AUC of the
  // softmax probability; NaN when no class qualifies.
  double MacroAuc() const;

  // What Add kept (labels, predicted classes, probabilities row-major [count, K]), and
  // Append to add results kept elsewhere with the same K: to combine several processes'.
  const std::vector<int64_t>& labels() const { return labels_; }
  const std::vector<int64_t>& predicted() const { return predicted_; }
  const std::vector<float>& probs() const { return probs_; }
  void Append(const std::vector<int64_t>& labels, const std::vector<int64_t>& predicted,
              const std::vector<float>& probs);

 private:
  int64_t k_;
  std::vector<int64_t> labels_, predicted_;
  std::vector<float> probs_;  // row-major [count, K]
};

// Accumulates hard-prediction Dice per class over a split.
class DiceMetrics {
 public:
  // multi_label: each class is a channel of its own (no background; classes may overlap).
  explicit DiceMetrics(int64_t num_classes, bool multi_label = false)
      : inter_(num_classes, 0), pred_(num_classes, 0), target_(num_classes, 0), multi_label_(multi_label) {}
  // predicted and target: int64 [B, H, W] class maps. Multi-label: predicted 0/1 (or bool)
  // [B, K, H, W], target packed [B, H, W] (PackLabels; unlabeled pixels are left out).
  void Add(const torch::Tensor& predicted, const torch::Tensor& target);
  // 2|P n T| / (|P| + |T|) per class; NaN for a class absent from both.
  std::vector<double> PerClass() const;
  // Mean of PerClass over the foreground classes that are not NaN: 1..K-1 (class 0 too
  // when K == 1), or every class when multi-label; NaN when none.
  double MeanForeground() const;

  // The running sums (per class: intersections, then predicted sizes, then target sizes),
  // to add several processes' together; SetSums takes that layout back.
  std::vector<double> Sums() const;
  void SetSums(const std::vector<double>& sums);

 private:
  void AddChannels(const torch::Tensor& predicted, const torch::Tensor& target);
  std::vector<double> inter_, pred_, target_;
  bool multi_label_ = false;
};

// Dice per class of each case (one Add per volume), averaged over the cases where the class
// is present in the prediction or the target.
class CaseDiceMetrics {
 public:
  explicit CaseDiceMetrics(int64_t num_classes, bool multi_label = false)
      : sum_(num_classes, 0), count_(num_classes, 0), multi_label_(multi_label) {}
  // One case: as DiceMetrics::Add with a batch of one.
  void Add(const torch::Tensor& predicted, const torch::Tensor& target);
  uint64_t cases() const { return cases_; }
  std::vector<double> PerClass() const;  // NaN for a class absent from every case
  double MeanForeground() const;         // as DiceMetrics::MeanForeground
  // As DiceMetrics: per-class Dice sums, then per-class case counts, then the case count.
  std::vector<double> Sums() const;
  void SetSums(const std::vector<double>& sums);

 private:
  std::vector<double> sum_;
  std::vector<uint64_t> count_;
  uint64_t cases_ = 0;
  bool multi_label_ = false;
};

}  // namespace shardify::trainer
