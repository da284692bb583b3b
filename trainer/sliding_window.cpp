#include "trainer/sliding_window.h"

#include <algorithm>
#include <cmath>

namespace shardify::trainer {
namespace {

namespace F = torch::nn::functional;

// Gaussian importance map over the patch, normalized to a maximum of 1 and floored so
// that no voxel has zero weight.
torch::Tensor GaussianMap(const std::vector<int64_t>& patch, const torch::Device& device) {
  torch::Tensor map = torch::ones({1}, torch::kFloat);
  for (int64_t p : patch) {
    torch::Tensor x = torch::arange(p, torch::kFloat) - (double(p) - 1) / 2.0;
    const double sigma = std::max(double(p) / 8.0, 1e-3);
    torch::Tensor g = torch::exp(-(x * x) / (2 * sigma * sigma));
    map = map.unsqueeze(-1) * g;  // outer product, one axis at a time
  }
  map = map.squeeze(0);
  map = map / map.max();
  return map.clamp_min(1e-3).to(device);
}

// Starts of every window: the Cartesian product of the per-axis starts.
std::vector<std::vector<int64_t>> AllStarts(const std::vector<int64_t>& size, const std::vector<int64_t>& patch,
                                            double overlap) {
  std::vector<std::vector<int64_t>> out = {{}};
  for (size_t a = 0; a < size.size(); ++a) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& prefix : out) {
      for (int64_t s : WindowStarts(size[a], patch[a], overlap)) {
        next.push_back(prefix);
        next.back().push_back(s);
      }
    }
    out = std::move(next);
  }
  return out;
}

torch::Tensor Window(const torch::Tensor& t, const std::vector<int64_t>& start, const std::vector<int64_t>& patch) {
  torch::Tensor w = t;
  const int64_t lead = t.dim() - static_cast<int64_t>(patch.size());
  for (size_t a = 0; a < patch.size(); ++a) w = w.narrow(lead + int64_t(a), start[a], patch[a]);
  return w;
}

}  // namespace

std::vector<int64_t> WindowStarts(int64_t size, int64_t patch, double overlap) {
  if (size <= patch) return {0};
  const double step = std::max(1.0, double(patch) * (1.0 - std::clamp(overlap, 0.0, 0.95)));
  const auto n = static_cast<int64_t>(std::ceil(double(size - patch) / step)) + 1;
  std::vector<int64_t> starts(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    starts[size_t(i)] = static_cast<int64_t>(std::llround(double(i) * double(size - patch) / double(n - 1)));
  }
  return starts;
}

torch::Tensor SlidingWindowProbs(Model& model, const torch::Tensor& image, const SlidingWindowOptions& o) {
  const size_t rank = o.patch.size();
  TORCH_CHECK(rank >= 1 && image.dim() == int64_t(rank) + 1, "sliding window: image rank ", image.dim(),
              " does not match a patch of rank ", rank);
  std::vector<int64_t> size(rank), padded(rank);
  std::vector<int64_t> pad;  // F::pad order: last axis first, (before, after) pairs
  for (size_t a = 0; a < rank; ++a) {
    TORCH_CHECK(o.patch[a] >= 1, "sliding window: patch sizes must be >= 1");
    size[a] = image.size(int64_t(a) + 1);
    padded[a] = std::max(size[a], o.patch[a]);
  }
  for (size_t a = rank; a-- > 0;) pad.insert(pad.end(), {0, padded[a] - size[a]});
  torch::Tensor x = F::pad(image.unsqueeze(0), F::PadFuncOptions(pad).value(o.pad_value)).squeeze(0);
  torch::Tensor weight = o.gaussian ? GaussianMap(o.patch, x.device())
                                    : torch::ones(o.patch, torch::TensorOptions(torch::kFloat).device(x.device()));
  std::vector<int64_t> acc_shape = padded;
  torch::Tensor acc;  // [K, padded...], allocated once K is known
  torch::Tensor norm = torch::zeros(padded, weight.options());
  const std::vector<std::vector<int64_t>> starts = AllStarts(padded, o.patch, o.overlap);
  const size_t per = static_cast<size_t>(std::max<int64_t>(o.batch, 1));
  for (size_t lo = 0; lo < starts.size(); lo += per) {
    const size_t hi = std::min(starts.size(), lo + per);
    std::vector<torch::Tensor> windows;
    for (size_t i = lo; i < hi; ++i) windows.push_back(Window(x, starts[i], o.patch));
    const torch::Tensor logits = model.forward(torch::stack(windows)).to(torch::kFloat);
    const torch::Tensor probs = o.sigmoid ? torch::sigmoid(logits) : torch::softmax(logits, 1);
    if (!acc.defined()) {
      acc_shape.insert(acc_shape.begin(), probs.size(1));
      acc = torch::zeros(acc_shape, weight.options());
    }
    for (size_t i = lo; i < hi; ++i) {
      Window(acc, starts[i], o.patch).add_(probs[int64_t(i - lo)] * weight);
      Window(norm, starts[i], o.patch).add_(weight);
    }
  }
  acc = acc / norm.unsqueeze(0);
  for (size_t a = 0; a < rank; ++a) acc = acc.narrow(int64_t(a) + 1, 0, size[a]);
  return acc.contiguous();
}

}  // namespace shardify::trainer
