#include "trainer/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "trainer/transforms.h"

namespace shardify::trainer {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Mean of the per-class values of classes 1..K-1 (every class when `all` or K == 1) that
// are not NaN.
double MeanOfForeground(const std::vector<double>& per_class, bool all) {
  double sum = 0;
  int used = 0;
  for (size_t i = per_class.size() > 1 && !all ? 1 : 0; i < per_class.size(); ++i) {
    if (!std::isnan(per_class[i])) {
      sum += per_class[i];
      ++used;
    }
  }
  return used ? sum / used : kNaN;
}

// 1 - the mean over classes of the soft Dice of `prob` and `onehot` [B, K, spatial...]
// (sums over the batch and space; unlabeled pixels already zero in both).
torch::Tensor SoftDiceLoss(const torch::Tensor& prob, const torch::Tensor& onehot) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < prob.dim(); ++d) dims.push_back(d);
  torch::Tensor inter = (prob * onehot).sum(dims);
  torch::Tensor sizes = prob.sum(dims) + onehot.sum(dims);
  const double eps = 1e-5;
  return 1 - ((2 * inter + eps) / (sizes + eps)).mean();
}

// Binary cross-entropy `bce` [B, K, spatial...] averaged over the labeled pixels, plus the
// soft Dice term of the probabilities.
torch::Tensor BceDice(const torch::Tensor& bce, const torch::Tensor& probs, const torch::Tensor& target) {
  const torch::Tensor valid = (target >= 0).unsqueeze(1).to(torch::kFloat);  // [B, 1, spatial...]
  const torch::Tensor count = (valid.sum() * double(probs.size(1))).clamp_min(1);
  return (bce * valid).sum() / count + SoftDiceLoss(probs * valid, UnpackLabels(target, probs.size(1)));
}

}  // namespace

torch::Tensor ClassificationLoss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), labels);
}

torch::Tensor DiceCeFromLogProbs(const torch::Tensor& log_probs, const torch::Tensor& target) {
  torch::Tensor z = log_probs.to(torch::kFloat);
  const int64_t k = z.size(1);
  torch::Tensor valid = (target >= 0) & (target < k);
  torch::Tensor t = target.masked_fill(valid.logical_not(), 0);
  torch::Tensor validf = valid.unsqueeze(1).to(torch::kFloat);  // [B, 1, spatial...]
  torch::Tensor onehot = torch::one_hot(t, k).movedim(-1, 1).to(torch::kFloat) * validf;
  // Cross-entropy over the valid voxels only (0 when a batch has none).
  torch::Tensor nll = -(z * onehot).sum(1);
  torch::Tensor count = validf.sum().clamp_min(1);
  torch::Tensor ce = nll.sum() / count;
  return ce + SoftDiceLoss(z.exp() * validf, onehot);
}

torch::Tensor DiceCeLoss(const torch::Tensor& logits, const torch::Tensor& target) {
  return DiceCeFromLogProbs(torch::log_softmax(logits.to(torch::kFloat), 1), target);
}

torch::Tensor BceDiceLoss(const torch::Tensor& logits, const torch::Tensor& target) {
  const torch::Tensor z = logits.to(torch::kFloat);
  const torch::Tensor t = UnpackLabels(target, z.size(1));
  const torch::Tensor bce = torch::nn::functional::binary_cross_entropy_with_logits(
      z, t, torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
  return BceDice(bce, torch::sigmoid(z), target);
}

torch::Tensor BceDiceFromProbs(const torch::Tensor& probs, const torch::Tensor& target) {
  const torch::Tensor p = probs.to(torch::kFloat).clamp(1e-7, 1 - 1e-7);
  const torch::Tensor t = UnpackLabels(target, p.size(1));
  return BceDice(-(t * p.log() + (1 - t) * (1 - p).log()), p, target);
}

double BinaryAuc(const std::vector<double>& scores, const std::vector<bool>& positive) {
  // NaN scores (a diverged model) have no order: std::sort would be undefined and the tie
  // loop below would never advance.
  if (std::any_of(scores.begin(), scores.end(), [](double s) { return std::isnan(s); })) return kNaN;
  const size_t n = scores.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Average ranks (1-based) over ties; AUC = (sum of positive ranks - P(P+1)/2) / (P*N).
  double rank_sum = 0, npos = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t t = i; t < j; ++t) {
      if (positive[order[t]]) {
        rank_sum += avg_rank;
        npos += 1;
      }
    }
    i = j;
  }
  const double nneg = static_cast<double>(n) - npos;
  if (npos == 0 || nneg == 0) return kNaN;
  return (rank_sum - npos * (npos + 1) / 2.0) / (npos * nneg);
}

void ClassMetrics::Add(const torch::Tensor& logits, const torch::Tensor& labels) {
  torch::Tensor p = torch::softmax(logits.detach().to(torch::kFloat), 1).to(torch::kCPU).contiguous();
  torch::Tensor l = labels.detach().to(torch::kCPU).to(torch::kLong).contiguous();
  torch::Tensor arg = p.argmax(1).contiguous();
  const int64_t b = p.size(0);
  const float* pp = p.data_ptr<float>();
  const int64_t* pl = l.data_ptr<int64_t>();
  const int64_t* pa = arg.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    if (pl[i] < 0 || pl[i] >= k_) continue;
    labels_.push_back(pl[i]);
    predicted_.push_back(pa[i]);
    probs_.insert(probs_.end(), pp + i * k_, pp + (i + 1) * k_);
  }
}

void ClassMetrics::Append(const std::vector<int64_t>& labels, const std::vector<int64_t>& predicted,
                          const std::vector<float>& probs) {
  labels_.insert(labels_.end(), labels.begin(), labels.end());
  predicted_.insert(predicted_.end(), predicted.begin(), predicted.end());
  probs_.insert(probs_.end(), probs.begin(), probs.end());
}

double ClassMetrics::Accuracy() const {
  if (labels_.empty()) return kNaN;
  size_t hit = 0;
  for (size_t i = 0; i < labels_.size(); ++i) hit += labels_[i] == predicted_[i];
  return static_cast<double>(hit) / static_cast<double>(labels_.size());
}

double ClassMetrics::MacroAuc() const {
  const size_t n = labels_.size();
  double sum = 0;
  int used = 0;
  std::vector<double> scores(n);
  std::vector<bool> pos(n);
  for (int64_t c = 0; c < k_; ++c) {
    for (size_t i = 0; i < n; ++i) {
      scores[i] = probs_[i * k_ + c];
      pos[i] = labels_[i] == c;
    }
    const double auc = BinaryAuc(scores, pos);
    if (!std::isnan(auc)) {
      sum += auc;
      ++used;
    }
  }
  return used ? sum / used : kNaN;
}

void DiceMetrics::AddChannels(const torch::Tensor& predicted, const torch::Tensor& target) {
  const int64_t k = static_cast<int64_t>(inter_.size());
  const torch::Tensor packed = target.detach().to(predicted.device());
  const torch::Tensor valid = (packed >= 0).unsqueeze(1);
  const torch::Tensor p = (predicted.detach() != 0) & valid;
  const torch::Tensor t = UnpackLabels(packed, k) > 0.5;
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < p.dim(); ++d) dims.push_back(d);
  const torch::Tensor counts =
      torch::stack({(p & t).sum(dims), p.sum(dims), t.sum(dims)}).to(torch::kCPU).to(torch::kDouble).contiguous();
  auto c = counts.accessor<double, 2>();
  for (int64_t i = 0; i < k; ++i) {
    inter_[i] += c[0][i];
    pred_[i] += c[1][i];
    target_[i] += c[2][i];
  }
}

void DiceMetrics::Add(const torch::Tensor& predicted, const torch::Tensor& target) {
  if (multi_label_) return AddChannels(predicted, target);
  const int64_t k = static_cast<int64_t>(inter_.size());
  torch::Tensor p = predicted.detach().flatten().to(torch::kLong);
  torch::Tensor t = target.detach().flatten().to(torch::kLong).to(p.device());
  // Counts per class via bincount over the combined code p*K + t (pairs outside range dropped).
  torch::Tensor valid = (p >= 0) & (p < k) & (t >= 0) & (t < k);
  torch::Tensor codes = (p * k + t).masked_select(valid);
  torch::Tensor counts = torch::bincount(codes, {}, k * k).to(torch::kCPU).to(torch::kDouble).view({k, k});
  auto c = counts.accessor<double, 2>();
  for (int64_t i = 0; i < k; ++i) {
    inter_[i] += c[i][i];
    for (int64_t j = 0; j < k; ++j) {
      pred_[i] += c[i][j];
      target_[i] += c[j][i];
    }
  }
}

std::vector<double> DiceMetrics::PerClass() const {
  std::vector<double> d(inter_.size(), kNaN);
  for (size_t i = 0; i < d.size(); ++i) {
    const double denom = pred_[i] + target_[i];
    if (denom > 0) d[i] = 2 * inter_[i] / denom;
  }
  return d;
}

double DiceMetrics::MeanForeground() const { return MeanOfForeground(PerClass(), multi_label_); }

std::vector<double> DiceMetrics::Sums() const {
  std::vector<double> s = inter_;
  s.insert(s.end(), pred_.begin(), pred_.end());
  s.insert(s.end(), target_.begin(), target_.end());
  return s;
}

void DiceMetrics::SetSums(const std::vector<double>& s) {
  const size_t k = inter_.size();
  inter_.assign(s.begin(), s.begin() + k);
  pred_.assign(s.begin() + k, s.begin() + 2 * k);
  target_.assign(s.begin() + 2 * k, s.begin() + 3 * k);
}

void CaseDiceMetrics::Add(const torch::Tensor& predicted, const torch::Tensor& target) {
  DiceMetrics one(static_cast<int64_t>(sum_.size()), multi_label_);
  one.Add(predicted, target);
  const std::vector<double> d = one.PerClass();
  for (size_t c = 0; c < d.size(); ++c) {
    if (std::isnan(d[c])) continue;
    sum_[c] += d[c];
    count_[c] += 1;
  }
  ++cases_;
}

std::vector<double> CaseDiceMetrics::PerClass() const {
  std::vector<double> d(sum_.size(), kNaN);
  for (size_t c = 0; c < d.size(); ++c) {
    if (count_[c] > 0) d[c] = sum_[c] / static_cast<double>(count_[c]);
  }
  return d;
}

double CaseDiceMetrics::MeanForeground() const { return MeanOfForeground(PerClass(), multi_label_); }

std::vector<double> CaseDiceMetrics::Sums() const {
  std::vector<double> s = sum_;
  for (uint64_t c : count_) s.push_back(static_cast<double>(c));
  s.push_back(static_cast<double>(cases_));
  return s;
}

void CaseDiceMetrics::SetSums(const std::vector<double>& s) {
  const size_t k = sum_.size();
  sum_.assign(s.begin(), s.begin() + k);
  for (size_t c = 0; c < k; ++c) count_[c] = static_cast<uint64_t>(s[k + c]);
  cases_ = static_cast<uint64_t>(s[2 * k]);
}

}  // namespace shardify::trainer
