// Chunked volumes for patch training (see schema_internal.h): --patch-size parsing, the
// chunk shapes of the image and mask fields, and foreground locations per case.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "convert/convert.h"
#include "convert/sources/fg_locations.h"
#include "convert/sources/schema_internal.h"
#include "format/chunking.h"
#include "format/elements.h"
#include "format/fields.h"

namespace shardify::convert {

Result<Shape> ParsePatchSize(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("--patch-size '" + text + "': " + why +
                           " (expected DxHxW for volumes or HxW for 2D, e.g. 128x128x128)");
  };
  Result<Shape> out = ParseExtents(text);
  if (!out.ok()) return bad(out.status().message());
  if (out->size() < 2 || out->size() > 3) return bad("2 or 3 sizes are needed, got " + std::to_string(out->size()));
  return out;
}

namespace detail {
namespace {

// Element-wise maximum of the image (or mask) shapes of the cases that inspected cleanly;
// every entry at least 1, as ChooseChunkShape requires.
Shape MaxShape(const std::vector<CaseInfo>& infos, const std::vector<bool>& ok, bool mask, size_t rank) {
  Shape out(rank, 1);
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!ok[i] || (mask && !infos[i].has_mask)) continue;
    const Shape& s = mask ? infos[i].mask.shape : infos[i].image.shape;
    for (size_t d = 0; d < rank && d < s.size(); ++d) out[d] = std::max(out[d], s[d]);
  }
  return out;
}

}  // namespace

Status ApplyPatchSize(Schema& s, const std::vector<CaseInfo>& infos, const std::vector<bool>& ok, const Shape& patch,
                      uint64_t fg_cap, uint64_t seed) {
  if (patch.empty()) return Status::Ok();
  const FieldSpec& img = s.fields[s.image];
  const size_t spatial = img.shape.size() - 1;
  if (patch.size() != spatial) {
    return InvalidArgument("--patch-size " + ExtentsToString(patch) + " has " + std::to_string(patch.size()) +
                           " axes, but the images have " + std::to_string(spatial) + " spatial axes (field image " +
                           ShapeToString(img.shape) + ")");
  }
  if (s.mask >= 0 && s.fields[s.mask].shape.size() != img.shape.size()) {
    return InvalidArgument("--patch-size needs the mask rank to equal the image rank; mask " +
                           ShapeToString(s.fields[s.mask].shape) + ", image " + ShapeToString(img.shape));
  }
  Shape full_patch = {1};
  full_patch.insert(full_patch.end(), patch.begin(), patch.end());
  for (int f : {s.image, s.mask}) {
    if (f < 0) continue;
    FieldSpec& spec = s.fields[f];
    const Shape largest = MaxShape(infos, ok, f == s.mask, spec.shape.size());
    spec.chunk_shape = ChooseChunkShape(largest, full_patch, DTypeSize(spec.dtype));
  }
  if (s.mask >= 0 && fg_cap > 0) {
    FieldSpec loc;
    loc.name = kMaskFgLocationsField;
    loc.kind = FieldKind::kNdarray;
    loc.dtype = DType::kI32;
    loc.shape = {-1, static_cast<int64_t>(1 + spatial)};
    loc.meta = {{kMetaRole, kRoleFgLocations}, {kMetaMaxPerClass, std::to_string(fg_cap)}};
    s.fg_locations = static_cast<int>(s.fields.size());
    s.fields.push_back(std::move(loc));
    s.fg_cap = fg_cap;
    s.fg_seed = seed;
  }
  return Status::Ok();
}

namespace {

// Label value of element i; floating values are rounded, non-finite ones count as 0.
template <typename T>
int64_t ValueAt(const uint8_t* data, uint64_t i) {
  T v;
  std::memcpy(&v, data + i * sizeof(T), sizeof(T));
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v) || std::fabs(v) > 9e18) return 0;
    return static_cast<int64_t>(std::llround(v));
  } else {
    return static_cast<int64_t>(v);
  }
}

int64_t HalfAt(const uint8_t* data, uint64_t i) {
  uint16_t h;
  std::memcpy(&h, data + i * 2, 2);
  const float f = HalfToFloat(h);
  return std::isfinite(f) ? static_cast<int64_t>(std::llround(f)) : 0;
}

using ValueFn = int64_t (*)(const uint8_t*, uint64_t);

ValueFn ValueReader(DType t) {
  switch (t) {
    case DType::kU8:
      return &ValueAt<uint8_t>;
    case DType::kI8:
      return &ValueAt<int8_t>;
    case DType::kU16:
      return &ValueAt<uint16_t>;
    case DType::kI16:
      return &ValueAt<int16_t>;
    case DType::kU32:
      return &ValueAt<uint32_t>;
    case DType::kI32:
      return &ValueAt<int32_t>;
    case DType::kF16:
      return &HalfAt;
    case DType::kF32:
      return &ValueAt<float>;
    case DType::kF64:
      return &ValueAt<double>;
    case DType::kI64:
      return &ValueAt<int64_t>;
  }
  return nullptr;
}

// Uniform sample without replacement of at most `cap` voxels (algorithm R).
struct Reservoir {
  uint64_t seen = 0;
  std::vector<uint64_t> picks;  // voxel index within the channel
};

void Offer(Reservoir& r, uint64_t voxel, uint64_t cap, std::mt19937_64& rng) {
  ++r.seen;
  if (r.picks.size() < cap) {
    r.picks.push_back(voxel);
    return;
  }
  const auto j = static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * r.seen) >> 64);
  if (j < cap) r.picks[j] = voxel;
}

void PutI32(std::vector<uint8_t>& out, int64_t v) {
  const auto u = static_cast<uint32_t>(static_cast<int32_t>(v));
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<uint8_t>(u >> (8 * k)));
}

}  // namespace

namespace {

// Draws up to `cap` voxels per class from mask [C, voxels] (see FgLocations).
Status DrawPerClass(const FieldSpec& spec, const FieldValue& mask, uint64_t voxels, uint64_t cap, std::mt19937_64& rng,
                    std::map<int64_t, Reservoir>* classes) {
  const ValueFn value = ValueReader(spec.dtype);
  if (value == nullptr) return InvalidArgument("mask dtype is not supported for foreground locations");
  const int64_t channels = mask.shape[0];
  for (int64_t c = 0; c < channels; ++c) {
    const uint64_t base = static_cast<uint64_t>(c) * voxels;
    for (uint64_t v = 0; v < voxels; ++v) {
      const int64_t x = value(mask.bytes.data(), base + v);
      if (x <= 0) continue;                           // background, or outside the nonzero region (kOutsideRegion)
      const int64_t cls = channels == 1 ? x : c + 1;  // one-hot masks: channel index + 1
      if (cls < std::numeric_limits<int32_t>::min() || cls > std::numeric_limits<int32_t>::max()) {
        return InvalidArgument("mask value " + std::to_string(cls) +
                               " does not fit the i32 class column of mask.fg_locations");
      }
      Offer((*classes)[cls], v, cap, rng);
    }
  }
  return Status::Ok();
}

}  // namespace
}  // namespace detail

Result<FieldValue> FgLocations(const FieldSpec& mask_spec, const FieldValue& mask, uint64_t cap, uint64_t seed,
                               uint64_t case_index) {
  const Shape& shape = mask.shape;
  if (shape.size() < 2) return InvalidArgument("mask shape " + ShapeToString(shape) + " has no spatial axes");
  const size_t spatial = shape.size() - 1;
  const Shape space(shape.begin() + 1, shape.end());
  ASSIGN_OR_RETURN(const uint64_t voxels, ElementCount(space));
  for (int64_t d : space) {
    if (d > std::numeric_limits<int32_t>::max())
      return InvalidArgument("mask axis of " + std::to_string(d) + " voxels exceeds i32 coordinates");
  }
  ASSIGN_OR_RETURN(const uint64_t bytes, ByteSize(shape, mask_spec.dtype));
  if (mask.bytes.size() != bytes) {
    return InvalidArgument("mask holds " + std::to_string(mask.bytes.size()) + " bytes, its shape needs " +
                           std::to_string(bytes));
  }
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(case_index),
                    static_cast<uint32_t>(case_index >> 32)};
  std::mt19937_64 rng(seq);
  std::map<int64_t, detail::Reservoir> classes;
  RETURN_IF_ERROR(detail::DrawPerClass(mask_spec, mask, voxels, cap, rng, &classes));
  std::vector<uint8_t> out;
  int64_t rows = 0;
  std::vector<int64_t> coord(spatial);
  for (auto& [cls, r] : classes) {
    std::sort(r.picks.begin(), r.picks.end());
    for (uint64_t v : r.picks) {
      for (size_t a = spatial; a-- > 0;) {
        coord[a] = static_cast<int64_t>(v % static_cast<uint64_t>(space[a]));
        v /= static_cast<uint64_t>(space[a]);
      }
      detail::PutI32(out, cls);
      for (int64_t x : coord) detail::PutI32(out, x);
      ++rows;
    }
  }
  return FieldValue::Array(std::move(out), {rows, static_cast<int64_t>(1 + spatial)});
}

}  // namespace shardify::convert
