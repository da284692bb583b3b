#include "reader/source_grid.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/chunk_grid.h"
#include "format/elements.h"
#include "format/fields.h"

namespace shardify {
namespace {

uint64_t Count(const Shape& s, size_t from = 0) {
  uint64_t n = 1;
  for (size_t a = from; a < s.size(); ++a) n *= static_cast<uint64_t>(s[a]);
  return n;
}

std::string Where(const Dataset& ds, const SampleView& s) { return ds.dir() + ": sample " + std::to_string(s.index()); }

// One value per channel from `fill` (one for all, or one each).
double FillOf(const std::vector<double>& fill, int64_t c) {
  if (fill.empty()) return 0;
  return fill.size() == 1 ? fill[0] : fill[std::min<size_t>(static_cast<size_t>(c), fill.size() - 1)];
}

// Resamples [outer, n_in, inner] doubles to [outer, n_out, inner] along the middle axis.
std::vector<double> ResampleAxis(const std::vector<double>& in, uint64_t outer, int64_t n_in, int64_t n_out,
                                 uint64_t inner, GridInterp interp) {
  std::vector<double> out(outer * static_cast<uint64_t>(n_out) * inner);
  std::vector<int64_t> lo(static_cast<size_t>(n_out)), hi(static_cast<size_t>(n_out));
  std::vector<double> t(static_cast<size_t>(n_out));
  const double scale = static_cast<double>(n_in) / static_cast<double>(n_out);
  for (int64_t j = 0; j < n_out; ++j) {
    const double c = std::clamp((static_cast<double>(j) + 0.5) * scale - 0.5, 0.0, static_cast<double>(n_in - 1));
    if (interp == GridInterp::kNearest) {
      lo[j] = hi[j] = std::min<int64_t>(static_cast<int64_t>(std::floor(c + 0.5)), n_in - 1);
      continue;
    }
    lo[j] = static_cast<int64_t>(std::floor(c));
    hi[j] = std::min(lo[j] + 1, n_in - 1);
    t[j] = c - static_cast<double>(lo[j]);
  }
  for (uint64_t o = 0; o < outer; ++o) {
    const double* src = in.data() + o * static_cast<uint64_t>(n_in) * inner;
    double* dst = out.data() + o * static_cast<uint64_t>(n_out) * inner;
    for (int64_t j = 0; j < n_out; ++j) {
      const double* a = src + static_cast<uint64_t>(lo[j]) * inner;
      const double* b = src + static_cast<uint64_t>(hi[j]) * inner;
      double* d = dst + static_cast<uint64_t>(j) * inner;
      for (uint64_t i = 0; i < inner; ++i) d[i] = a[i] + (b[i] - a[i]) * t[j];
    }
  }
  return out;
}

Status CheckArray(const SourceGrid& g, DType dtype, const Shape& shape, size_t bytes, const Shape& spatial) {
  if (shape.size() != g.shape.size() + 1) {
    return InvalidArgument("array " + ShapeToString(shape) + " does not have the source grid's " +
                           std::to_string(g.shape.size()) + " spatial axes plus channels");
  }
  ASSIGN_OR_RETURN(const uint64_t want, ByteSize(shape, dtype));
  if (want != bytes)
    return InvalidArgument("array holds " + std::to_string(bytes) + " bytes, its shape needs " + std::to_string(want));
  if (!spatial.empty() && Shape(shape.begin() + 1, shape.end()) != spatial) {
    return InvalidArgument("array " + ShapeToString(shape) + " is not the size of the crop box " +
                           ShapeToString(spatial));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<double>> ReadDoubles(const Dataset& ds, const SampleView& s, const std::string& field, Decoder& d) {
  const int f = ds.manifest().FindField(field);
  if (f < 0 || ds.manifest().fields[f].kind != FieldKind::kNdarray) return std::vector<double>{};
  const DType t = ds.manifest().fields[f].dtype;
  ASSIGN_OR_RETURN(const uint64_t size, s.raw_size(static_cast<size_t>(f)));
  std::vector<uint8_t> raw(size);
  RETURN_IF_ERROR(s.Decode(static_cast<size_t>(f), raw.data(), raw.size(), d));
  const size_t es = DTypeSize(t);
  std::vector<double> v(raw.size() / es);
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsDouble(&raw[i * es], t);
  return v;
}

Result<std::optional<SourceGrid>> ReadSourceGrid(const Dataset& ds, const SampleView& s, Decoder& d) {
  if (ds.manifest().FindField(kSourceShapeField) < 0) return std::optional<SourceGrid>{};
  ASSIGN_OR_RETURN(const std::vector<double> shape, ReadDoubles(ds, s, kSourceShapeField, d));
  ASSIGN_OR_RETURN(const std::vector<double> box, ReadDoubles(ds, s, kSourceCropBoxField, d));
  const size_t rank = shape.size();
  if (rank == 0 || rank > kMaxRank || box.size() != 2 * rank) {
    return Corruption(Where(ds, s) + ": source.crop_box has " + std::to_string(box.size()) + " values, source.shape " +
                      std::to_string(rank) + " (expected twice as many)");
  }
  SourceGrid g;
  for (size_t a = 0; a < rank; ++a) {
    const double n = shape[a], start = box[a], size = box[rank + a];
    if (!(n >= 1 && n < 1e15 && start >= 0 && size >= 1 && start + size <= n) || n != std::floor(n) ||
        start != std::floor(start) || size != std::floor(size)) {
      return Corruption(Where(ds, s) + ": source.crop_box axis " + std::to_string(a) + " [" + std::to_string(start) +
                        ", +" + std::to_string(size) + ") does not lie in source.shape " + std::to_string(n));
    }
    g.shape.push_back(static_cast<int64_t>(n));
    g.crop_start.push_back(static_cast<int64_t>(start));
    g.crop_size.push_back(static_cast<int64_t>(size));
  }
  ASSIGN_OR_RETURN(g.spacing, ReadDoubles(ds, s, kSourceSpacingField, d));
  ASSIGN_OR_RETURN(g.origin, ReadDoubles(ds, s, kSourceOriginField, d));
  ASSIGN_OR_RETURN(g.direction, ReadDoubles(ds, s, kSourceDirectionField, d));
  const size_t gd = g.spacing.size();
  if (g.origin.size() != gd || g.direction.size() != gd * gd) {
    return Corruption(Where(ds, s) + ": source.spacing, .origin and .direction do not agree in size");
  }
  return std::optional<SourceGrid>(std::move(g));
}

Result<std::optional<DType>> ReadSourceDType(const Dataset& ds, const SampleView& s, const std::string& field) {
  const int f = ds.manifest().FindField(field + kSourceDTypeSuffix);
  if (f < 0 || ds.manifest().fields[f].kind != FieldKind::kString) return std::optional<DType>{};
  ASSIGN_OR_RETURN(const std::string_view name, s.bytes_value(static_cast<size_t>(f)));
  const std::optional<DType> t = ParseDType(name);
  if (!t) return Corruption(Where(ds, s) + ": " + field + ".source_dtype '" + std::string(name) + "' is not a dtype");
  return t;
}

Result<std::vector<uint8_t>> Uncrop(const SourceGrid& g, DType dtype, const Shape& shape,
                                    const std::vector<uint8_t>& array, const std::vector<double>& fill,
                                    Shape* out_shape) {
  RETURN_IF_ERROR(CheckArray(g, dtype, shape, array.size(), g.crop_size));
  Shape full = {shape[0]};
  full.insert(full.end(), g.shape.begin(), g.shape.end());
  const size_t es = DTypeSize(dtype);
  const uint64_t voxels = Count(g.shape);
  std::vector<uint8_t> out(static_cast<size_t>(voxels * static_cast<uint64_t>(shape[0])) * es);
  for (int64_t c = 0; c < shape[0] && voxels > 0; ++c) {
    const double v = FillOf(fill, c);
    uint8_t* dst = out.data() + static_cast<uint64_t>(c) * voxels * es;
    ConvertElements(reinterpret_cast<const uint8_t*>(&v), DType::kF64, dst, dtype, 1);
    for (uint64_t i = 1; i < voxels; ++i) std::memcpy(dst + i * es, dst, es);
  }
  Shape origin = {0};
  origin.insert(origin.end(), g.crop_start.begin(), g.crop_start.end());
  if (!array.empty()) CopyBox(array.data(), shape, Shape(shape.size(), 0), out.data(), full, origin, shape, es);
  *out_shape = full;
  return out;
}

Result<std::vector<uint8_t>> ToSourceGrid(const SourceGrid& g, DType dtype, const Shape& shape,
                                          const std::vector<uint8_t>& array, GridInterp interp,
                                          const std::vector<double>& fill, Shape* out_shape) {
  RETURN_IF_ERROR(CheckArray(g, dtype, shape, array.size(), {}));
  Shape cur = shape;
  if (Shape(shape.begin() + 1, shape.end()) == g.crop_size) return Uncrop(g, dtype, shape, array, fill, out_shape);
  const size_t es = DTypeSize(dtype);
  std::vector<double> v(array.size() / es);
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsDouble(&array[i * es], dtype);
  for (size_t a = 0; a < g.crop_size.size(); ++a) {
    if (cur[a + 1] == g.crop_size[a]) continue;
    if (cur[a + 1] == 0)
      return InvalidArgument("array " + ShapeToString(shape) + " is empty along axis " + std::to_string(a + 1));
    v = ResampleAxis(v, Count(Shape(cur.begin(), cur.begin() + static_cast<long>(a) + 1)), cur[a + 1], g.crop_size[a],
                     Count(cur, a + 2), interp);
    cur[a + 1] = g.crop_size[a];
  }
  std::vector<uint8_t> boxed(v.size() * es);
  ConvertElements(reinterpret_cast<const uint8_t*>(v.data()), DType::kF64, boxed.data(), dtype, v.size());
  return Uncrop(g, dtype, cur, boxed, fill, out_shape);
}

}  // namespace shardify
