// nnU-Net's augmentation: the batched tensor ops that apply an AugmentPlan on the device
// (reader/augment_host.cpp is the host's twin, sample by sample).
//
// Each transform computes only the samples it picked (index_select), then puts them back
// in place with one more index_select over [batch; picked] (deterministic on every device,
// unlike a scatter). Channels a transform leaves alone keep their exact values.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "trainer/augment.h"

namespace shardify::trainer {

namespace {

namespace F = torch::nn::functional;

std::vector<int64_t> Picked(const std::vector<bool>& pick) {
  std::vector<int64_t> idx;
  for (size_t i = 0; i < pick.size(); ++i) {
    if (pick[i]) idx.push_back(static_cast<int64_t>(i));
  }
  return idx;
}

torch::Tensor Longs(const std::vector<int64_t>& v, const torch::Device& device) {
  return torch::tensor(v, torch::kLong).to(device);
}

torch::Tensor Rows(const torch::Tensor& x, const std::vector<int64_t>& idx) {
  return x.index_select(0, Longs(idx, x.device()));
}

// x with rows idx[k] replaced by y[k]; idx ascending.
torch::Tensor Merge(const torch::Tensor& x, const std::vector<int64_t>& idx, const torch::Tensor& y) {
  const int64_t b = x.size(0);
  if (static_cast<int64_t>(idx.size()) == b) return y;
  std::vector<int64_t> order(static_cast<size_t>(b));
  std::iota(order.begin(), order.end(), 0);
  for (size_t k = 0; k < idx.size(); ++k) order[static_cast<size_t>(idx[k])] = b + static_cast<int64_t>(k);
  return torch::cat({x, y}).index_select(0, Longs(order, x.device()));
}

// Per (picked sample, channel) values as float [n, C, 1, ...] for broadcasting over `x`.
torch::Tensor ChannelValues(const std::vector<double>& v, const std::vector<int64_t>& idx, int64_t channels,
                            const torch::Tensor& x) {
  std::vector<float> out;
  for (int64_t s : idx) {
    for (int64_t c = 0; c < channels; ++c) out.push_back(static_cast<float>(v[static_cast<size_t>(s * channels + c)]));
  }
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[0] = static_cast<int64_t>(idx.size());
  shape[1] = channels;
  return torch::tensor(out).to(x.device()).view(shape);
}

// Reductions over the spatial axes, one axis at a time (last first): every step keeps many
// outputs (or is small), so LibTorch splits the work across outputs, never within one, and
// the result does not depend on the thread count.
torch::Tensor SpatialMean(const torch::Tensor& x) {
  torch::Tensor s = x;
  for (int64_t d = x.dim() - 1; d >= 2; --d) s = s.sum(d, /*keepdim=*/true);
  return s / static_cast<double>(x[0][0].numel());
}

torch::Tensor SpatialStd(const torch::Tensor& x, const torch::Tensor& mean) {
  torch::Tensor s = (x - mean).square();
  for (int64_t d = x.dim() - 1; d >= 2; --d) s = s.sum(d, true);
  return (s / static_cast<double>(std::max<int64_t>(x[0][0].numel() - 1, 1))).sqrt();
}

torch::Tensor SpatialMin(const torch::Tensor& x) {
  torch::Tensor s = x;
  for (int64_t d = x.dim() - 1; d >= 2; --d) s = std::get<0>(s.min(d, true));
  return s;
}

torch::Tensor SpatialMax(const torch::Tensor& x) {
  torch::Tensor s = x;
  for (int64_t d = x.dim() - 1; d >= 2; --d) s = std::get<0>(s.max(d, true));
  return s;
}

// y where `value` differs from `identity` for that (sample, channel), else x exactly.
torch::Tensor KeepUntouched(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& value,
                            double identity) {
  return torch::where(value != identity, y, x);
}

// Index of position k of [-r, n + r) reflected into [0, n) (mirror without repeating the edge).
int64_t Reflect(int64_t k, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  k = ((k % period) + period) % period;
  return k < n ? k : period - k;
}

// Separable Gaussian blur along `dim` of x [n, C, spatial...], sigma per (row, channel)
// (0: that channel untouched), the kernel cut at 3 sigma, borders reflected.
torch::Tensor BlurAxis(const torch::Tensor& x, int64_t dim, const std::vector<double>& sigma) {
  const double largest = *std::max_element(sigma.begin(), sigma.end());
  if (largest <= 0) return x;
  const int64_t r = static_cast<int64_t>(std::ceil(3 * largest)), taps = 2 * r + 1, len = x.size(dim);
  std::vector<float> w(static_cast<size_t>(taps) * sigma.size(), 0.0f);  // [taps, rows]
  for (size_t i = 0; i < sigma.size(); ++i) {
    if (sigma[i] <= 0) {
      w[static_cast<size_t>(r) * sigma.size() + i] = 1;
      continue;
    }
    const int64_t ri = static_cast<int64_t>(std::ceil(3 * sigma[i]));
    double sum = 0;
    for (int64_t t = -ri; t <= ri; ++t) sum += std::exp(-0.5 * double(t * t) / (sigma[i] * sigma[i]));
    for (int64_t t = -ri; t <= ri; ++t) {
      w[static_cast<size_t>(t + r) * sigma.size() + i] =
          static_cast<float>(std::exp(-0.5 * double(t * t) / (sigma[i] * sigma[i])) / sum);
    }
  }
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[0] = x.size(0);
  shape[1] = x.size(1);
  const torch::Tensor weights = torch::tensor(w).to(x.device()).view({taps, x.size(0) * x.size(1)});
  std::vector<int64_t> pad_index;
  for (int64_t k = -r; k < len + r; ++k) pad_index.push_back(Reflect(k, len));
  const torch::Tensor padded = x.index_select(dim, Longs(pad_index, x.device()));
  torch::Tensor out = padded.narrow(dim, 0, len) * weights[0].view(shape);
  for (int64_t t = 1; t < taps; ++t) out = out + padded.narrow(dim, t, len) * weights[t].view(shape);
  return out;
}

// Nearest-neighbour downsampling of each row of x [n, C, spatial...] along `dim` by its
// factor, then linear upsampling back (align_corners false): two gathers and a blend.
torch::Tensor LowResAxis(const torch::Tensor& x, int64_t dim, const std::vector<double>& factor) {
  const int64_t len = x.size(dim), rows = static_cast<int64_t>(factor.size());
  std::vector<int64_t> i0(static_cast<size_t>(rows * len)), i1(i0.size());
  std::vector<float> w1(i0.size(), 0.0f);
  for (int64_t row = 0; row < rows; ++row) {
    const double f = factor[static_cast<size_t>(row)];
    const int64_t m = std::max<int64_t>(1, std::lround(double(len) * f));
    auto source = [&](int64_t j) {
      return std::min<int64_t>(int64_t(std::floor((j + 0.5) * double(len) / double(m))), len - 1);
    };
    for (int64_t k = 0; k < len; ++k) {
      const size_t at = static_cast<size_t>(row * len + k);
      if (f == 1 || m == len) {
        i0[at] = i1[at] = k;
        continue;
      }
      const double u = std::max(0.0, (k + 0.5) * double(m) / double(len) - 0.5);
      const int64_t lo = std::min<int64_t>(int64_t(std::floor(u)), m - 1), hi = std::min<int64_t>(lo + 1, m - 1);
      i0[at] = source(lo);
      i1[at] = source(hi);
      w1[at] = static_cast<float>(u - double(lo));
    }
  }
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[0] = x.size(0);
  shape[1] = x.size(1);
  shape[static_cast<size_t>(dim)] = len;
  const torch::Tensor a = Longs(i0, x.device()).view(shape).expand(x.sizes());
  const torch::Tensor b = Longs(i1, x.device()).view(shape).expand(x.sizes());
  const torch::Tensor w = torch::tensor(w1).to(x.device()).view(shape);
  return x.gather(dim, a) * (1 - w) + x.gather(dim, b) * w;
}

// Gamma of each (row, channel), range-normalized, with its mean and std restored.
torch::Tensor Gamma(torch::Tensor x, const torch::Tensor& gamma, bool inverted) {
  if (inverted) x = -x;
  const torch::Tensor mean = SpatialMean(x), std = SpatialStd(x, mean);
  const torch::Tensor lo = SpatialMin(x), range = SpatialMax(x) - lo;
  torch::Tensor y = ((x - lo) / range.clamp_min(1e-7)).pow(gamma) * range + lo;
  const torch::Tensor y_mean = SpatialMean(y);
  y = (y - y_mean) * (std / SpatialStd(y, y_mean).clamp_min(1e-7)) + mean;
  return inverted ? -y : y;
}

// Standard normal noise of `shape` from a counter-based hash of (seed, element index),
// by Box-Muller: elementwise integer ops on the device, so the same values for any thread
// count and on any device, with no generator state to share or restore.
torch::Tensor HashNormal(const std::vector<int64_t>& shape, uint64_t seed, const torch::TensorOptions& options) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  TORCH_CHECK(n < (int64_t{1} << 32), "augmentation: noise of ", n, " elements is too large");
  constexpr int64_t kMask = 0xFFFFFFFF;
  auto hash = [](torch::Tensor x) {  // 32-bit values: products stay below 2^59
    for (int round = 0; round < 2; ++round) x = (x.__rshift__(16).bitwise_xor(x) * 0x45d9f3b).bitwise_and(kMask);
    return x.__rshift__(16).bitwise_xor(x);
  };
  auto key = [&](int k) { return static_cast<int64_t>((seed >> (16 * k)) & 0xFFFF) * 0x10001; };
  const torch::Tensor i = torch::arange(n, options.dtype(torch::kLong));
  auto uniform = [&](int k) {  // in (0, 1)
    const torch::Tensor h = hash(hash(i.bitwise_xor(key(k))).bitwise_xor(key(k + 1) ^ 0x5bd1e995));
    return (h.to(options.dtype()) + 0.5) * (1.0 / 4294967296.0);
  };
  const torch::Tensor u1 = uniform(0), u2 = uniform(2);
  return ((-2 * u1.log()).sqrt() * (u2 * (2 * M_PI)).cos()).view(shape);
}

// Points of `grid` [n, spatial..., rank] (grid_sample's, align_corners false) beyond the
// input's outermost voxel centres along some axis of sizes `in`: [n, spatial...].
torch::Tensor BeyondCentres(const torch::Tensor& grid, const std::vector<int64_t>& in) {
  const size_t rank = in.size();
  torch::Tensor out;
  for (size_t g = 0; g < rank; ++g) {  // grid axes run x, y(, z): array axes reversed
    const double half = 1.0 / double(in[rank - 1 - g]);
    const torch::Tensor c = grid.select(-1, int64_t(g));
    const torch::Tensor beyond = (c < -1 + half) | (c > 1 - half);
    out = out.defined() ? out | beyond : beyond;
  }
  return out;
}

// nnU-Net's label resampling (batchgeneratorsv2 SpatialTransform, mode_seg "bilinear":
// each label's one-hot map, times 1000, sampled linearly and rounded to float16; the
// largest wins, the lowest label on ties, as argmax) of label maps m [n, spatial...] on
// `grid` over inputs of sizes `in`, from each point's 2^rank corner voxels: a label's
// value is 1000 times the bilinear weight of the corners that hold it, so no list of the
// labels (and no wait for the device) is needed.
torch::Tensor LinearLabels(const torch::Tensor& m, const torch::Tensor& grid, const std::vector<int64_t>& in) {
  const size_t rank = in.size(), corners = size_t(1) << rank;
  std::vector<torch::Tensor> low(rank), u(rank);
  for (size_t a = 0; a < rank; ++a) {  // grid axes run x, y(, z): array axes reversed
    u[a] = ((grid.select(-1, int64_t(rank - 1 - a)) + 1) * double(in[a]) - 1) / 2;
    low[a] = u[a].floor();
  }
  const torch::Tensor flat = m.reshape({m.size(0), -1});
  std::vector<torch::Tensor> label(corners), value(corners);
  for (size_t j = 0; j < corners; ++j) {  // corner bits: axis 0 highest
    torch::Tensor index = torch::zeros_like(low[0], torch::kLong), inside = torch::ones_like(low[0], torch::kBool);
    torch::Tensor weight;
    for (size_t g = 0; g < rank; ++g) {  // weights multiplied x first, as grid_sample's
      const size_t a = rank - 1 - g;
      const bool up = (j >> g) & 1;
      const torch::Tensor w = up ? u[a] - low[a] : low[a] + 1 - u[a];
      weight = weight.defined() ? weight * w : w;
    }
    for (size_t a = 0; a < rank; ++a) {
      const torch::Tensor i = low[a] + double((j >> (rank - 1 - a)) & 1);
      inside = inside & (i >= 0) & (i <= double(in[a] - 1));
      index = index * in[a] + i.clamp(0, double(in[a] - 1)).to(torch::kLong);
    }
    label[j] = flat.gather(1, index.reshape({m.size(0), -1})).view(index.sizes());
    value[j] = (weight * 1000).masked_fill(inside.logical_not(), 0);
  }
  torch::Tensor best, out;
  for (size_t j = 0; j < corners; ++j) {
    torch::Tensor v = torch::zeros_like(value[j]);
    for (size_t i = 0; i < corners; ++i) v = v + value[i] * (label[i] == label[j]);
    v = v.to(torch::kHalf);
    if (!best.defined()) {
      best = v;
      out = label[j];
      continue;
    }
    const torch::Tensor better = (v > best) | ((v == best) & (label[j] < out));
    out = torch::where(better, label[j], out);
    best = torch::maximum(best, v);
  }
  return out;
}

// Label maps m [n, spatial...] (int64) resampled on `grid`: as nnU-Net does (kLinear), or
// by nearest neighbour. Points beyond the input's outermost voxel centres take `pad`.
torch::Tensor SampleLabels(const torch::Tensor& m, const torch::Tensor& grid, const std::vector<int64_t>& in,
                           MaskMode mode, int64_t pad) {
  torch::Tensor out;
  if (mode == MaskMode::kLinear) {
    out = LinearLabels(m, grid, in);
  } else {
    auto nearest = F::GridSampleFuncOptions().mode(torch::kNearest).padding_mode(torch::kZeros).align_corners(false);
    out = F::grid_sample(m.unsqueeze(1).to(torch::kFloat), grid, nearest);
    out = out.squeeze(1).round().to(torch::kLong);
  }
  return out.masked_fill(BeyondCentres(grid, in), pad);
}

// x [B, C, spatial...] with `channels` set to 0 where `outside` [B, spatial...].
torch::Tensor MaskImage(const torch::Tensor& x, const torch::Tensor& outside, const std::vector<int64_t>& channels) {
  if (channels.empty()) return x;
  std::vector<int64_t> pick(static_cast<size_t>(x.size(1)), 0), view(static_cast<size_t>(x.dim()), 1);
  for (int64_t c : channels) {
    TORCH_CHECK(c >= 0 && c < x.size(1), "augmentation: masked channel ", c, " of an image of ", x.size(1));
    pick[static_cast<size_t>(c)] = 1;
  }
  view[1] = x.size(1);
  return x.masked_fill(outside.unsqueeze(1) & (Longs(pick, x.device()).view(view) != 0), 0);
}

template <class Fn>
torch::Tensor OnPicked(const torch::Tensor& x, const std::vector<bool>& pick, Fn&& fn) {
  const std::vector<int64_t> idx = Picked(pick);
  if (idx.empty()) return x;
  return Merge(x, idx, fn(Rows(x, idx), idx));
}

// Crops the margin off; samples that rotate or scale are resampled instead, with one
// affine_grid drawing on the margin (the image bilinear, the mask by SampleLabels).
ImageMask RotateScaleCrop(const ImageMask& io, const AugmentPlan& plan, const NnUnetAugment& aug, int64_t outside) {
  const std::vector<int64_t>& margin = aug.margin();
  const NnUnetAugmentOptions& o = aug.options();
  const size_t rank = margin.size();
  std::vector<int64_t> in(rank), out(rank);
  ImageMask r = io;
  for (size_t a = 0; a < rank; ++a) {
    in[a] = io.image.size(int64_t(a) + 2);
    out[a] = in[a] - 2 * margin[a];
    TORCH_CHECK(out[a] >= 1, "augmentation: input size ", in[a], " leaves nothing inside a margin of ", margin[a]);
    r.image = r.image.narrow(int64_t(a) + 2, margin[a], out[a]);
    if (r.mask.defined()) r.mask = r.mask.narrow(int64_t(a) + 1, margin[a], out[a]);
  }
  std::vector<bool> pick(static_cast<size_t>(plan.batch));
  for (size_t s = 0; s < pick.size(); ++s) {
    pick[s] = plan.applied[AugIndex(AugTransform::kRotate)][s] || plan.applied[AugIndex(AugTransform::kScale)][s];
  }
  const std::vector<int64_t> idx = Picked(pick);
  if (idx.empty()) return r;
  std::vector<float> theta;  // grid axes run x, y(, z): array axes reversed
  for (int64_t s : idx) {
    const auto m = aug.SpatialMatrix(plan, s);
    for (size_t g = 0; g < rank; ++g) {
      const size_t i = rank - 1 - g;
      for (size_t h = 0; h < rank; ++h) {
        const size_t j = rank - 1 - h;
        theta.push_back(static_cast<float>(m[i][j] * double(out[j]) / double(in[i])));
      }
      theta.push_back(0);
    }
  }
  const auto n = static_cast<int64_t>(idx.size());
  const torch::Tensor t = torch::tensor(theta).to(io.image.device()).view({n, int64_t(rank), int64_t(rank) + 1});
  std::vector<int64_t> size = {n, 1};
  size.insert(size.end(), out.begin(), out.end());
  const torch::Tensor grid = F::affine_grid(t, size, /*align_corners=*/false);
  // Sampling x - pad with zero padding, then adding pad back, pads with `pad`.
  const auto bilinear =
      F::GridSampleFuncOptions().mode(torch::kBilinear).padding_mode(torch::kZeros).align_corners(false);
  r.image = Merge(r.image, idx, F::grid_sample(Rows(io.image, idx) - o.image_pad, grid, bilinear) + o.image_pad);
  if (r.mask.defined()) r.mask = Merge(r.mask, idx, SampleLabels(Rows(io.mask, idx), grid, in, o.mask_mode, outside));
  return r;
}

}  // namespace

torch::Tensor OutsideLabelled(const torch::Tensor& mask, const NnUnetAugmentOptions& options) {
  const torch::Tensor below = mask < 0;
  return options.label_pad >= 0 ? below | (mask == options.label_pad) : below;
}

ImageMask ApplyOnDevice(const NnUnetAugment& aug, ImageMask io, const AugmentPlan& plan) {
  const NnUnetAugmentOptions& options = aug.options();
  const auto rank = static_cast<int64_t>(aug.patch().size());
  TORCH_CHECK(io.image.dim() == rank + 2, "augmentation: image has ", io.image.dim(), " axes; expected ", rank + 2);
  TORCH_CHECK(io.image.size(0) == plan.batch && io.image.size(1) == plan.channels,
              "augmentation: the plan was drawn for another batch shape");
  if (io.mask.defined()) {
    TORCH_CHECK(io.mask.dim() == rank + 1 && io.mask.size(0) == plan.batch &&
                    io.mask.sizes().slice(1).equals(io.image.sizes().slice(2)),
                "augmentation: mask ", io.mask.sizes(), " does not match image ", io.image.sizes());
  }
  if (plan.batch == 0) return io;
  const int64_t c = plan.channels;
  auto applied = [&](AugTransform t) -> const std::vector<bool>& { return plan.applied[AugIndex(t)]; };
  auto per_row = [&](const std::vector<int64_t>& idx, auto value) {
    std::vector<double> v;
    for (int64_t s : idx) {
      for (int64_t k = 0; k < c; ++k) v.push_back(value(static_cast<size_t>(s * c + k)));
    }
    return v;
  };
  // Outside the labelled data is negative from here on: the pad -1 when it is not already.
  const int64_t outside = options.label_pad < 0 ? options.label_pad : -1;
  if (io.mask.defined() && options.label_pad >= 0) io.mask = io.mask.masked_fill(io.mask == options.label_pad, -1);
  ImageMask r = RotateScaleCrop(io, plan, aug, outside);
  torch::Tensor x = r.image;
  x = OnPicked(x, applied(AugTransform::kNoise), [&](const torch::Tensor& xi, const std::vector<int64_t>& idx) {
    std::vector<float> sigma;
    for (int64_t s : idx) sigma.push_back(static_cast<float>(plan.noise_sigma[size_t(s)]));
    std::vector<int64_t> view(static_cast<size_t>(xi.dim()), 1);
    view[0] = xi.size(0);
    return xi + HashNormal(xi.sizes().vec(), plan.noise_seed, xi.options()) *
                    torch::tensor(sigma).to(xi.device()).view(view);
  });
  x = OnPicked(x, applied(AugTransform::kBlur), [&](torch::Tensor xi, const std::vector<int64_t>& idx) {
    for (int64_t a = 0; a < rank; ++a) {
      xi = BlurAxis(xi, a + 2, per_row(idx, [&](size_t k) { return plan.blur_sigma[k][size_t(a)]; }));
    }
    return xi;
  });
  x = OnPicked(x, applied(AugTransform::kBrightness), [&](const torch::Tensor& xi, const std::vector<int64_t>& idx) {
    return xi * ChannelValues(plan.brightness, idx, c, xi);
  });
  x = OnPicked(x, applied(AugTransform::kContrast), [&](const torch::Tensor& xi, const std::vector<int64_t>& idx) {
    const torch::Tensor f = ChannelValues(plan.contrast, idx, c, xi), mean = SpatialMean(xi);
    const torch::Tensor y = torch::maximum(torch::minimum((xi - mean) * f + mean, SpatialMax(xi)), SpatialMin(xi));
    return KeepUntouched(xi, y, f, 1);
  });
  x = OnPicked(x, applied(AugTransform::kLowRes), [&](torch::Tensor xi, const std::vector<int64_t>& idx) {
    const std::vector<double> f = per_row(idx, [&](size_t k) { return plan.low_res[k]; });
    for (int64_t a = aug.in_plane() ? 1 : 0; a < rank; ++a) xi = LowResAxis(xi, a + 2, f);
    return xi;
  });
  for (const bool inverted : {true, false}) {
    const std::vector<double>& g = inverted ? plan.gamma_inverted : plan.gamma;
    x = OnPicked(x, applied(inverted ? AugTransform::kGammaInverted : AugTransform::kGamma),
                 [&](const torch::Tensor& xi, const std::vector<int64_t>& idx) {
                   const torch::Tensor gamma = ChannelValues(g, idx, c, xi);
                   return KeepUntouched(xi, Gamma(xi, gamma, inverted), gamma, 1);
                 });
  }
  torch::Tensor mask = r.mask;
  for (int64_t a = 0; a < rank; ++a) {
    std::vector<bool> flip(static_cast<size_t>(plan.batch));
    for (size_t s = 0; s < flip.size(); ++s) flip[s] = plan.mirror[s][size_t(a)];
    x = OnPicked(x, flip, [&](const torch::Tensor& xi, const std::vector<int64_t>&) { return xi.flip({a + 2}); });
    if (mask.defined()) {
      mask =
          OnPicked(mask, flip, [&](const torch::Tensor& mi, const std::vector<int64_t>&) { return mi.flip({a + 1}); });
    }
  }
  if (mask.defined()) {  // nnU-Net's MaskImageTransform, then RemoveLabelTansform(-1, 0)
    const torch::Tensor beyond = OutsideLabelled(mask, options);
    x = MaskImage(x, beyond, options.mask_image_channels.value_or(std::vector<int64_t>{}));
    mask = mask.masked_fill(beyond, options.ignore_label.value_or(0));
  }
  return {x.contiguous(), mask.defined() ? mask.contiguous() : mask};
}

}  // namespace shardify::trainer
