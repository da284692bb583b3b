// The nonzero region of a case (see preprocess_internal.h): the crop to its box, and the
// region, holes filled, that z-scoring uses with nnU-Net's use_mask_for_norm.
#include <algorithm>

#include "convert/preprocess/preprocess_internal.h"
#include "format/chunk_grid.h"
#include "format/elements.h"

namespace shardify::convert::detail {
namespace {

// 1 for every voxel that is nonzero (as a value: -0.0 is zero, NaN is not) in any channel.
std::vector<uint8_t> NonzeroVoxels(const DecodedImage& img, uint64_t voxels) {
  std::vector<uint8_t> flags(voxels, 0);
  const DType t = img.info.dtype;
  const size_t es = DTypeSize(t);
  const bool is_float = t == DType::kF16 || t == DType::kF32 || t == DType::kF64;
  const uint64_t channels = static_cast<uint64_t>(img.info.shape[0]);
  for (uint64_t c = 0; c < channels; ++c) {
    const uint8_t* p = img.pixels.data() + c * voxels * es;
    for (uint64_t v = 0; v < voxels; ++v, p += es) {
      if (flags[v]) continue;
      if (is_float) {
        flags[v] = ElementAsDouble(p, t) != 0.0;
      } else {
        for (size_t b = 0; b < es && !flags[v]; ++b) flags[v] = p[b] != 0;
      }
    }
  }
  return flags;
}

// Bounding box of the set flags of a row-major array of shape `spatial`; false when none.
bool FindBox(const std::vector<uint8_t>& flags, const Shape& spatial, Shape* start, Shape* size) {
  const size_t rank = spatial.size();
  const auto w = static_cast<uint64_t>(spatial.back());
  Shape lo(rank, INT64_MAX), hi(rank, -1), at(rank, 0);  // `at`: coordinates of the row
  for (uint64_t row = 0; row * w < flags.size(); ++row) {
    const uint8_t* f = flags.data() + row * w;
    const uint8_t* first = std::find(f, f + w, 1);
    if (first != f + w) {
      const uint8_t* end = f + w;  // one past the last set flag of the row
      while (end[-1] == 0) --end;
      at[rank - 1] = first - f;
      for (size_t a = 0; a < rank; ++a) lo[a] = std::min(lo[a], at[a]), hi[a] = std::max(hi[a], at[a]);
      hi[rank - 1] = std::max<int64_t>(hi[rank - 1], end - f - 1);
    }
    for (size_t a = rank - 1; a-- > 0;) {  // next row
      if (++at[a] < spatial[a]) break;
      at[a] = 0;
    }
  }
  if (hi[0] < 0) return false;
  *start = lo;
  size->resize(rank);
  for (size_t a = 0; a < rank; ++a) (*size)[a] = hi[a] - lo[a] + 1;
  return true;
}

void CropArray(DecodedImage& a, const Shape& start, const Shape& size) {
  const Shape& shape = a.info.shape;
  Shape box = {shape[0]}, origin = {0};
  box.insert(box.end(), size.begin(), size.end());
  origin.insert(origin.end(), start.begin(), start.end());
  const size_t es = DTypeSize(a.info.dtype);
  std::vector<uint8_t> out(ShapeProduct(box) * es);
  if (!out.empty()) {
    shardify::CopyBox(a.pixels.data(), shape, origin, out.data(), box, Shape(box.size(), 0), box, es);
  }
  a.pixels = std::move(out);
  a.info.shape = box;
}

// The geometry of the box at `start` (array order) of a grid with geometry `g`.
void MoveOrigin(Geometry& g, const Shape& start) {
  const size_t s = g.spacing.size();
  if (s != start.size() || g.direction.size() != s * s) return;
  for (size_t r = 0; r < s; ++r) {
    for (size_t a = 0; a < s; ++a) {
      g.origin[r] += g.direction[r * s + a] * g.spacing[a] * static_cast<double>(start[s - 1 - a]);
    }
  }
}

// A run [x0, x1] of row `row` (the last axis) of a row-major array.
struct Span {
  uint64_t row;
  int64_t x0, x1;
};

}  // namespace

void FillHoles(std::vector<uint8_t>* flags, const Shape& spatial) {
  std::vector<uint8_t>& f = *flags;
  if (spatial.empty() || f.empty()) return;
  const size_t rank = spatial.size();
  const int64_t w = spatial.back();
  const uint64_t rows = f.size() / static_cast<uint64_t>(w);
  std::vector<uint64_t> stride(rank, 1);  // of a row, along axes 0..rank-2
  for (size_t a = rank - 1; a-- > 0;)
    stride[a] = a + 2 < rank ? stride[a + 1] * static_cast<uint64_t>(spatial[a + 1]) : 1;
  std::vector<Span> todo;
  // Marks the background run of `row` through x as outside (2) and queues it.
  auto reach = [&](uint64_t row, int64_t x) {
    uint8_t* r = f.data() + row * static_cast<uint64_t>(w);
    int64_t x0 = x, x1 = x;
    while (x0 > 0 && r[x0 - 1] == 0) --x0;
    while (x1 + 1 < w && r[x1 + 1] == 0) ++x1;
    std::fill(r + x0, r + x1 + 1, uint8_t{2});
    todo.push_back({row, x0, x1});
    return x1;
  };
  auto on_border = [&](uint64_t row) {
    for (size_t a = 0; a + 1 < rank; ++a) {
      const uint64_t c = row / stride[a] % static_cast<uint64_t>(spatial[a]);
      if (c == 0 || c + 1 == static_cast<uint64_t>(spatial[a])) return true;
    }
    return false;
  };
  for (uint64_t row = 0; row < rows; ++row) {  // the border's background
    const uint8_t* r = f.data() + row * static_cast<uint64_t>(w);
    if (on_border(row)) {
      for (int64_t x = 0; x < w; ++x) {
        if (r[x] == 0) x = reach(row, x);
      }
    } else {
      for (int64_t x : {int64_t{0}, w - 1}) {
        if (r[x] == 0) reach(row, x);
      }
    }
    while (!todo.empty()) {  // spreads through background, one axis at a time
      const Span s = todo.back();
      todo.pop_back();
      for (size_t a = 0; a + 1 < rank; ++a) {
        const uint64_t c = s.row / stride[a] % static_cast<uint64_t>(spatial[a]);
        for (int step : {-1, 1}) {
          if ((step < 0 && c == 0) || (step > 0 && c + 1 == static_cast<uint64_t>(spatial[a]))) continue;
          const uint64_t next = step < 0 ? s.row - stride[a] : s.row + stride[a];
          const uint8_t* n = f.data() + next * static_cast<uint64_t>(w);
          for (int64_t x = s.x0; x <= s.x1; ++x) {
            if (n[x] == 0) x = reach(next, x);
          }
        }
      }
    }
  }
  for (uint8_t& v : f) v = v != 2;
}

std::vector<uint8_t> NormalizationRegion(const CaseData& d) {
  const Shape spatial = SpatialShape(d.image.info.shape);
  const uint64_t voxels = ShapeProduct(spatial);
  std::vector<uint8_t> region = NonzeroVoxels(d.image, voxels);
  FillHoles(&region, spatial);
  if (d.has_mask) {
    const DType t = d.mask.info.dtype;
    const size_t es = DTypeSize(t);
    for (uint64_t c = 0; c < static_cast<uint64_t>(d.mask.info.shape[0]); ++c) {
      for (uint64_t v = 0; v < voxels; ++v) {
        if (!region[v] && ElementAsDouble(&d.mask.pixels[(c * voxels + v) * es], t) > 0) region[v] = 1;
      }
    }
  }
  return region;
}

Status CropToNonzero(CaseData* d, Shape* start, Shape* size) {
  const Shape spatial = SpatialShape(d->image.info.shape);
  *start = Shape(spatial.size(), 0);
  *size = spatial;
  if (spatial.empty() || ShapeProduct(spatial) == 0) return Status::Ok();
  const std::vector<uint8_t> flags = NonzeroVoxels(d->image, ShapeProduct(spatial));
  if (!FindBox(flags, spatial, start, size) || *size == spatial) {
    *start = Shape(spatial.size(), 0);
    *size = spatial;
    return Status::Ok();
  }
  CropArray(d->image, *start, *size);
  MoveOrigin(d->image.info.geometry, *start);
  if (d->has_mask) {
    CropArray(d->mask, *start, *size);
    MoveOrigin(d->mask.info.geometry, *start);
  }
  return Status::Ok();
}

}  // namespace shardify::convert::detail
