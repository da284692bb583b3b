// nnU-Net's augmentation on the host, one sample at a time: the operations of
// trainer/augment_apply.cpp in the same order and with the same formulas, computed in
// float32 where LibTorch computes in float32 (the reductions in double), so that both give
// the same output within float rounding and the same labels
// (tests/trainer/augment_host_test.cpp). Everything runs in image_out and mask_out, with
// one channel of scratch for the separable filters.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "reader/augment.h"

namespace shardify {

namespace {

using Sizes = std::array<int64_t, 3>;  // per array axis, the first `rank`

// Spatial sizes as three axes, a 2D size with a leading axis of size 1: array axis a of
// the patch is axis first + a here.
struct Box {
  Sizes n{1, 1, 1};
  size_t first = 0;
  Box(const Sizes& sizes, size_t rank) : first(3 - rank) {
    for (size_t a = 0; a < rank; ++a) n[first + a] = sizes[a];
  }
  int64_t Voxels() const { return n[0] * n[1] * n[2]; }
  int64_t Outer(size_t axis) const { return axis == 0 ? 1 : axis == 1 ? n[0] : n[0] * n[1]; }
  int64_t Inner(size_t axis) const { return axis == 2 ? 1 : axis == 1 ? n[2] : n[1] * n[2]; }
};

// Index of position k of [-r, n + r) reflected into [0, n) (mirror without repeating the edge).
int64_t Reflect(int64_t k, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  k = ((k % period) + period) % period;
  return k < n ? k : period - k;
}

// x rounded to the nearest float16 (ties to even), as a float. Every value met here is
// far below float16's largest.
float RoundToHalf(float x) {
  const float a = std::fabs(x);
  if (a < 0x1p-14f) return std::nearbyint(x * 0x1p24f) * 0x1p-24f;  // subnormal: steps of 2^-24
  if (a >= 65520.0f) return std::copysign(HUGE_VALF, x);
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x0FFFu + ((bits >> 13) & 1u);  // keep 10 of the 23 fraction bits, ties to even
  bits &= ~0x1FFFu;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// LibTorch's linspace(-1, 1, n) * (n - 1) / n, element k (affine_grid's base grid,
// align_corners false), in float.
float BaseCoordinate(int64_t k, int64_t n) {
  if (n <= 1) return 0;
  const float step = 2.0f / static_cast<float>(n - 1);
  const float v = k < n / 2 ? -1.0f + step * static_cast<float>(k) : 1.0f - step * static_cast<float>(n - 1 - k);
  return v * static_cast<float>(n - 1) / static_cast<float>(n);
}

// The resampling of one sample: affine_grid's grid for theta, then grid_sample's
// coordinates (align_corners false) along the array axes.
struct Sampler {
  size_t rank;
  Sizes in, out;
  float theta[3][3] = {};              // affine_grid's, less its translation (0)
  std::array<const float*, 3> base{};  // per grid axis (x first): the base grid's coordinates
  std::array<float, 3> lo{}, hi{};     // grid values of the outermost voxel centres, per grid axis

  // `storage` holds the base grid.
  Sampler(const std::array<std::array<double, 3>, 3>& m, size_t rank_, const Sizes& in_, const Sizes& out_,
          std::vector<float>& storage)
      : rank(rank_), in(in_), out(out_) {
    storage.resize(size_t(out[0] + out[1] + out[2]));
    float* next = storage.data();
    for (size_t g = 0; g < rank; ++g) {  // grid axes run x, y(, z): array axes reversed
      const size_t i = rank - 1 - g;
      for (size_t h = 0; h < rank; ++h) {
        const size_t j = rank - 1 - h;
        theta[g][h] = static_cast<float>(m[i][j] * double(out[j]) / double(in[i]));
      }
      for (int64_t k = 0; k < out[i]; ++k) next[k] = BaseCoordinate(k, out[i]);
      base[g] = next;
      next += out[i];
      lo[g] = static_cast<float>(-1 + 1.0 / double(in[i]));
      hi[g] = static_cast<float>(1 - 1.0 / double(in[i]));
    }
  }
  // The grid point of output voxel p (array axes), x first; true when it lies beyond the
  // input's outermost voxel centres along some axis.
  bool Point(const int64_t* p, float* grid) const {
    bool beyond = false;
    for (size_t g = 0; g < rank; ++g) {  // the batched matrix product of affine_grid, in order
      float acc = base[0][p[rank - 1]] * theta[g][0];
      for (size_t h = 1; h < rank; ++h) acc = acc + base[h][p[rank - 1 - h]] * theta[g][h];
      grid[g] = acc;
      beyond = beyond || acc < lo[g] || acc > hi[g];
    }
    return beyond;
  }
  // grid_sample's source coordinate along array axis a.
  float Source(const float* grid, size_t a) const {
    return ((grid[rank - 1 - a] + 1.0f) * static_cast<float>(in[a]) - 1.0f) / 2.0f;
  }
};

// The 2^R corners around a point (R: the rank): flat input index (clamped into the input),
// whether the corner lies inside, and its bilinear weight (multiplied x first, as
// grid_sample's). Corner bits: axis 0 highest.
template <size_t R>
struct Corners {
  static constexpr int kCount = 1 << R;
  int64_t index[kCount];
  bool inside[kCount];
  float weight[kCount];
  Corners(const Sampler& s, const float* grid) {
    float w[R][2];
    int64_t at[R][2];
    bool in[R][2];
    for (size_t a = 0; a < R; ++a) {
      const float u = s.Source(grid, a), low = std::floor(u), last = float(s.in[a] - 1);
      w[a][0] = low + 1.0f - u;
      w[a][1] = u - low;
      for (int d = 0; d < 2; ++d) {
        const float i = low + float(d);
        in[a][d] = i >= 0 && i <= last;
        at[a][d] = static_cast<int64_t>(std::clamp(i, 0.0f, last));
      }
    }
    for (int j = 0; j < kCount; ++j) {
      auto bit = [j](size_t a) { return (j >> (R - 1 - a)) & 1; };
      float wj = w[R - 1][bit(R - 1)];
      int64_t i = at[0][bit(0)];
      bool inside_j = in[R - 1][bit(R - 1)];
      for (size_t a = R - 1; a-- > 0;) {
        wj = wj * w[a][bit(a)];
        inside_j = inside_j && in[a][bit(a)];
      }
      for (size_t a = 1; a < R; ++a) i = i * s.in[a] + at[a][bit(a)];
      index[j] = i;
      inside[j] = inside_j;
      weight[j] = wj;
    }
  }
};

// nnU-Net's label at a point (LinearLabels of the device path): each corner label's value
// is 1000 times the weight of the inside corners that hold it, rounded to float16; the
// largest wins, the lowest label on ties.
template <size_t R>
int32_t LinearLabel(const Corners<R>& k, const int32_t* label) {
  constexpr int kCount = Corners<R>::kCount;
  bool same = true;
  for (int j = 1; j < kCount; ++j) same = same && label[j] == label[0];
  if (same) return label[0];
  float value[kCount];
  for (int j = 0; j < kCount; ++j) value[j] = k.inside[j] ? k.weight[j] * 1000.0f : 0.0f;
  float best = 0;
  int32_t out = 0;
  for (int j = 0; j < kCount; ++j) {
    bool seen = false;  // a label met again has the same value: it changes nothing
    for (int i = 0; i < j; ++i) seen = seen || label[i] == label[j];
    if (seen) continue;
    float v = 0;
    for (int i = 0; i < kCount; ++i) v = v + (label[i] == label[j] ? value[i] : 0.0f);
    v = RoundToHalf(v);
    if (j == 0 || v > best || (v == best && label[j] < out)) {
      out = label[j];
      best = v;
    }
  }
  return out;
}

// The label of input voxel i, outside the labelled data negative: label_pad >= 0 is -1.
struct Labels {
  const int32_t* mask;
  int64_t pad;
  int32_t operator[](int64_t i) const { return pad >= 0 && mask[i] == pad ? -1 : mask[i]; }
};

// The sample rotated and scaled (rank R): the image bilinear (x - pad sampled with zero
// padding, then pad added back), the mask as `mode` says; points beyond the input's
// outermost voxel centres take the label `outside`.
template <size_t R>
void Resample(const Sampler& s, int64_t channels, const float* image, const Labels* mask, float image_pad,
              MaskMode mode, int32_t outside, float* image_out, int32_t* mask_out) {
  const Box box(s.out, R);
  const int64_t in_voxels = Box(s.in, R).Voxels(), voxels = box.Voxels();
  int64_t p[3], v = 0;
  for (int64_t i0 = 0; i0 < box.n[0]; ++i0) {
    for (int64_t i1 = 0; i1 < box.n[1]; ++i1) {
      for (int64_t i2 = 0; i2 < box.n[2]; ++i2, ++v) {
        const int64_t q[3] = {i0, i1, i2};
        for (size_t a = 0; a < R; ++a) p[a] = q[box.first + a];
        float grid[3];
        const bool beyond = s.Point(p, grid);
        const Corners<R> k(s, grid);
        for (int64_t c = 0; c < channels; ++c) {
          const float* x = image + c * in_voxels;
          float acc = 0;
          for (int j = 0; j < Corners<R>::kCount; ++j) {
            if (k.inside[j]) acc += (x[k.index[j]] - image_pad) * k.weight[j];
          }
          image_out[c * voxels + v] = acc + image_pad;
        }
        if (mask == nullptr) continue;
        if (beyond) {
          mask_out[v] = outside;
        } else if (mode == MaskMode::kLinear) {
          int32_t label[Corners<R>::kCount];
          for (int j = 0; j < Corners<R>::kCount; ++j) label[j] = (*mask)[k.index[j]];
          mask_out[v] = LinearLabel(k, label);
        } else {  // grid_sample's nearest: 2D as its vectorized kernel computes, 3D as its loop
          int64_t at = 0;
          for (size_t a = 0; a < R; ++a) {
            const float n = static_cast<float>(s.in[a]), g = grid[R - 1 - a];
            const float u = R == 2 ? (g + 1.0f) * (n / 2.0f) - 0.5f : s.Source(grid, a);
            at = at * s.in[a] + std::clamp(static_cast<int64_t>(std::nearbyint(u)), int64_t{0}, s.in[a] - 1);
          }
          mask_out[v] = (*mask)[at];
        }
      }
    }
  }
}

// The centre of the input (the margin cropped off).
void Crop(const Box& bin, const Box& bout, int64_t channels, const float* image, const Labels* mask, float* image_out,
          int32_t* mask_out) {
  Sizes m;
  for (size_t a = 0; a < 3; ++a) m[a] = (bin.n[a] - bout.n[a]) / 2;
  for (int64_t c = 0; c <= channels; ++c) {  // c == channels: the mask
    if (c == channels && mask == nullptr) break;
    int64_t v = 0;
    for (int64_t i0 = 0; i0 < bout.n[0]; ++i0) {
      for (int64_t i1 = 0; i1 < bout.n[1]; ++i1, v += bout.n[2]) {
        const int64_t from = ((i0 + m[0]) * bin.n[1] + i1 + m[1]) * bin.n[2] + m[2];
        if (c < channels) {
          std::memcpy(image_out + c * bout.Voxels() + v, image + c * bin.Voxels() + from,
                      size_t(bout.n[2]) * sizeof(float));
        } else {
          for (int64_t i2 = 0; i2 < bout.n[2]; ++i2) mask_out[v + i2] = (*mask)[from + i2];
        }
      }
    }
  }
}

// One standard normal value of the device's HashNormal: element i of seed's field.
float HashNormal(uint64_t i, uint64_t seed) {
  auto hash = [](uint64_t x) {
    for (int round = 0; round < 2; ++round) x = (((x >> 16) ^ x) * 0x45d9f3bu) & 0xFFFFFFFFu;
    return (x >> 16) ^ x;
  };
  auto key = [&](int k) { return ((seed >> (16 * k)) & 0xFFFFu) * 0x10001u; };
  auto uniform = [&](int k) {  // in (0, 1)
    const uint64_t h = hash(hash(i ^ key(k)) ^ (key(k + 1) ^ 0x5bd1e995u));
    return (static_cast<float>(h) + 0.5f) * 0x1p-32f;
  };
  const float u1 = uniform(0), u2 = uniform(2);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(u2 * static_cast<float>(2 * M_PI));
}

// dst = src blurred along `axis` with `taps` (2r + 1, borders reflected), summed tap by tap
// from the first, as the device's shifted sums.
void BlurAxis(const float* src, float* dst, const Box& box, size_t axis, const std::vector<float>& taps,
              std::vector<int64_t>& rows) {
  const int64_t len = box.n[axis], inner = box.Inner(axis), r = int64_t(taps.size() / 2);
  rows.resize(size_t(len + 2 * r));
  for (int64_t k = -r; k < len + r; ++k) rows[size_t(k + r)] = Reflect(k, len);
  for (int64_t o = 0; o < box.Outer(axis); ++o) {
    const float* s = src + o * len * inner;
    for (int64_t k = 0; k < len; ++k) {
      float* d = dst + (o * len + k) * inner;
      const float* s0 = s + rows[size_t(k)] * inner;
      for (int64_t j = 0; j < inner; ++j) d[j] = s0[j] * taps[0];
      for (size_t t = 1; t < taps.size(); ++t) {
        const float* st = s + rows[size_t(k) + t] * inner;
        const float w = taps[t];
        for (int64_t j = 0; j < inner; ++j) d[j] = d[j] + st[j] * w;
      }
    }
  }
}

// The device's Gaussian taps for sigma > 0: cut at ceil(3 sigma), normalized in double.
void GaussianTaps(double sigma, std::vector<float>& taps) {
  const int64_t r = static_cast<int64_t>(std::ceil(3 * sigma));
  double sum = 0;
  for (int64_t t = -r; t <= r; ++t) sum += std::exp(-0.5 * double(t * t) / (sigma * sigma));
  taps.resize(size_t(2 * r + 1));
  for (int64_t t = -r; t <= r; ++t) {
    taps[size_t(t + r)] = static_cast<float>(std::exp(-0.5 * double(t * t) / (sigma * sigma)) / sum);
  }
}

// dst = src along `axis` downsampled by nearest neighbour by `factor`, then linearly
// upsampled back (align_corners false); false (dst untouched) when that is the identity.
bool LowResAxis(const float* src, float* dst, const Box& box, size_t axis, double factor, AugmentScratch& s) {
  const int64_t len = box.n[axis], inner = box.Inner(axis);
  const int64_t m = std::max<int64_t>(1, std::lround(double(len) * factor));
  if (factor == 1 || m == len) return false;
  auto source = [&](int64_t j) {
    return std::min<int64_t>(int64_t(std::floor((j + 0.5) * double(len) / double(m))), len - 1);
  };
  s.index.resize(size_t(2 * len));
  s.weights.resize(size_t(len));
  for (int64_t k = 0; k < len; ++k) {
    const double u = std::max(0.0, (k + 0.5) * double(m) / double(len) - 0.5);
    const int64_t lo = std::min<int64_t>(int64_t(std::floor(u)), m - 1), hi = std::min<int64_t>(lo + 1, m - 1);
    s.index[size_t(2 * k)] = source(lo);
    s.index[size_t(2 * k + 1)] = source(hi);
    s.weights[size_t(k)] = static_cast<float>(u - double(lo));
  }
  for (int64_t o = 0; o < box.Outer(axis); ++o) {
    for (int64_t k = 0; k < len; ++k) {
      const float* a = src + (o * len + s.index[size_t(2 * k)]) * inner;
      const float* b = src + (o * len + s.index[size_t(2 * k + 1)]) * inner;
      const float w = s.weights[size_t(k)], w0 = 1.0f - w;
      float* d = dst + (o * len + k) * inner;
      for (int64_t j = 0; j < inner; ++j) d[j] = a[j] * w0 + b[j] * w;
    }
  }
  return true;
}

float Mean(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  return static_cast<float>(sum / double(n));
}

// The sample standard deviation (n - 1) about `mean`, the differences in float.
float Std(const float* x, int64_t n, float mean) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    sum += d * d;
  }
  return static_cast<float>(std::sqrt(sum / double(std::max<int64_t>(n - 1, 1))));
}

void Contrast(float* x, int64_t n, float f) {
  const float mean = Mean(x, n), lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::max(std::min((x[i] - mean) * f + mean, hi), lo);
}

// Gamma of a channel, range-normalized, with its mean and std restored.
void Gamma(float* x, int64_t n, float gamma, bool inverted) {
  if (inverted) {
    for (int64_t i = 0; i < n; ++i) x[i] = -x[i];
  }
  const float mean = Mean(x, n), std = Std(x, n, mean);
  const float lo = *std::min_element(x, x + n), range = *std::max_element(x, x + n) - lo;
  const float divisor = std::max(range, 1e-7f);
  for (int64_t i = 0; i < n; ++i) x[i] = std::pow((x[i] - lo) / divisor, gamma) * range + lo;
  const float y_mean = Mean(x, n), scale = std / std::max(Std(x, n, y_mean), 1e-7f);
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - y_mean) * scale + mean;
  if (inverted) {
    for (int64_t i = 0; i < n; ++i) x[i] = -x[i];
  }
}

template <class T>
void Flip(T* x, const Box& box, size_t axis) {
  const int64_t len = box.n[axis], inner = box.Inner(axis);
  for (int64_t o = 0; o < box.Outer(axis); ++o) {
    for (int64_t k = 0; k < len / 2; ++k) {
      std::swap_ranges(x + (o * len + k) * inner, x + (o * len + k + 1) * inner, x + (o * len + len - 1 - k) * inner);
    }
  }
}

// The samples before b that `pick` picked.
int64_t RankAmongPicked(const std::vector<bool>& pick, int64_t b) {
  return std::count(pick.begin(), pick.begin() + b, true);
}

// The arguments of ApplySample that its work relies on.
Status CheckSample(const AugmentPlan& plan, int64_t b, int64_t channels, int64_t voxels, bool mask, bool buffers,
                   const NnUnetAugmentOptions& o) {
  auto where = [&] { return "augmentation of sample " + std::to_string(b) + ": "; };
  if (!buffers) return InvalidArgument(where() + "an image or output buffer is null");
  if (b < 0 || b >= plan.batch) {
    return InvalidArgument(where() + "the plan was drawn for a batch of " + std::to_string(plan.batch));
  }
  if (channels < 1 || channels != plan.channels) {
    return InvalidArgument(where() + std::to_string(channels) + " channels; the plan was drawn for " +
                           std::to_string(plan.channels));
  }
  const auto n = static_cast<size_t>(plan.batch), nc = static_cast<size_t>(plan.batch * plan.channels);
  bool covered = plan.angles.size() >= n && plan.scale.size() >= n && plan.noise_sigma.size() >= n &&
                 plan.mirror.size() >= n && plan.blur_sigma.size() >= nc;
  for (const auto* v : {&plan.brightness, &plan.contrast, &plan.low_res, &plan.gamma_inverted, &plan.gamma}) {
    covered = covered && v->size() >= nc;
  }
  for (const std::vector<bool>& a : plan.applied) covered = covered && a.size() >= n;
  if (!covered) return InvalidArgument(where() + "the plan's parameters do not cover its batch");
  const auto picked = std::count(plan.applied[AugIndex(AugTransform::kNoise)].begin(),
                                 plan.applied[AugIndex(AugTransform::kNoise)].begin() + plan.batch, true);
  if (double(picked) * double(channels) * double(voxels) >= 0x1p32) {
    return InvalidArgument(where() + "the batch's noise has too many elements (2^32 or more)");
  }
  if (!mask) return Status::Ok();
  if (!o.mask_image_channels) return Status::Ok();
  for (int64_t c : *o.mask_image_channels) {
    if (c >= channels) {
      return InvalidArgument(where() + "masked channel " + std::to_string(c) + " of an image of " +
                             std::to_string(channels));
    }
  }
  return Status::Ok();
}

}  // namespace

Status NnUnetAugment::ApplySample(const AugmentPlan& plan, int64_t b, int64_t channels, const float* image,
                                  const int32_t* mask, float* image_out, int32_t* mask_out,
                                  AugmentScratch* scratch) const {
  const size_t rank = patch_.size(), sb = static_cast<size_t>(b);
  Sizes in{1, 1, 1}, out{1, 1, 1};
  for (size_t a = 0; a < rank; ++a) {
    out[a] = patch_[a];
    in[a] = patch_[a] + 2 * margin_[a];
  }
  const Box box(out, rank);
  const int64_t voxels = box.Voxels();
  const bool buffers = image != nullptr && image_out != nullptr && (mask == nullptr || mask_out != nullptr);
  RETURN_IF_ERROR(CheckSample(plan, b, channels, voxels, mask != nullptr, buffers, options_));
  AugmentScratch own;
  AugmentScratch& s = scratch != nullptr ? *scratch : own;
  const auto first = static_cast<size_t>(b * channels);
  auto applied = [&](AugTransform t) { return bool(plan.applied[AugIndex(t)][sb]); };

  // Outside the labelled data is negative from here on: the pad -1 when it is not already.
  const auto outside = static_cast<int32_t>(options_.label_pad < 0 ? options_.label_pad : -1);
  const Labels labels{mask, options_.label_pad};
  const Labels* m = mask != nullptr ? &labels : nullptr;
  if (applied(AugTransform::kRotate) || applied(AugTransform::kScale)) {
    const Sampler sampler(SpatialMatrix(plan, b), rank, in, out, s.weights);
    const auto pad = static_cast<float>(options_.image_pad);
    (rank == 2 ? Resample<2> : Resample<3>)(sampler, channels, image, m, pad, options_.mask_mode, outside, image_out,
                                            mask_out);
  } else {
    Crop(Box(in, rank), box, channels, image, m, image_out, mask_out);
  }
  if (applied(AugTransform::kNoise)) {
    const auto sigma = static_cast<float>(plan.noise_sigma[sb]);
    const uint64_t at = uint64_t(RankAmongPicked(plan.applied[AugIndex(AugTransform::kNoise)], b) * channels * voxels);
    for (int64_t i = 0; i < channels * voxels; ++i)
      image_out[i] = image_out[i] + HashNormal(at + i, plan.noise_seed) * sigma;
  }
  s.values.resize(size_t(voxels));
  for (int64_t c = 0; c < channels && applied(AugTransform::kBlur); ++c) {
    float* x = image_out + c * voxels;
    for (size_t a = 0; a < rank; ++a) {
      const double sigma = plan.blur_sigma[first + size_t(c)][a];
      if (sigma <= 0) continue;
      GaussianTaps(sigma, s.weights);
      BlurAxis(x, s.values.data(), box, box.first + a, s.weights, s.index);
      std::memcpy(x, s.values.data(), size_t(voxels) * sizeof(float));
    }
  }
  for (int64_t c = 0; c < channels; ++c) {
    float* x = image_out + c * voxels;
    const size_t k = first + size_t(c);
    if (applied(AugTransform::kBrightness)) {
      const auto f = static_cast<float>(plan.brightness[k]);
      for (int64_t i = 0; i < voxels; ++i) x[i] = x[i] * f;
    }
    if (applied(AugTransform::kContrast) && static_cast<float>(plan.contrast[k]) != 1) {
      Contrast(x, voxels, static_cast<float>(plan.contrast[k]));
    }
    for (size_t a = in_plane_ ? 1 : 0; a < rank && applied(AugTransform::kLowRes); ++a) {
      if (LowResAxis(x, s.values.data(), box, box.first + a, plan.low_res[k], s)) {
        std::memcpy(x, s.values.data(), size_t(voxels) * sizeof(float));
      }
    }
    if (applied(AugTransform::kGammaInverted) && static_cast<float>(plan.gamma_inverted[k]) != 1) {
      Gamma(x, voxels, static_cast<float>(plan.gamma_inverted[k]), true);
    }
    if (applied(AugTransform::kGamma) && static_cast<float>(plan.gamma[k]) != 1) {
      Gamma(x, voxels, static_cast<float>(plan.gamma[k]), false);
    }
  }
  for (size_t a = 0; a < rank; ++a) {
    if (!plan.mirror[sb][a]) continue;
    for (int64_t c = 0; c < channels; ++c) Flip(image_out + c * voxels, box, box.first + a);
    if (mask != nullptr) Flip(mask_out, box, box.first + a);
  }
  if (mask == nullptr) return Status::Ok();
  // nnU-Net's MaskImageTransform, then RemoveLabelTansform(-1, 0).
  const std::vector<int64_t> none;
  for (int64_t c : options_.mask_image_channels ? *options_.mask_image_channels : none) {
    float* x = image_out + c * voxels;
    for (int64_t i = 0; i < voxels; ++i) x[i] = mask_out[i] < 0 ? 0.0f : x[i];
  }
  const auto ignore = static_cast<int32_t>(options_.ignore_label.value_or(0));
  for (int64_t i = 0; i < voxels; ++i) mask_out[i] = mask_out[i] < 0 ? ignore : mask_out[i];
  return Status::Ok();
}

}  // namespace shardify
