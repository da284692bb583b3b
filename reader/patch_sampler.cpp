#include "reader/patch_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/step_rng.h"
#include "format/elements.h"

namespace shardify {

namespace {

// The draws of one sample's patch: SplitMix64 seeded by (seed, sample, draw), so the stream
// for each is fixed.
class PatchRng {
 public:
  PatchRng(uint64_t seed, uint64_t index, uint64_t draw, bool forced)
      : state_(seed ^ (index * 0x9E3779B97F4A7C15ull) ^ (draw * 0xD1B54A32D192ED03ull) ^ (forced ? 0xABCDull : 0)) {}
  uint64_t Next() { return SplitMix64Next(state_); }
  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

// One element of `dtype` holding `value`, for padding.
std::vector<uint8_t> PadElement(DType dtype, int64_t value) {
  std::vector<uint8_t> e(DTypeSize(dtype));
  auto put = [&](auto v) { std::memcpy(e.data(), &v, sizeof v); };
  switch (dtype) {
    case DType::kU8:
      put(static_cast<uint8_t>(value));
      break;
    case DType::kI8:
      put(static_cast<int8_t>(value));
      break;
    case DType::kU16:
      put(static_cast<uint16_t>(value));
      break;
    case DType::kI16:
      put(static_cast<int16_t>(value));
      break;
    case DType::kU32:
      put(static_cast<uint32_t>(value));
      break;
    case DType::kI32:
      put(static_cast<int32_t>(value));
      break;
    case DType::kF32:
      put(static_cast<float>(value));
      break;
    case DType::kF64:
      put(static_cast<double>(value));
      break;
    case DType::kI64:
      put(value);
      break;
    case DType::kF16:
      break;  // zeros
  }
  return e;
}

}  // namespace

Shape PatchOptions::ReadShape() const {
  Shape shape = patch;
  for (size_t a = 0; a < shape.size() && a < margin.size(); ++a) shape[a] += 2 * margin[a];
  return shape;
}

Result<std::unique_ptr<PatchSampler>> PatchSampler::Create(const Dataset* dataset, PatchOptions options) {
  const Manifest& m = dataset->manifest();
  std::unique_ptr<PatchSampler> s(new PatchSampler(dataset, std::move(options)));
  const PatchOptions& o = s->options_;
  if (o.patch.empty()) return InvalidArgument("patch size is empty");
  for (int64_t d : o.patch)
    if (d < 1) return InvalidArgument("patch size " + ShapeToString(o.patch) + " has a dimension < 1");
  if (!o.margin.empty() && o.margin.size() != o.patch.size())
    return InvalidArgument("patch margin " + ShapeToString(o.margin) + " needs one value per patch axis " +
                           ShapeToString(o.patch));
  for (size_t a = 0; a < o.margin.size(); ++a)  // 2^40 voxels per axis: far past any volume, no overflow
    if (o.margin[a] < 0 || o.margin[a] > (int64_t{1} << 40) || o.patch[a] > (int64_t{1} << 40))
      return InvalidArgument("patch margin " + ShapeToString(o.margin) + " is negative or too large");
  if (o.foreground_fraction < 0 || o.foreground_fraction > 1)
    return InvalidArgument("foreground fraction " + std::to_string(o.foreground_fraction) + " is outside [0, 1]");
  auto find = [&](const std::string& name, int* out) -> Status {
    *out = m.FindField(name);
    if (*out < 0) return NotFound("no field '" + name + "' in " + dataset->dir());
    const FieldSpec& f = m.fields[*out];
    if (f.kind != FieldKind::kNdarray || f.shape.size() < o.patch.size())
      return InvalidArgument("field '" + name + "' is not an ndarray of rank >= " + std::to_string(o.patch.size()));
    return Status::Ok();
  };
  RETURN_IF_ERROR(find(o.image_field, &s->image_));
  if (!o.label_field.empty()) RETURN_IF_ERROR(find(o.label_field, &s->label_));
  s->locations_ = m.FindField(o.locations_field);
  if (s->locations_ >= 0 && (m.fields[s->locations_].dtype != DType::kI32 || m.fields[s->locations_].shape.size() != 2))
    return InvalidArgument("field '" + o.locations_field + "' is not i32 [N, 1 + S]");
  return s;
}

Result<Shape> PatchSampler::RegionShape(uint64_t index, int field) const {
  ASSIGN_OR_RETURN(SampleView v, dataset_->Sample(index));
  ASSIGN_OR_RETURN(Shape shape, v.shape(static_cast<size_t>(field)));
  const Shape read = options_.ReadShape();
  std::copy(read.begin(), read.end(), shape.end() - static_cast<ptrdiff_t>(read.size()));
  return shape;
}

int64_t PatchSampler::StoredLabelPad() const {
  if (label_ < 0) return 0;
  const DType dtype = dataset_->manifest().fields[static_cast<size_t>(label_)].dtype;
  const std::vector<uint8_t> pad = PadElement(dtype, options_.label_pad);
  return static_cast<int64_t>(ElementAsDouble(pad.data(), dtype));
}

Result<uint64_t> PatchSampler::ImageBytes(uint64_t index) const {
  ASSIGN_OR_RETURN(const Shape s, RegionShape(index, image_));
  return ByteSize(s, dataset_->manifest().fields[image_].dtype);
}

Result<uint64_t> PatchSampler::LabelBytes(uint64_t index) const {
  if (label_ < 0) return uint64_t{0};
  ASSIGN_OR_RETURN(const Shape s, RegionShape(index, label_));
  return ByteSize(s, dataset_->manifest().fields[label_].dtype);
}

bool PatchSampler::Forced(size_t slot, size_t batch_size) const {
  const auto forced = static_cast<size_t>(std::lround(static_cast<double>(batch_size) * options_.foreground_fraction));
  return slot + forced >= batch_size;
}

struct PatchSampler::Locations {
  std::vector<int32_t> rows;                   // [N, 1 + S] as stored
  std::vector<int32_t> classes;                // the class values present, ascending
  std::vector<std::vector<int64_t>> of_class;  // the rows of each class, in row order

  uint64_t bytes() const {
    uint64_t n = sizeof(*this) + rows.size() * sizeof(int32_t) + classes.size() * sizeof(int32_t);
    for (const auto& r : of_class) n += sizeof(r) + r.size() * sizeof(int64_t);
    return n;
  }
};

Result<std::shared_ptr<const PatchSampler::Locations>> PatchSampler::LocationsOf(const SampleView& v, const Shape& ls,
                                                                                 Decoder& decoder) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    const auto hit = cache_.find(v.index());
    if (hit != cache_.end()) return hit->second;
  }
  auto locs = std::make_shared<Locations>();
  locs->rows.resize(static_cast<size_t>(ls[0] * ls[1]));
  RETURN_IF_ERROR(v.Decode(static_cast<size_t>(locations_), locs->rows.data(), locs->rows.size() * 4, decoder));
  for (int64_t r = 0; r < ls[0]; ++r) locs->classes.push_back(locs->rows[static_cast<size_t>(r * ls[1])]);
  std::sort(locs->classes.begin(), locs->classes.end());
  locs->classes.erase(std::unique(locs->classes.begin(), locs->classes.end()), locs->classes.end());
  locs->of_class.resize(locs->classes.size());
  for (int64_t r = 0; r < ls[0]; ++r) {
    const int32_t cls = locs->rows[static_cast<size_t>(r * ls[1])];
    const size_t c =
        static_cast<size_t>(std::lower_bound(locs->classes.begin(), locs->classes.end(), cls) - locs->classes.begin());
    locs->of_class[c].push_back(r);
  }
  std::shared_ptr<const Locations> done = std::move(locs);
  const uint64_t bytes = done->bytes();
  std::lock_guard<std::mutex> lock(cache_mu_);
  ++locations_decoded_;
  if (bytes > options_.locations_cache_bytes || cache_.count(v.index())) return done;
  while (cache_bytes_ + bytes > options_.locations_cache_bytes && !cache_order_.empty()) {
    const auto old = cache_.find(cache_order_.front());
    cache_bytes_ -= old->second->bytes();
    cache_.erase(old);
    cache_order_.pop_front();
  }
  cache_.emplace(v.index(), done);
  cache_order_.push_back(v.index());
  cache_bytes_ += bytes;
  return done;
}

uint64_t PatchSampler::locations_decoded() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  return locations_decoded_;
}

Status PatchSampler::ChooseStart(const SampleView& v, const Shape& spatial, uint64_t draw, bool forced,
                                 Decoder& decoder, PatchInfo* info) const {
  const Shape& patch = options_.patch;
  const size_t s = patch.size();
  PatchRng rng(options_.seed, v.index(), draw, forced);
  info->start.assign(s, 0);
  info->forced = forced;
  info->fg_class = -1;
  for (size_t a = 0; a < s; ++a) {  // uniform placement; a patch larger than the volume is centred with jitter
    const int64_t room = spatial[a] - patch[a];
    info->start[a] = room >= 0 ? rng.Uniform(0, room) : rng.Uniform(room, 0);
  }
  if (!forced || locations_ < 0) return Status::Ok();
  ASSIGN_OR_RETURN(const Shape ls, v.shape(static_cast<size_t>(locations_)));
  if (ls[0] == 0 || ls[1] != static_cast<int64_t>(1 + s)) return Status::Ok();
  ASSIGN_OR_RETURN(const std::shared_ptr<const Locations> locs, LocationsOf(v, ls, decoder));
  const size_t c = rng.Next() % locs->classes.size();
  const int32_t cls = locs->classes[c];
  const int64_t row = locs->of_class[c][rng.Next() % locs->of_class[c].size()];
  for (size_t a = 0; a < s; ++a) {  // centre on the location, kept inside the volume where it fits
    const int64_t loc = locs->rows[static_cast<size_t>(row * ls[1] + 1 + static_cast<int64_t>(a))];
    const int64_t room = spatial[a] - patch[a];
    info->start[a] = std::clamp(loc - patch[a] / 2, std::min<int64_t>(room, 0), std::max<int64_t>(room, 0));
  }
  info->fg_class = cls;
  return Status::Ok();
}

Status PatchSampler::Sample(uint64_t index, uint64_t draw, bool forced, void* image_dst, size_t image_size,
                            void* label_dst, size_t label_size, Decoder& decoder, PatchInfo* info) const {
  ASSIGN_OR_RETURN(SampleView v, dataset_->Sample(index));
  ASSIGN_OR_RETURN(const Shape image_shape, v.shape(static_cast<size_t>(image_)));
  const size_t s = options_.patch.size(), lead = image_shape.size() - s;
  const Shape spatial(image_shape.begin() + static_cast<ptrdiff_t>(lead), image_shape.end());
  PatchInfo local;
  PatchInfo* out = info ? info : &local;
  RETURN_IF_ERROR(ChooseStart(v, spatial, draw, forced, decoder, out));
  const Shape read = options_.ReadShape();
  Shape read_start = out->start;
  for (size_t a = 0; a < options_.margin.size(); ++a) read_start[a] -= options_.margin[a];
  auto region = [&](const Shape& full, Shape* start, Shape* size) {
    const size_t l = full.size() - s;
    start->assign(l, 0);
    size->assign(full.begin(), full.begin() + static_cast<ptrdiff_t>(l));
    start->insert(start->end(), read_start.begin(), read_start.end());
    size->insert(size->end(), read.begin(), read.end());
  };
  Shape start, size;
  region(image_shape, &start, &size);
  RETURN_IF_ERROR(
      v.DecodeRegion(static_cast<size_t>(image_), start, size, image_dst, image_size, decoder, nullptr, chunks_.get()));
  if (label_ < 0) return Status::Ok();
  ASSIGN_OR_RETURN(const Shape label_shape, v.shape(static_cast<size_t>(label_)));
  if (!std::equal(spatial.begin(), spatial.end(), label_shape.end() - static_cast<ptrdiff_t>(s)))
    return InvalidArgument("sample " + std::to_string(index) + ": label shape " + ShapeToString(label_shape) +
                           " does not match image shape " + ShapeToString(image_shape));
  region(label_shape, &start, &size);
  const std::vector<uint8_t> pad = PadElement(dataset_->manifest().fields[label_].dtype, options_.label_pad);
  return v.DecodeRegion(static_cast<size_t>(label_), start, size, label_dst, label_size, decoder, pad.data(),
                        chunks_.get());
}

}  // namespace shardify
