#include "trainer/transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/step_rng.h"

namespace shardify::trainer {
namespace {

namespace F = torch::nn::functional;

using Rng = StepRng;

torch::Tensor WithMask(const torch::Tensor& x, const std::vector<bool>& pick,
                       const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  std::vector<int64_t> p(pick.begin(), pick.end());
  torch::Tensor sel = torch::tensor(p, torch::kLong).to(x.device()).to(torch::kBool);
  std::vector<int64_t> view(x.dim(), 1);
  view[0] = x.size(0);
  return torch::where(sel.view(view), f(x), x);
}

void RandomFlips(ImageMask& io, const AugmentOptions& o, Rng& rng) {
  const int64_t b = io.image.size(0);
  for (int axis = 0; axis < 2; ++axis) {
    if (!(axis == 0 ? o.flip_x : o.flip_y)) continue;
    std::vector<bool> pick(b);
    for (int64_t i = 0; i < b; ++i) pick[i] = rng.Coin();
    const int64_t dim_img = axis == 0 ? 3 : 2, dim_mask = axis == 0 ? 2 : 1;
    io.image = WithMask(io.image, pick, [&](const torch::Tensor& t) { return t.flip(dim_img); });
    if (io.mask.defined()) {
      io.mask = WithMask(io.mask, pick, [&](const torch::Tensor& t) { return t.flip(dim_mask); });
    }
  }
}

// Output pixel p samples input pixel R*S^-1*p + t; expressed in grid_sample's normalized
// coordinates, which scale x and y by different factors when H != W.
torch::Tensor AffineTheta(const AugmentOptions& o, Rng& rng, int64_t b, int64_t h, int64_t w) {
  std::vector<float> theta(b * 6);
  const double aspect = static_cast<double>(h) / static_cast<double>(w);
  for (int64_t i = 0; i < b; ++i) {
    const double a = rng.Uniform(-o.rotate_deg, o.rotate_deg) * M_PI / 180.0;
    const double s = rng.Uniform(1.0 - o.scale, 1.0 + o.scale);
    const double tx = rng.Uniform(-o.translate, o.translate) * 2.0;
    const double ty = rng.Uniform(-o.translate, o.translate) * 2.0;
    float* t = &theta[i * 6];
    t[0] = static_cast<float>(std::cos(a) / s);
    t[1] = static_cast<float>(-std::sin(a) / s * aspect);
    t[2] = static_cast<float>(tx);
    t[3] = static_cast<float>(std::sin(a) / s / aspect);
    t[4] = static_cast<float>(std::cos(a) / s);
    t[5] = static_cast<float>(ty);
  }
  return torch::tensor(theta).view({b, 2, 3});
}

void RandomAffine(ImageMask& io, const AugmentOptions& o, Rng& rng) {
  if (o.rotate_deg == 0 && o.scale == 0 && o.translate == 0) return;
  const int64_t b = io.image.size(0), h = io.image.size(2), w = io.image.size(3);
  torch::Tensor theta = AffineTheta(o, rng, b, h, w).to(io.image.device());
  torch::Tensor grid = F::affine_grid(theta, {b, 1, h, w}, false);
  io.image = F::grid_sample(
      io.image, grid.to(io.image.dtype()),
      F::GridSampleFuncOptions().mode(torch::kBilinear).padding_mode(torch::kZeros).align_corners(false));
  if (io.mask.defined()) {
    torch::Tensor m = io.mask.unsqueeze(1).to(torch::kFloat);
    m = F::grid_sample(
        m, grid, F::GridSampleFuncOptions().mode(torch::kNearest).padding_mode(torch::kZeros).align_corners(false));
    io.mask = m.squeeze(1).round().to(torch::kLong);
  }
}

void RandomIntensity(ImageMask& io, const AugmentOptions& o, Rng& rng) {
  if (o.intensity_scale == 0 && o.intensity_shift == 0) return;
  const int64_t b = io.image.size(0);
  std::vector<float> a(b), c(b);
  for (int64_t i = 0; i < b; ++i) {
    a[i] = static_cast<float>(rng.Uniform(1.0 - o.intensity_scale, 1.0 + o.intensity_scale));
    c[i] = static_cast<float>(rng.Uniform(-o.intensity_shift, o.intensity_shift));
  }
  const auto dev = io.image.device();
  io.image = io.image * torch::tensor(a).to(dev).view({b, 1, 1, 1}) + torch::tensor(c).to(dev).view({b, 1, 1, 1});
}

// One offset per batch; a negative pad crops (constant_pad_nd semantics).
void RandomCropOrPad(ImageMask& io, const AugmentOptions& o, Rng& rng) {
  if (o.crop_h <= 0 && o.crop_w <= 0) return;
  const int64_t h = io.image.size(2), w = io.image.size(3);
  const int64_t th = o.crop_h > 0 ? o.crop_h : h, tw = o.crop_w > 0 ? o.crop_w : w;
  auto before = [&rng](int64_t have, int64_t want) {
    const int64_t slack = std::abs(have - want);
    const int64_t off = static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(slack + 1));
    return want >= have ? off : -off;
  };
  const int64_t top = before(h, th), left = before(w, tw);
  const int64_t bottom = (th - h) - top, right = (tw - w) - left;
  io.image = F::pad(io.image, F::PadFuncOptions({left, right, top, bottom}));
  if (io.mask.defined()) io.mask = F::pad(io.mask, F::PadFuncOptions({left, right, top, bottom}));
}

}  // namespace

Result<torch::ScalarType> TorchType(DType t) {
  switch (t) {
    case DType::kU8:
      return torch::kByte;
    case DType::kI8:
      return torch::kChar;
    case DType::kU16:
    case DType::kI16:
      return torch::kShort;
    case DType::kU32:
    case DType::kI32:
      return torch::kInt;
    case DType::kF16:
      return torch::kHalf;
    case DType::kF32:
      return torch::kFloat;
    case DType::kF64:
      return torch::kDouble;
    case DType::kI64:
      return torch::kLong;
  }
  return Unsupported(std::string("dtype ") + DTypeName(t) + " has no tensor type");
}

Result<torch::Tensor> FieldTensor(const std::shared_ptr<Batch>& batch, const std::string& name) {
  const BatchField* f = batch ? batch->Find(name) : nullptr;
  if (f == nullptr) return NotFound("batch has no field '" + name + "'");
  DType dtype = f->dtype;
  if (f->kind == FieldKind::kInt)
    dtype = DType::kI64;
  else if (f->kind == FieldKind::kFloat)
    dtype = DType::kF64;
  else if (f->kind != FieldKind::kNdarray)
    return InvalidArgument("field '" + name + "' is not batched");
  ASSIGN_OR_RETURN(torch::ScalarType type, TorchType(dtype));
  Shape shape = f->kind == FieldKind::kNdarray ? f->shape : Shape{static_cast<int64_t>(batch->size())};
  ASSIGN_OR_RETURN(uint64_t bytes, ByteSize(shape, dtype));
  if (bytes != f->bytes || (bytes > 0 && f->data == nullptr)) {
    return Internal("field '" + name + "': batch holds " + std::to_string(f->bytes) + " bytes, shape " +
                    ShapeToString(shape) + " needs " + std::to_string(bytes));
  }
  std::shared_ptr<Batch> keep = batch;
  try {
    return torch::from_blob(
        f->data, shape, [keep](void*) mutable { keep.reset(); }, torch::TensorOptions().dtype(type));
  } catch (const std::exception& e) {
    return Internal("field '" + name + "': " + e.what());
  }
}

torch::Tensor ToDevice(const torch::Tensor& t, const torch::Device& device, bool pinned) {
  return t.to(device, /*non_blocking=*/pinned && device.is_cuda());
}

torch::Tensor ToFloatImage(const torch::Tensor& image, DType dtype, double mean, double stddev, int spatial_rank) {
  torch::Tensor x = image.dim() == spatial_rank + 1 ? image.unsqueeze(1) : image;
  if (dtype == DType::kU16) x = x.to(torch::kInt).bitwise_and(0xFFFF);
  if (dtype == DType::kU32) x = x.to(torch::kLong).bitwise_and(static_cast<int64_t>(0xFFFFFFFF));
  x = x.to(torch::kFloat);
  if (stddev <= 0) stddev = 1;
  return (x - mean) * (1.0 / stddev);
}

namespace {

// Mask values as int64, u16 read back from LibTorch's signed type.
torch::Tensor MaskValues(const torch::Tensor& m, DType dtype) {
  return dtype == DType::kU16 ? m.to(torch::kInt).bitwise_and(0xFFFF).to(torch::kLong) : m.to(torch::kLong);
}

}  // namespace

torch::Tensor ToLabelMap(const torch::Tensor& mask, DType dtype, int spatial_rank) {
  return MaskValues(mask.dim() == spatial_rank + 2 ? mask.select(1, 0) : mask, dtype);
}

torch::Tensor PackLabels(const torch::Tensor& mask, DType dtype) {
  const torch::Tensor m = MaskValues(mask, dtype);
  std::vector<int64_t> view(m.dim(), 1);
  view[1] = m.size(1);
  const torch::Tensor bits = torch::pow(2, torch::arange(m.size(1), m.options())).view(view);
  const torch::Tensor valid = ((m == 0) | (m == 1)).all(1);
  return (m.clamp(0, 1) * bits).sum(1).masked_fill(valid.logical_not(), -1);
}

torch::Tensor UnpackLabels(const torch::Tensor& packed, int64_t k) {
  std::vector<int64_t> view(packed.dim() + 1, 1);
  view[1] = k;
  const torch::Tensor bits = torch::pow(2, torch::arange(k, packed.options())).view(view);
  const torch::Tensor p = packed.unsqueeze(1);
  return ((p.bitwise_and(bits) != 0) & (p >= 0)).to(torch::kFloat);
}

ImageMask Resize(ImageMask io, int64_t h, int64_t w) {
  if (h <= 0 || w <= 0 || (io.image.size(2) == h && io.image.size(3) == w)) return io;
  const std::vector<int64_t> size = {h, w};
  io.image =
      F::interpolate(io.image, F::InterpolateFuncOptions().size(size).mode(torch::kBilinear).align_corners(false));
  if (io.mask.defined()) {
    torch::Tensor m = io.mask.unsqueeze(1).to(torch::kFloat);
    m = F::interpolate(m, F::InterpolateFuncOptions().size(size).mode(torch::kNearest));
    io.mask = m.squeeze(1).to(torch::kLong);
  }
  return io;
}

ImageMask ResizeEach(ImageMask io, const std::vector<std::vector<int64_t>>& sizes, int64_t h, int64_t w) {
  const int64_t b = io.image.size(0), ph = io.image.size(2), pw = io.image.size(3);
  const bool same = std::all_of(sizes.begin(), sizes.end(), [&](const auto& s) { return s == sizes.front(); });
  if (sizes.size() != static_cast<size_t>(b) || (same && (sizes.empty() || sizes[0] == std::vector<int64_t>{ph, pw}))) {
    return Resize(std::move(io), h, w);
  }
  if (same) {
    io.image = io.image.narrow(2, 0, sizes[0][0]).narrow(3, 0, sizes[0][1]);
    if (io.mask.defined()) io.mask = io.mask.narrow(1, 0, sizes[0][0]).narrow(2, 0, sizes[0][1]);
    return Resize(std::move(io), h, w);
  }
  if (h <= 0 || w <= 0) return io;  // sizes differ and stay so: the padded batch it is
  std::vector<torch::Tensor> images, masks;
  for (int64_t i = 0; i < b; ++i) {
    const std::vector<int64_t>& s = sizes[static_cast<size_t>(i)];
    ImageMask one{io.image.narrow(0, i, 1).narrow(2, 0, s[0]).narrow(3, 0, s[1]), torch::Tensor()};
    if (io.mask.defined()) one.mask = io.mask.narrow(0, i, 1).narrow(1, 0, s[0]).narrow(2, 0, s[1]);
    one = Resize(std::move(one), h, w);
    images.push_back(one.image);
    if (one.mask.defined()) masks.push_back(one.mask);
  }
  io.image = torch::cat(images);
  if (io.mask.defined()) io.mask = torch::cat(masks);
  return io;
}

ImageMask Augment(ImageMask io, const AugmentOptions& o, uint64_t epoch, uint64_t step) {
  Rng rng(o.seed, epoch, step);
  RandomFlips(io, o, rng);
  RandomAffine(io, o, rng);
  RandomCropOrPad(io, o, rng);
  RandomIntensity(io, o, rng);
  return Resize(std::move(io), o.resize_h, o.resize_w);
}

}  // namespace shardify::trainer
