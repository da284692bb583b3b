// Preprocessing of one decoded case (see preprocess_internal.h): crop, normalize,
// resample, convert, and the record of what the case was.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "convert/preprocess/integrity_internal.h"
#include "convert/preprocess/preprocess_internal.h"
#include "convert/preprocess/resample_internal.h"
#include "format/elements.h"

namespace shardify::convert::detail {
namespace {

constexpr double kMinStd = 1e-8;  // nnU-Net's floor for a channel's standard deviation

std::vector<float> ToFloats(DecodedImage& img) {
  const uint64_t n = ShapeProduct(img.info.shape);
  std::vector<float> f(n);
  ConvertElements(img.pixels.data(), img.info.dtype, reinterpret_cast<uint8_t*>(f.data()), DType::kF32, n);
  std::vector<uint8_t>().swap(img.pixels);
  return f;
}

void FromFloats(const std::vector<float>& f, DType t, DecodedImage* img) {
  img->pixels.resize(f.size() * DTypeSize(t));
  ConvertElements(reinterpret_cast<const uint8_t*>(f.data()), DType::kF32, img->pixels.data(), t, f.size());
  img->info.dtype = t;
}

Normalization ChannelMode(const PreprocessPlan& plan, size_t c) {
  if (plan.normalize.empty()) return Normalization::kNone;
  return plan.normalize.size() == 1 ? plan.normalize[0] : plan.normalize[std::min(c, plan.normalize.size() - 1)];
}

// Mean and population std of n floats (two passes, in double), of those where `in` is
// set when it is given.
ChannelNorm ZScoreOf(const float* x, uint64_t n, const uint8_t* in) {
  ChannelNorm cn;
  double sum = 0;
  uint64_t count = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (in == nullptr || in[i]) sum += x[i], ++count;
  }
  cn.mean = count > 0 ? sum / static_cast<double>(count) : 0;
  double sq = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (in == nullptr || in[i]) sq += (x[i] - cn.mean) * (x[i] - cn.mean);
  }
  cn.stddev = count > 0 ? std::sqrt(sq / static_cast<double>(count)) : 0;
  return cn;
}

// Normalizes each channel of `work` as the plan says. `region` (NormalizationRegion) is
// where zscore channels in it (PreprocessPlan::InRegion) take their statistics; outside
// it they become 0.
Status Normalize(const PreprocessPlan& plan, uint64_t channels, uint64_t voxels, const std::vector<uint8_t>& region,
                 std::vector<float>* work, std::vector<ChannelNorm>* record) {
  record->clear();
  for (uint64_t c = 0; c < channels; ++c) {
    float* x = work->data() + c * voxels;
    ChannelNorm cn;
    const Normalization mode = ChannelMode(plan, c);
    const uint8_t* in = mode == Normalization::kZScore && plan.InRegion(c) ? region.data() : nullptr;
    if (mode == Normalization::kZScore) cn = ZScoreOf(x, voxels, in);
    if (mode == Normalization::kCt) {
      if (c >= plan.ct.size()) return Internal("no ct statistics for channel " + std::to_string(c));
      cn = plan.ct[c];
    }
    if (mode != Normalization::kNone) {
      cn.stddev = std::max(cn.stddev, kMinStd);
      for (uint64_t i = 0; i < voxels; ++i) {
        const double v = std::min(std::max(static_cast<double>(x[i]), cn.clip_low), cn.clip_high);
        x[i] = in == nullptr || in[i] ? static_cast<float>((v - cn.mean) / cn.stddev) : 0.0f;
      }
    }
    record->push_back(cn);
  }
  return Status::Ok();
}

// nnU-Net's out-of-plane axis: with a spacing (the source's, else the target's) whose
// largest entry is over 3x its smallest, the one axis with the largest spacing; -1 when
// there is none or several share it.
int LowResAxis(const std::vector<double>& source, const std::vector<double>& target) {
  for (const auto* s : {&source, &target}) {
    const auto [mn, mx] = std::minmax_element(s->begin(), s->end());
    if (*mx / *mn <= 3) continue;
    if (std::count(s->begin(), s->end(), *mx) != 1) return -1;
    return static_cast<int>(mx - s->begin());
  }
  return -1;
}

// The range of values of each channel of `v` ([channels, spatial...]), or with axis >= 0
// of each of its slices along that axis (index c * spatial[axis] + slice).
struct Range {
  float lo = INFINITY, hi = -INFINITY;
};
std::vector<Range> Ranges(const std::vector<float>& v, int64_t channels, const Shape& spatial, int axis) {
  const uint64_t voxels = ShapeProduct(spatial);
  const uint64_t slices = axis < 0 ? 1 : static_cast<uint64_t>(spatial[axis]);
  const uint64_t stride = axis < 0 ? voxels : ShapeProduct(Shape(spatial.begin() + axis + 1, spatial.end()));
  std::vector<Range> r(static_cast<uint64_t>(channels) * slices);
  for (uint64_t i = 0; i < v.size(); ++i) {
    Range& g = r[(i / voxels) * slices + (i % voxels) / stride % slices];
    g.lo = std::min(g.lo, v[i]), g.hi = std::max(g.hi, v[i]);
  }
  return r;
}

// Clips `v` to `ranges` (as Ranges made them, over the same channels and slices).
void Clip(std::vector<float>& v, const Shape& spatial, int axis, const std::vector<Range>& ranges) {
  const uint64_t voxels = ShapeProduct(spatial);
  const uint64_t slices = axis < 0 ? 1 : static_cast<uint64_t>(spatial[axis]);
  const uint64_t stride = axis < 0 ? voxels : ShapeProduct(Shape(spatial.begin() + axis + 1, spatial.end()));
  for (uint64_t i = 0; i < v.size(); ++i) {
    const Range& g = ranges[(i / voxels) * slices + (i % voxels) / stride % slices];
    v[i] = std::min(std::max(v[i], g.lo), g.hi);
  }
}

// In-plane with `interp`, then along `lowres` (when it changes size) nearest neighbour,
// its ties as nnU-Net's (NearestAlongAxis).
// With `clip`, as skimage's resize in nnU-Net clips: the in-plane result to the range of
// each input slice along `lowres`, or without one the result to each channel's range.
Status ResampleSeparable(const std::vector<float>& in, int64_t channels, const Grid& from, const Grid& to,
                         Interpolator interp, int lowres, bool clip, std::vector<float>* out) {
  if (lowres < 0 || interp == Interpolator::kNearest) {
    RETURN_IF_ERROR(ResampleFloat(in, channels, from, to, interp, out));
    if (clip) Clip(*out, to.size, -1, Ranges(in, channels, from.size, -1));
    return Status::Ok();
  }
  Shape mid = to.size;
  mid[lowres] = from.size[lowres];
  const Grid plane = ResampledGrid(from, mid);
  std::vector<float> tmp;
  RETURN_IF_ERROR(ResampleFloat(in, channels, from, plane, interp, &tmp));
  if (clip) Clip(tmp, mid, lowres, Ranges(in, channels, from.size, lowres));
  if (mid == to.size) {
    *out = std::move(tmp);
    return Status::Ok();
  }
  std::vector<uint8_t> bytes;
  NearestAlongAxis(reinterpret_cast<const uint8_t*>(tmp.data()), sizeof(float), channels, mid, lowres, to.size[lowres],
                   &bytes);
  out->resize(bytes.size() / sizeof(float));
  std::memcpy(out->data(), bytes.data(), bytes.size());
  return Status::Ok();
}

// Label values of `mask` as doubles; with `as_floats`, fails when one is not exactly a
// float (ITK resamples floats).
Result<std::vector<double>> LabelValues(const DecodedImage& mask, bool as_floats) {
  const DType t = mask.info.dtype;
  const size_t es = DTypeSize(t);
  std::vector<double> v(mask.pixels.size() / es);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = ElementAsDouble(&mask.pixels[i * es], t);
    if (as_floats && static_cast<double>(static_cast<float>(v[i])) != v[i] && !std::isnan(v[i])) {
      return InvalidArgument("mask value " + std::to_string(v[i]) +
                             " cannot be resampled exactly (ITK resamples floats)");
    }
  }
  return v;
}

// One channel's labels per label linearly, as nnU-Net's resize_segmentation: each label's
// indicator (ascending order) interpolated as scipy does (ZoomLinear, in double), and a
// voxel takes the last label whose indicator is at least 0.5, else 0. With `lowres` >= 0
// in-plane first, then that axis by nearest neighbour (nnU-Net's order_z 0). `order`: the
// axes as nnU-Net's transposed array has them.
void LabelsLinear(const double* v, const Grid& from, const Grid& to, int lowres, const std::array<int, 3>& order,
                  double* out) {
  const uint64_t n_in = ShapeProduct(from.size);
  std::vector<double> labels(v, v + n_in);
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  Shape mid = to.size;
  if (lowres >= 0) mid[lowres] = from.size[lowres];
  std::vector<double> map(ShapeProduct(mid), 0.0), one(n_in), res;
  for (double label : labels) {
    std::transform(v, v + n_in, one.begin(), [&](double x) { return x == label ? 1.0 : 0.0; });
    ZoomLinear(one, from.size, mid, order, &res);
    for (size_t i = 0; i < map.size(); ++i) {
      if (res[i] >= 0.5) map[i] = label;
    }
  }
  if (mid == to.size) {
    std::copy(map.begin(), map.end(), out);
    return;
  }
  std::vector<uint8_t> bytes;
  NearestAlongAxis(reinterpret_cast<const uint8_t*>(map.data()), sizeof(double), 1, mid, lowres, to.size[lowres],
                   &bytes);
  std::memcpy(out, bytes.data(), bytes.size());
}

// The mask on grid `to`: nearest neighbour, or nnU-Net's per-label linear (LabelsLinear).
Status ResampleMask(const PreprocessPlan& plan, const Grid& from, const Grid& to, int lowres, DecodedImage* mask) {
  const int64_t channels = mask->info.shape[0];
  const uint64_t n_in = ShapeProduct(from.size), n_out = ShapeProduct(to.size);
  const bool linear = plan.options.mask_interp == MaskInterp::kLinear;
  ASSIGN_OR_RETURN(std::vector<double> values, LabelValues(*mask, !linear));
  std::vector<double> out(n_out * static_cast<uint64_t>(channels), 0.0);
  std::vector<float> one(n_in), res;
  for (int64_t c = 0; c < channels; ++c) {
    const double* v = values.data() + c * n_in;
    double* o = out.data() + c * n_out;
    if (linear) {
      LabelsLinear(v, from, to, lowres, plan.transpose, o);
      continue;
    }
    std::transform(v, v + n_in, one.begin(), [](double x) { return static_cast<float>(x); });
    RETURN_IF_ERROR(ResampleFloat(one, 1, from, to, Interpolator::kNearest, &res));
    std::copy(res.begin(), res.end(), o);
  }
  mask->pixels.resize(out.size() * DTypeSize(plan.mask_dtype));
  ConvertElements(reinterpret_cast<const uint8_t*>(out.data()), DType::kF64, mask->pixels.data(), plan.mask_dtype,
                  out.size());
  mask->info.dtype = plan.mask_dtype;
  return Status::Ok();
}

Status Resample(const PreprocessPlan& plan, CaseData* d, std::vector<float>* work) {
  ImageInfo& info = d->image.info;
  const Shape spatial = SpatialShape(info.shape);
  const std::vector<double> source(info.geometry.spacing.rbegin(), info.geometry.spacing.rend());
  ASSIGN_OR_RETURN(const Shape size, TargetShape(spatial, source, plan.spacing));
  if (size == spatial) return Status::Ok();
  const Grid from{spatial, info.geometry};
  const Grid to = ResampledGrid(from, size);
  const int lowres = LowResAxis(source, plan.spacing);
  const Interpolator interp =
      plan.options.image_interp == ImageInterp::kCubic ? Interpolator::kCubic : Interpolator::kLinear;
  std::vector<float> out;
  RETURN_IF_ERROR(ResampleSeparable(*work, info.shape[0], from, to, interp, lowres, true, &out));
  *work = std::move(out);
  std::copy(size.begin(), size.end(), info.shape.begin() + 1);
  info.geometry = to.geometry;
  if (d->has_mask) {
    RETURN_IF_ERROR(ResampleMask(plan, from, to, lowres, &d->mask));
    std::copy(size.begin(), size.end(), d->mask.info.shape.begin() + 1);
    d->mask.info.geometry = to.geometry;
  }
  return Status::Ok();
}

void ConvertMask(const PreprocessPlan& plan, CaseData* d) {
  if (!d->has_mask || d->mask.info.dtype == plan.mask_dtype) return;
  d->mask.pixels = ConvertArray(d->mask.pixels, d->mask.info.dtype, plan.mask_dtype);
  d->mask.info.dtype = plan.mask_dtype;
}

// Sets every mask channel to kOutsideRegion where `region` (NormalizationRegion, which
// holds every labelled voxel) is 0, as nnU-Net's crop_to_nonzero marks its segmentation;
// the mask takes the plan's (signed) dtype first.
void MarkOutsideRegion(const PreprocessPlan& plan, const std::vector<uint8_t>& region, CaseData* d) {
  ConvertMask(plan, d);
  const size_t es = DTypeSize(d->mask.info.dtype);
  std::vector<uint8_t> outside(es);
  const double v = kOutsideRegion;
  ConvertElements(reinterpret_cast<const uint8_t*>(&v), DType::kF64, outside.data(), d->mask.info.dtype, 1);
  const uint64_t voxels = region.size(), channels = d->mask.pixels.size() / es / std::max<uint64_t>(voxels, 1);
  for (uint64_t c = 0; c < channels; ++c) {
    for (uint64_t i = 0; i < voxels; ++i) {
      if (!region[i]) std::memcpy(&d->mask.pixels[(c * voxels + i) * es], outside.data(), es);
    }
  }
}

}  // namespace

Status PreprocessCase(const PreprocessPlan& plan, const CaseInput& in, CaseData* d, SourceRecord* r) {
  const std::string& name = in.name;
  DecodedImage& img = d->image;
  RETURN_IF_ERROR(CheckFinite(plan.options, in, &img));
  r->image_dtype = img.info.dtype;
  r->mask_dtype = d->has_mask ? d->mask.info.dtype : plan.mask_dtype;
  r->shape = SpatialShape(img.info.shape);
  r->geometry = img.info.geometry;
  r->crop_start = Shape(r->shape.size(), 0);
  r->crop_size = r->shape;
  if (plan.options.crop_nonzero) RETURN_IF_ERROR(CropToNonzero(d, &r->crop_start, &r->crop_size));
  if (plan.normalize.empty() && plan.spacing.empty()) {
    if (img.info.dtype != plan.image_dtype) {
      img.pixels = ConvertArray(img.pixels, img.info.dtype, plan.image_dtype);
      img.info.dtype = plan.image_dtype;
    }
    ConvertMask(plan, d);
    return Status::Ok();
  }
  const auto channels = static_cast<uint64_t>(img.info.shape[0]);
  const std::vector<uint8_t> region = plan.AnyInRegion() ? NormalizationRegion(*d) : std::vector<uint8_t>{};
  if (plan.MarksRegion(d->has_mask)) MarkOutsideRegion(plan, region, d);
  std::vector<float> work = ToFloats(img);
  if (!plan.normalize.empty()) {
    RETURN_IF_ERROR(Normalize(plan, channels, ShapeProduct(SpatialShape(img.info.shape)), region, &work, &r->norm)
                        .WithContext(name));
  }
  if (!plan.spacing.empty()) RETURN_IF_ERROR(Resample(plan, d, &work).WithContext(name));
  FromFloats(work, plan.image_dtype, &img);
  ConvertMask(plan, d);
  return Status::Ok();
}

}  // namespace shardify::convert::detail
