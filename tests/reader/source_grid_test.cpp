// reader/source_grid.h: reading a sample's preprocessing record and mapping its arrays back.
#include "reader/source_grid.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "format/elements.h"
#include "format/writer.h"
#include "tests/common/temp_dir.h"

using namespace shardify;

namespace {

std::vector<uint8_t> I64(const std::vector<int64_t>& v) {
  std::vector<uint8_t> b(v.size() * 8);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

FieldSpec Array(const std::string& name, DType t, Shape shape) {
  FieldSpec f;
  f.name = name;
  f.dtype = t;
  f.shape = std::move(shape);
  return f;
}

// One sample whose record says: source [8, 10, 12], crop box start `start`, size `size`.
void WriteRecord(const std::string& dir, const std::vector<int64_t>& start, const std::vector<int64_t>& size,
                 const std::string& source_dtype = "u8") {
  FieldSpec dtype;
  dtype.name = "image.source_dtype";
  dtype.kind = FieldKind::kString;
  WriterOptions o;
  o.fsync = false;
  auto w = DatasetWriter::Create(dir,
                                 {Array("image", DType::kU16, {1, -1, -1, -1}), Array("source.shape", DType::kI64, {3}),
                                  Array("source.crop_box", DType::kI64, {2, 3}), dtype},
                                 o);
  REQUIRE(w.ok());
  std::vector<int64_t> box = start;
  box.insert(box.end(), size.begin(), size.end());
  SampleInput s;
  s.values = {FieldValue::Array(std::vector<uint8_t>(2 * 4 * 6 * 8, 1), {1, 4, 6, 8}),
              FieldValue::Array(I64({8, 10, 12}), {3}), FieldValue::Array(I64(box), {2, 3}),
              FieldValue::String(source_dtype)};
  REQUIRE((*w)->Append(std::move(s)).ok());
  REQUIRE((*w)->Finish().ok());
}

std::vector<double> AsDoubles(const std::vector<uint8_t>& b, DType t) {
  std::vector<double> v(b.size() / DTypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsDouble(&b[i * DTypeSize(t)], t);
  return v;
}

}  // namespace

TEST_CASE("source grid: the record is read back and a bad one is corruption naming the sample") {
  testing::TempDir dir;
  WriteRecord(dir / "ok", {2, 3, 1}, {4, 3, 8});
  auto ds = Dataset::Open(dir / "ok");
  REQUIRE(ds.ok());
  auto s = (*ds)->Sample(0);
  REQUIRE(s.ok());
  Decoder d;
  auto g = ReadSourceGrid(**ds, *s, d);
  REQUIRE(g.ok());
  REQUIRE(g->has_value());
  CHECK((*g)->shape == Shape{8, 10, 12});
  CHECK((*g)->crop_start == Shape{2, 3, 1});
  CHECK((*g)->crop_size == Shape{4, 3, 8});
  CHECK((*g)->spacing.empty());
  auto t = ReadSourceDType(**ds, *s, "image");
  REQUIRE(t.ok());
  CHECK(*t == DType::kU8);
  WriteRecord(dir / "bad", {2, 3, 5}, {4, 3, 8});  // x: 5 + 8 > 12
  auto bad = Dataset::Open(dir / "bad");
  REQUIRE(bad.ok());
  auto b = (*bad)->Sample(0);
  REQUIRE(b.ok());
  auto r = ReadSourceGrid(**bad, *b, d);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kCorruption);
  CHECK_THAT(r.status().ToString(), Catch::Contains("sample 0") && Catch::Contains("source.crop_box axis 2"));
  WriteRecord(dir / "name", {0, 0, 0}, {8, 10, 12}, "u9");
  auto n = Dataset::Open(dir / "name");
  REQUIRE(n.ok());
  CHECK_FALSE(ReadSourceDType(**n, *(*n)->Sample(0), "image").ok());
}

TEST_CASE("source grid: arrays go back to the crop box by voxel centres, then into the source shape") {
  SourceGrid g;
  g.shape = {5, 6, 7};
  g.crop_start = {1, 2, 0};
  g.crop_size = {3, 2, 7};
  // Stored: [1, 3, 4, 7] u8, y upsampled 2 -> 4: stored y j sits at crop y (j + 0.5) / 2 - 0.5.
  const Shape stored = {1, 3, 4, 7};
  std::vector<uint8_t> a(3 * 4 * 7);
  for (size_t k = 0; k < a.size(); ++k) a[k] = static_cast<uint8_t>(10 + (k / 7) % 4 * 20 + k % 7);  // 20 * y + x + 10
  Shape out_shape;
  auto near = ToSourceGrid(g, DType::kU8, stored, a, GridInterp::kNearest, {0}, &out_shape);
  REQUIRE(near.ok());
  CHECK(out_shape == Shape{1, 5, 6, 7});
  auto lin = ToSourceGrid(g, DType::kU8, stored, a, GridInterp::kLinear, {7}, &out_shape);
  REQUIRE(lin.ok());
  for (int64_t z = 0; z < 5; ++z)
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t x = 0; x < 7; ++x) {
        const size_t k = static_cast<size_t>((z * 6 + y) * 7 + x);
        const bool in = z >= 1 && z < 4 && y >= 2 && y < 4;
        if (!in) {
          CHECK((*near)[k] == 0);
          CHECK((*lin)[k] == 7);
          continue;
        }
        // Crop-box y c (0 or 1) samples stored y at (c + 0.5) * 4 / 2 - 0.5 = 0.5 or 2.5.
        const double sy = (double(y - 2) + 0.5) * 2 - 0.5;
        CHECK((*near)[k] == 10 + 20 * int(std::floor(sy + 0.5)) + x);  // ties go up
        CHECK((*lin)[k] == std::lround(10 + 20 * sy + x));
      }
  // Only placement: already at the crop box size.
  auto placed = Uncrop(g, DType::kU8, {1, 3, 2, 7}, std::vector<uint8_t>(42, 9), {1}, &out_shape);
  REQUIRE(placed.ok());
  CHECK(std::count(placed->begin(), placed->end(), 9) == 42);
  CHECK(std::count(placed->begin(), placed->end(), 1) == 5 * 6 * 7 - 42);
  CHECK_FALSE(Uncrop(g, DType::kU8, {1, 3, 3, 7}, std::vector<uint8_t>(63, 9), {1}, &out_shape).ok());
  // Per-channel fill in a float array.
  std::vector<uint8_t> f(2 * 42 * 4);
  auto two = Uncrop(g, DType::kF32, {2, 3, 2, 7}, f, {-1.5, 2.5}, &out_shape);
  REQUIRE(two.ok());
  const auto v = AsDoubles(*two, DType::kF32);
  CHECK(v.front() == -1.5);
  CHECK(v.back() == 2.5);
}
