// Preprocessing (convert/preprocess/preprocess.h): mixed dtypes, crop, resampling, normalization,
// the per-sample record, and the way back with shardtool export.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "convert/preprocess/intensity_internal.h"
#include "convert/preprocess/preprocess_internal.h"
#include "convert/preprocess/resample_internal.h"
#include "convert/programs/cli.h"
#include "format/elements.h"
#include "tests/convert/convert_fixtures.h"
#include "tools/export.h"

namespace shardify::convert {
namespace {

using namespace testing;
using Fn = std::function<double(int64_t c, int64_t z, int64_t y, int64_t x)>;

// A NIfTI volume [c, d, h, w] of `dtype` with values fn(c, z, y, x).
std::vector<uint8_t> WriteFn(const std::string& path, DType dtype, const Shape& shape, const Fn& fn,
                             const Geometry& g = TestGeometry()) {
  std::vector<double> v;
  for (int64_t c = 0; c < shape[0]; ++c)
    for (int64_t z = 0; z < shape[1]; ++z)
      for (int64_t y = 0; y < shape[2]; ++y)
        for (int64_t x = 0; x < shape[3]; ++x) v.push_back(fn(c, z, y, x));
  std::vector<uint8_t> px(v.size() * DTypeSize(dtype));
  ConvertElements(reinterpret_cast<const uint8_t*>(v.data()), DType::kF64, px.data(), dtype, v.size());
  MakeDirs(std::filesystem::path(path).parent_path());
  REQUIRE(WriteNifti(path, dtype, shape, px, g).ok());
  return px;
}

std::vector<double> AsDoubles(const std::vector<uint8_t>& b, DType t) {
  std::vector<double> v(b.size() / DTypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsDouble(&b[i * DTypeSize(t)], t);
  return v;
}

// An ndarray field of sample i as doubles, whatever its dtype.
std::vector<double> Values(const Readback& rb, uint64_t i, const std::string& field) {
  return AsDoubles(rb.Array(i, field), rb.ds->manifest().fields[rb.Field(field)].dtype);
}

Status Export(const std::string& ds, uint64_t i, const std::string& path, const std::string& field = "",
              bool source_grid = false) {
  tools::ExportOptions o;
  o.field = field;
  o.source_grid = source_grid;
  std::ostringstream out;
  return tools::RunExport(ds, i, path, o, out);
}

// The physical point of continuous index `ijk` (ITK order) of a grid.
std::vector<double> Point(const std::vector<double>& sp, const std::vector<double>& org, const std::vector<double>& dir,
                          const std::vector<double>& ijk) {
  std::vector<double> p = org;
  for (size_t r = 0; r < 3; ++r)
    for (size_t a = 0; a < 3; ++a) p[r] += dir[r * 3 + a] * sp[a] * ijk[a];
  return p;
}

// The continuous index (ITK order) of point p on a grid (direction orthonormal).
std::vector<double> Index(const std::vector<double>& sp, const std::vector<double>& org, const std::vector<double>& dir,
                          const std::vector<double>& p) {
  std::vector<double> ijk(3, 0.0);
  for (size_t a = 0; a < 3; ++a) {
    for (size_t r = 0; r < 3; ++r) ijk[a] += dir[r * 3 + a] * (p[r] - org[r]);
    ijk[a] /= sp[a];
  }
  return ijk;
}

}  // namespace

TEST_CASE("preprocess: mixed dtypes take the smallest dtype holding them all, export gives each source back") {
  TempDir dir;
  const std::vector<std::pair<const char*, DType>> files = {
      {"a.nii", DType::kU8}, {"b.nii", DType::kU16}, {"c.nii", DType::kI16}};
  uint32_t seed = 1;
  for (const auto& [name, dtype] : files) {
    const double big = dtype == DType::kU16 ? 60000 : dtype == DType::kI16 ? -30000 : 200;
    WriteFn(dir / (std::string("src/") + name), dtype, {1, 3, 4, 5}, [&](int64_t, int64_t z, int64_t y, int64_t x) {
      return (z * 20 + y * 5 + x + seed) % 40 == 0 ? big : double((z * 20 + y * 5 + x * seed) % 100);
    });
    ++seed;
  }
  auto r = RunConvert(dir / "src", dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK_THAT(PreprocessingNotes(*r), Catch::Contains("image dtype i32: inputs are u8 (1), u16 (1), i16 (1)"));
  CHECK_THAT(FormatSummary(*r), Catch::Contains("preprocessing: image dtype i32"));
  auto rb = Open(dir / "out");
  CHECK(rb.ds->manifest().fields[rb.Field("image")].dtype == DType::kI32);
  for (uint64_t i = 0; i < files.size(); ++i) {
    const std::string src = dir / (std::string("src/") + files[i].first);
    CHECK(rb.Str(i, "image.source_dtype") == DTypeName(files[i].second));
    CHECK(AsDoubles(rb.Array(i, "image"), DType::kI32) == AsDoubles(ItkVoxels(src), files[i].second));
    const std::string back = dir / ("back" + std::to_string(i) + ".nii");
    REQUIRE(Export(dir / "out", i, back).ok());
    CHECK(ReadBytes(back) == ReadBytes(src));  // the source file, byte for byte
  }
  // The channels of one case may differ too: they stack in a dtype holding both.
  WriteText(
      dir / "nn/dataset.json",
      R"({"channel_names": {"0": "CT", "1": "PET"}, "labels": {"background": 0, "x": 1}, "file_ending": ".nii.gz"})");
  const auto ct = WriteFn(dir / "nn/imagesTr/c_0000.nii.gz", DType::kI16, {1, 2, 3, 4},
                          [](int64_t, int64_t z, int64_t y, int64_t x) { return double(z * 12 + y * 4 + x) - 900; });
  const auto pet = WriteFn(dir / "nn/imagesTr/c_0001.nii.gz", DType::kF32, {1, 2, 3, 4},
                           [](int64_t, int64_t z, int64_t, int64_t x) { return 0.125 * double(z + x); });
  WriteFn(dir / "nn/labelsTr/c.nii.gz", DType::kU8, {1, 2, 3, 4},
          [](int64_t, int64_t, int64_t, int64_t) { return 1.0; });
  auto nn = RunConvert(dir / "nn", dir / "nn_out");
  INFO(nn.status().ToString());
  REQUIRE(nn.ok());
  auto nb = Open(dir / "nn_out");
  CHECK(nb.ds->manifest().fields[nb.Field("image")].dtype == DType::kF32);
  std::vector<double> both = AsDoubles(ct, DType::kI16);
  const std::vector<double> second = AsDoubles(pet, DType::kF32);
  both.insert(both.end(), second.begin(), second.end());
  CHECK(AsDoubles(nb.Array(0, "image"), DType::kF32) == both);

  ConvertOptions forced;
  forced.preprocess.dtype = DType::kF32;
  auto f = RunConvert(dir / "src", dir / "f32", forced);
  REQUIRE(f.ok());
  CHECK_THAT(PreprocessingNotes(*f), Catch::Contains("set by --dtype"));
  auto fb = Open(dir / "f32");
  CHECK(fb.ds->manifest().fields[fb.Field("image")].dtype == DType::kF32);
  REQUIRE(Export(dir / "f32", 1, dir / "f32.nii").ok());
  CHECK(ReadBytes(dir / "f32.nii") == ReadBytes(dir / "src/b.nii"));
}

TEST_CASE("preprocess: a PNG folder mixing 8- and 16-bit files converts to u16 and exports each as it was") {
  TempDir dir;
  std::vector<uint16_t> eight, sixteen;
  for (int i = 0; i < 12; ++i)
    eight.push_back(static_cast<uint16_t>(i * 20)), sixteen.push_back(static_cast<uint16_t>(i * 5000 + 7));
  WriteRawPng(dir / "src/a/eight.png", 4, 3, 0, 8, eight);
  WriteRawPng(dir / "src/a/sixteen.png", 4, 3, 0, 16, sixteen);
  auto r = RunConvert(dir / "src", dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / "out");
  CHECK(rb.ds->manifest().fields[rb.Field("image")].dtype == DType::kU16);
  for (uint64_t i = 0; i < 2; ++i) {
    const std::string path = dir / ("back" + std::to_string(i) + ".png");
    REQUIRE(Export(dir / "out", i, path).ok());
    auto back = ReadImage(path);
    REQUIRE(back.ok());
    const std::vector<uint16_t>& want = i == 0 ? eight : sixteen;
    CHECK(back->info.dtype == (i == 0 ? DType::kU8 : DType::kU16));
    CHECK(AsDoubles(back->pixels, back->info.dtype) == std::vector<double>(want.begin(), want.end()));
  }
}

TEST_CASE("preprocess: resampling keeps the physical extent and places every voxel where its value was") {
  TempDir dir;
  Geometry g = TestGeometry();
  g.spacing = {1.0, 0.75, 1.5};      // x, y, z
  const Shape shape = {1, 5, 7, 9};  // odd sizes: no voxel centre lies halfway between two
  auto ramp = [](int64_t, int64_t z, int64_t y, int64_t x) { return 3.0 * z + 2.0 * y + 1.0 * x + 0.25; };
  WriteFn(dir / "src/images/v.nii", DType::kF32, shape, ramp, g);
  WriteFn(
      dir / "src/masks/v.nii", DType::kU8, shape,
      [](int64_t, int64_t z, int64_t, int64_t x) { return double((z + x) % 3); }, g);
  ConvertOptions o;
  REQUIRE(ParseSpacing("x=0.5,y=1.5,z=1.0", &o.preprocess).ok());
  CHECK(o.preprocess.spacing == std::vector<double>{1.0, 1.5, 0.5});  // array order
  o.preprocess.image_interp = ImageInterp::kLinear;
  o.preprocess.mask_interp = MaskInterp::kNearest;
  auto r = RunConvert(dir / "src", dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / "out");
  const Shape want = {1, 8, 4, 18};  // round(z 5 * 1.5 / 1, y 7 * 0.75 / 1.5, x 9 * 1 / 0.5)
  REQUIRE(rb.ShapeOf(0, "image") == want);
  CHECK(rb.ShapeOf(0, "mask") == want);
  const auto sp = Values(rb, 0, "image.spacing"), org = Values(rb, 0, "image.origin"),
             dir3 = Values(rb, 0, "image.direction");
  CHECK(Values(rb, 0, "source.spacing") == g.spacing);
  CHECK(Values(rb, 0, "source.origin") == g.origin);
  g.direction = Values(rb, 0, "source.direction");  // as read back from the file (float)
  for (size_t a = 0; a < 3; ++a) {                  // same extent; the boxes (outer voxel faces) coincide
    CHECK(sp[a] * double(want[3 - a]) == Approx(g.spacing[a] * double(shape[3 - a])));
    const auto corner = Point(sp, org, dir3, {-0.5, -0.5, -0.5});
    const auto source_corner = Point(g.spacing, g.origin, g.direction, {-0.5, -0.5, -0.5});
    CHECK(corner[a] == Approx(source_corner[a]).margin(1e-9));
  }
  const auto image = AsDoubles(rb.Array(0, "image"), DType::kF32);
  const auto mask = AsDoubles(rb.Array(0, "mask"), DType::kU8);
  int checked = 0;
  for (int64_t z = 0; z < want[1]; ++z)
    for (int64_t y = 0; y < want[2]; ++y)
      for (int64_t x = 0; x < want[3]; ++x) {
        const size_t k = static_cast<size_t>((z * want[2] + y) * want[3] + x);
        const auto c = Index(g.spacing, g.origin, g.direction, Point(sp, org, dir3, {double(x), double(y), double(z)}));
        // Nearest neighbour: the source voxel whose centre is closest.
        const auto nz = int64_t(std::floor(c[2] + 0.5)), nx = int64_t(std::floor(c[0] + 0.5));
        CHECK(mask[k] == double((std::clamp<int64_t>(nz, 0, 4) + std::clamp<int64_t>(nx, 0, 8)) % 3));
        if (c[0] < 0 || c[0] > 8 || c[1] < 0 || c[1] > 6 || c[2] < 0 || c[2] > 4) continue;     // edges clamp
        CHECK(image[k] == Approx(ramp(0, 0, 0, 0) + 3 * c[2] + 2 * c[1] + c[0]).margin(1e-3));  // linear is exact
        ++checked;
      }
  CHECK(checked > 150);
  CHECK(ProvenanceOption(rb.ds->manifest(), "spacing") == "x=0.5,y=1.5,z=1");
  CHECK_THAT(PreprocessingNotes(*r),
             Catch::Contains("resampled: x 1 -> 0.5 mm, y 0.75 -> 1.5 mm, z 1.5 -> 1 mm (given)"));
  CHECK(ProvenanceOption(rb.ds->manifest(), "resample_image") == "linear");
}

TEST_CASE("preprocess: target shapes round half to even as numpy does, absurd spacings fail naming the axis") {
  // A 1 mm MNI-like case at 2 mm: 90.5, 108.5, 90.5 voxels -> 90, 108, 90 (nnU-Net's shape).
  CHECK(*detail::TargetShape({181, 217, 181}, {1, 1, 1}, {2, 2, 2}) == Shape{90, 108, 90});
  CHECK(*detail::TargetShape({5, 7, 9}, {1, 1, 1}, {2, 2, 2}) == Shape{2, 4, 4});
  CHECK(*detail::TargetShape({3, 3, 3}, {1, 1, 1}, {2, 2, 2}) == Shape{2, 2, 2});  // 1.5 -> 2
  CHECK_THAT(detail::TargetShape({4, 4, 4}, {1, 1, 1}, {1, 1e-30, 1}).status().ToString(),
             Catch::Contains("resampling y from 4 voxel(s) of 1 mm to 1e-30 mm makes 4e+30 voxel(s): more than"));
  CHECK_THAT(detail::TargetShape({1, 4, 4}, {1, 1, 1}, {3, 1, 1}).status().ToString(),
             Catch::Contains("resampling z from 1 voxel(s) of 1 mm to 3 mm makes 0.3333 voxel(s): none left"));

  TempDir dir;
  Geometry huge = TestGeometry();
  huge.spacing = {1, 1, 1e19};  // x, y, z
  WriteFn(
      dir / "src/b.nii", DType::kU8, {1, 2, 3, 3}, [](int64_t, int64_t, int64_t, int64_t) { return 1.0; }, huge);
  Geometry one = TestGeometry();
  one.spacing = {1, 1, 1};
  WriteFn(
      dir / "src/a.nii", DType::kU8, {1, 5, 7, 9},
      [](int64_t, int64_t z, int64_t y, int64_t x) { return double(z + y + x); }, one);
  ConvertOptions o;
  o.preprocess.spacing = {2, 2, 2};
  o.skip_errors = true;
  auto r = RunConvert(dir / "src", dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  REQUIRE(r->skipped.size() == 1);
  CHECK_THAT(r->skipped[0].reason, Catch::Contains("b.nii: resampling z from 2 voxel(s) of 1e+19 mm to 2 mm"));
  CHECK(Open(dir / "out").ShapeOf(0, "image") == Shape{1, 2, 4, 4});
}

TEST_CASE("preprocess: cubic resampling is clipped to the input range, per slice along an anisotropic axis") {
  TempDir dir;
  Geometry g = TestGeometry();
  g.spacing = {1, 1, 1};
  const double top[] = {10, 50, 100};  // per z slice: a step from 0 to top[z] along x
  auto step = [&](int64_t, int64_t z, int64_t, int64_t x) { return x < 4 ? 0.0 : top[z]; };
  WriteFn(dir / "iso/v.nii", DType::kF32, {1, 3, 6, 8}, step, g);
  g.spacing = {1, 1, 4};  // z over 3x coarser: in-plane first, each slice on its own
  WriteFn(dir / "aniso/v.nii", DType::kF32, {1, 3, 6, 8}, step, g);

  // Unclipped, the cubic B-spline overshoots the step on both sides.
  const std::vector<float> in = [&] {
    std::vector<float> v;
    for (int64_t z = 0; z < 3; ++z)
      for (int64_t y = 0; y < 6; ++y)
        for (int64_t x = 0; x < 8; ++x) v.push_back(float(step(0, z, y, x)));
    return v;
  }();
  Geometry iso = TestGeometry();
  iso.spacing = {1, 1, 1};
  const detail::Grid from{{3, 6, 8}, iso};
  std::vector<float> raw;
  REQUIRE(
      detail::ResampleFloat(in, 1, from, detail::ResampledGrid(from, {6, 12, 16}), detail::Interpolator::kCubic, &raw)
          .ok());
  CHECK(*std::min_element(raw.begin(), raw.end()) < -1);
  CHECK(*std::max_element(raw.begin(), raw.end()) > 101);

  ConvertOptions o;
  REQUIRE(ParseSpacing("0.5", &o.preprocess).ok());
  auto r = RunConvert(dir / "iso", dir / "iso_out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  const auto v = Values(Open(dir / "iso_out"), 0, "image");
  REQUIRE(v.size() == 6 * 12 * 16);
  CHECK(*std::min_element(v.begin(), v.end()) == 0);
  CHECK(*std::max_element(v.begin(), v.end()) == 100);

  for (const char* spacing : {"x=0.5,y=0.5,z=4", "x=0.5,y=0.5,z=2"}) {  // z kept, z by nearest neighbour
    REQUIRE(ParseSpacing(spacing, &o.preprocess).ok());
    auto a = RunConvert(dir / "aniso", dir / "aniso_out", o);
    INFO(spacing << ": " << a.status().ToString());
    REQUIRE(a.ok());
    auto rb = Open(dir / "aniso_out");
    const Shape shape = rb.ShapeOf(0, "image");
    const auto w = Values(rb, 0, "image");
    const int64_t plane = shape[2] * shape[3];
    for (int64_t z = 0; z < shape[1]; ++z) {
      const auto first = w.begin() + z * plane;
      const double want = top[z * 3 / shape[1]];  // the nearest source slice's step
      CHECK(*std::min_element(first, first + plane) == 0);
      CHECK(*std::max_element(first, first + plane) == want);
    }
    std::filesystem::remove_all(dir / "aniso_out");
  }
}

TEST_CASE("preprocess: --spacing names its axes x, y, z, takes one value for all, refuses a guess") {
  PreprocessOptions p;
  REQUIRE(ParseSpacing("x=0.5,z=2,y=1", &p).ok());
  CHECK(p.spacing == std::vector<double>{2, 1, 0.5});  // array order: z, y, x
  REQUIRE(ParseSpacing("1.5", &p).ok());
  CHECK(p.spacing == std::vector<double>{1.5, 1.5, 1.5});
  REQUIRE(ParseSpacing("2,2,2", &p).ok());
  CHECK(p.spacing == std::vector<double>{2, 2, 2});
  CHECK_THAT(ParseSpacing("1.5,0.8,0.8", &p).ToString(),
             Catch::Contains("name the axes, e.g. x=0.8,y=0.8,z=1.5 if you mean z,y,x"));
  CHECK_THAT(ParseSpacing("x=1,x=2,z=1", &p).ToString(), Catch::Contains("'x=2' does not name a new axis"));
  CHECK_THAT(ParseSpacing("x=1,y=1", &p).ToString(), Catch::Contains("names 2 axes"));
  CHECK_THAT(ParseSpacing("x=1,y=1,w=1", &p).ToString(), Catch::Contains("'w=1' does not name a new axis"));
  CHECK_THAT(ParseSpacing("x=1,y=-1,z=1", &p).ToString(), Catch::Contains("'-1' is not a positive spacing"));
  for (const char* bad : {"1e-30,1,1", "x=1,y=1,z=1e7", "1e-7"}) {
    auto c = ParseCommandLine({"src", "-o", "dst", "--spacing", bad});  // a usage error: exit code 2
    REQUIRE_FALSE(c.ok());
    CHECK_THAT(c.status().ToString(), Catch::Contains("outside 1e-06..1e+06 mm"));
  }
}

TEST_CASE("preprocess: auto spacing is the median, with nnU-Net's rule for an anisotropic axis") {
  TempDir dir;
  const double zs[] = {4.0, 5.0, 6.0, 5.0, 4.5};
  for (int i = 0; i < 5; ++i) {
    Geometry g = TestGeometry();
    g.spacing = {0.75 + 0.125 * i, 0.75, zs[i]};  // exact in the file's float32
    WriteFn(
        dir / ("src/v" + std::to_string(i) + ".nii"), DType::kU8, {1, 3, 12, 12},
        [](int64_t, int64_t z, int64_t y, int64_t x) { return double(z + y + x); }, g);
  }
  ConvertOptions o;
  REQUIRE(ParseSpacing("auto", &o.preprocess).ok());
  o.dry_run = true;
  auto r = RunConvert(dir / "src", dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  // Median spacing (z 5, y 0.75, x 1.0); z is over 3x coarser with over 3x fewer voxels, so
  // z takes the 10th percentile of its spacings: 4.0 + 0.4 * (4.5 - 4.0) = 4.2.
  CHECK_THAT(PreprocessingNotes(*r),
             Catch::Contains("resampled: x 0.75..1.25 -> 1 mm, y 0.75 -> 0.75 mm, z 4..6 -> 4.2 mm (auto: "
                             "median of 5 case(s); anisotropic, z at the 10th percentile of its spacings)"));
  CHECK(detail::Percentile({1, 2, 3, 4}, 50) == 2.5);
  CHECK(detail::Percentile({5, 1, 3}, 10) == Approx(1.4));
}

TEST_CASE("preprocess: crop then uncrop on the source grid is the identity, the crop box spans every channel") {
  TempDir dir;
  auto inside = [](int64_t z, int64_t y, int64_t x) { return z >= 2 && z < 6 && y >= 3 && y < 8 && x >= 1 && x < 9; };
  WriteFn(dir / "src/images/v.nii", DType::kI16, {1, 8, 10, 12}, [&](int64_t, int64_t z, int64_t y, int64_t x) {
    return inside(z, y, x) ? double(z * 100 + y * 10 + x - 300) : 0.0;
  });
  WriteFn(dir / "src/masks/v.nii", DType::kU8, {1, 8, 10, 12},
          [&](int64_t, int64_t z, int64_t y, int64_t x) { return inside(z, y, x) && x > 4 ? 2.0 : 0.0; });
  ConvertOptions o;
  o.preprocess.crop_nonzero = true;
  auto r = RunConvert(dir / "src", dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / "out");
  CHECK(rb.ShapeOf(0, "image") == Shape{1, 4, 5, 8});
  CHECK(Values(rb, 0, "source.crop_box") == std::vector<double>{2, 3, 1, 4, 5, 8});
  CHECK(Values(rb, 0, "source.shape") == std::vector<double>{8, 10, 12});
  const Geometry g = TestGeometry();
  const auto moved = Point(g.spacing, g.origin, g.direction, {1, 3, 2});  // ITK order of (z 2, y 3, x 1)
  const auto origin = Values(rb, 0, "image.origin");
  for (size_t a = 0; a < 3; ++a) CHECK(origin[a] == Approx(moved[a]).margin(1e-9));
  for (const char* field : {"image", "mask"}) {
    const std::string back = dir / (std::string(field) + ".nii");
    REQUIRE(Export(dir / "out", 0, back, field, true).ok());
    CHECK(ReadBytes(back) == ReadBytes(dir / (std::string("src/") + field + "s/v.nii")));
  }
  // Two channels: the box covers the nonzero voxels of both.
  MakeDirs(dir / "nn/imagesTr");
  WriteText(
      dir / "nn/dataset.json",
      R"({"channel_names": {"0": "T1", "1": "T2"}, "labels": {"background": 0, "x": 1}, "file_ending": ".nii.gz"})");
  WriteFn(dir / "nn/imagesTr/c_0000.nii.gz", DType::kU8, {1, 6, 6, 6},
          [](int64_t, int64_t z, int64_t y, int64_t x) { return z == 1 && y == 2 && x == 3 ? 5.0 : 0.0; });
  WriteFn(dir / "nn/imagesTr/c_0001.nii.gz", DType::kU8, {1, 6, 6, 6},
          [](int64_t, int64_t z, int64_t y, int64_t x) { return z == 4 && y == 1 && x == 4 ? 5.0 : 0.0; });
  WriteFn(dir / "nn/labelsTr/c.nii.gz", DType::kU8, {1, 6, 6, 6},
          [](int64_t, int64_t, int64_t, int64_t) { return 0.0; });
  auto n = RunConvert(dir / "nn", dir / "nn_out", o);
  INFO(n.status().ToString());
  REQUIRE(n.ok());
  CHECK(Values(Open(dir / "nn_out"), 0, "source.crop_box") == std::vector<double>{1, 1, 3, 4, 2, 2});
}

TEST_CASE("preprocess: holes of the nonzero region are filled through one axis at a time, as scipy fills them") {
  // 2D: a ring whose corner is open diagonally only; the inside stays enclosed.
  std::vector<uint8_t> ring = {0, 1, 1, 1, 1,  //
                               1, 0, 0, 0, 1,  //
                               1, 0, 1, 0, 1,  //
                               1, 0, 0, 0, 1,  //
                               1, 1, 1, 1, 1};
  detail::FillHoles(&ring, {5, 5});
  CHECK(ring == std::vector<uint8_t>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  // 3D: a hollow cube is filled; with a tunnel through one face, nothing is.
  auto cube = [](bool tunnel) {
    std::vector<uint8_t> f(5 * 6 * 7);
    for (int z = 0; z < 5; ++z)
      for (int y = 0; y < 6; ++y)
        for (int x = 0; x < 7; ++x) {
          const bool shell = z == 0 || z == 4 || y == 0 || y == 5 || x == 0 || x == 6;
          f[(z * 6 + y) * 7 + x] = shell && !(tunnel && z == 2 && y == 3 && x == 0);
        }
    return f;
  };
  std::vector<uint8_t> closed = cube(false), open = cube(true);
  const std::vector<uint8_t> open_before = open;
  detail::FillHoles(&closed, {5, 6, 7});
  detail::FillHoles(&open, {5, 6, 7});
  CHECK(std::count(closed.begin(), closed.end(), 1) == 5 * 6 * 7);
  CHECK(open == open_before);
}

TEST_CASE("preprocess: zscore and ct statistics equal a direct computation, stored values are normalized") {
  const uint64_t draws = 500;  // per case: 1,000 over the two training cases
  TempDir dir;
  const std::string src = dir / "src";
  WriteText(src + "/dataset.json",
            R"({"channel_names": {"0": "CT"}, "labels": {"background": 0, "organ": 1}, "file_ending": ".nii.gz"})");
  auto value = [](int64_t c, int64_t z, int64_t y, int64_t x) {
    return double((z * 37 + y * 11 + x * 5 + c * 3) % 97) - 40;
  };
  auto fg = [](int64_t z, int64_t y, int64_t x) { return (z + y + x) % 4 == 0 || (z == 1 && y == 1); };
  std::vector<double> foreground;  // numpy: RandomState(1234).choice(case_foreground, 500) per case
  for (int k = 0; k < 2; ++k) {
    const std::string name = "case_" + std::to_string(k);
    const Shape shape = {1, 4 + k, 5, 6};
    auto fn = [&](int64_t c, int64_t z, int64_t y, int64_t x) { return value(c + k, z, y, x); };
    WriteFn(src + "/imagesTr/" + name + "_0000.nii.gz", DType::kI16, shape, fn);
    WriteFn(src + "/labelsTr/" + name + ".nii.gz", DType::kU8, shape,
            [&](int64_t, int64_t z, int64_t y, int64_t x) { return fg(z, y, x) ? 1.0 : 0.0; });
    std::vector<double> own;
    for (int64_t z = 0; z < shape[1]; ++z)
      for (int64_t y = 0; y < 5; ++y)
        for (int64_t x = 0; x < 6; ++x)
          if (fg(z, y, x)) own.push_back(fn(0, z, y, x));
    detail::LegacyChoice choice(1234);
    for (uint64_t d = 0; d < draws; ++d) foreground.push_back(own[choice.Next(own.size())]);
  }
  WriteFn(src + "/imagesTs/case_9_0000.nii.gz", DType::kI16, {1, 3, 5, 6}, value);  // test: no mask, not counted
  // The statistics, computed here without the library: sorted values, numpy's linear percentiles.
  std::sort(foreground.begin(), foreground.end());
  auto pct = [&](double p) {
    const double h = (double(foreground.size()) - 1) * p / 100;
    const size_t lo = size_t(h);
    return foreground[lo] + (h - double(lo)) * (foreground[std::min(lo + 1, foreground.size() - 1)] - foreground[lo]);
  };
  double mean = 0, var = 0;
  for (double v : foreground) mean += v / double(foreground.size());
  for (double v : foreground) var += (v - mean) * (v - mean) / double(foreground.size());
  const std::vector<double> want = {pct(0.5), pct(99.5), mean, std::sqrt(var)};
  ConvertOptions o;
  o.preprocess.normalize = {Normalization::kCt};
  o.preprocess.intensity_samples = 2 * draws;
  o.preprocess.dtype = DType::kF16;
  auto r = RunConvert(src, dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK_THAT(PreprocessingNotes(*r), Catch::Contains("ct statistics of channel 0 over 2 training case(s)"));
  auto rb = Open(dir / "out");
  CHECK(rb.ds->manifest().fields[rb.Field("image")].dtype == DType::kF16);
  CHECK_THAT(ProvenanceOption(rb.ds->manifest(), "ct_statistics"), Catch::StartsWith("[{\"channel\":0,\"clip\":["));
  for (uint64_t i = 0; i < 3; ++i) {
    const auto got = Values(rb, i, "image.normalization");
    REQUIRE(got.size() == 4);
    for (size_t k = 0; k < 4; ++k) CHECK(got[k] == Approx(want[k]).epsilon(1e-12));
    const auto stored = AsDoubles(rb.Array(i, "image"), DType::kF16);
    const auto source =
        AsDoubles(ItkVoxels(src + (i < 2 ? "/imagesTr/case_" + std::to_string(i) : std::string("/imagesTs/case_9")) +
                            "_0000.nii.gz"),
                  DType::kI16);
    REQUIRE(stored.size() == source.size());
    for (size_t k = 0; k < stored.size(); ++k) {
      const double expect = (std::clamp(source[k], want[0], want[1]) - want[2]) / want[3];
      CHECK(stored[k] == Approx(expect).margin(2e-3 * std::max(1.0, std::fabs(expect))));  // f16
    }
  }
  // zscore: per case over all voxels.
  ConvertOptions z;
  z.preprocess.normalize = {Normalization::kZScore};
  auto zr = RunConvert(src, dir / "z", z);
  REQUIRE(zr.ok());
  auto zb = Open(dir / "z");
  const auto source = AsDoubles(ItkVoxels(src + "/imagesTr/case_1_0000.nii.gz"), DType::kI16);
  double m = 0, v = 0;
  for (double x : source) m += x / double(source.size());
  for (double x : source) v += (x - m) * (x - m) / double(source.size());
  const auto got = Values(zb, 1, "image.normalization");
  CHECK(got[2] == Approx(m).epsilon(1e-12));
  CHECK(got[3] == Approx(std::sqrt(v)).epsilon(1e-12));
  CHECK(std::isinf(got[0]));
  const auto stored = AsDoubles(zb.Array(1, "image"), DType::kF32);
  for (size_t k = 0; k < stored.size(); ++k) CHECK(stored[k] == Approx((source[k] - m) / std::sqrt(v)).margin(1e-5));
}

TEST_CASE(
    "preprocess: NaN and infinite voxels fail a normalized case naming file and count, --nan-to-num zeroes them") {
  TempDir dir;
  const std::string src = dir / "src";
  WriteText(
      src + "/dataset.json",
      R"({"channel_names": {"0": "T1", "1": "ADC"}, "labels": {"background": 0, "x": 1}, "file_ending": ".nii"})");
  const Shape shape = {1, 3, 4, 5};
  auto ramp = [](int64_t, int64_t z, int64_t y, int64_t x) { return double(z * 20 + y * 5 + x + 1); };
  for (const char* name : {"a", "b"}) {
    const bool bad = name[0] == 'b';
    WriteFn(src + "/imagesTr/" + name + "_0000.nii", DType::kF32, shape, ramp);
    WriteFn(src + "/imagesTr/" + name + "_0001.nii", DType::kF32, shape,
            [&](int64_t c, int64_t z, int64_t y, int64_t x) {
              if (bad && z == 1 && y == 2) return x < 2 ? NAN : x == 2 ? -INFINITY : 7.0;
              return ramp(c, z, y, x);
            });
    WriteFn(src + "/labelsTr/" + std::string(name) + ".nii", DType::kU8, shape,
            [](int64_t, int64_t z, int64_t, int64_t) { return z == 1 ? 1.0 : 0.0; });
  }
  ConvertOptions z;
  z.preprocess.normalize = {Normalization::kZScore};
  auto r = RunConvert(src, dir / "z", z);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().ToString(), Catch::Contains("imagesTr/b_0001.nii: 2 NaN and 1 infinite voxel(s) of 60; "
                                                    "normalizing or resampling would spread them"));
  CHECK_THAT(r.status().ToString(), Catch::Contains("(--nan-to-num makes them 0)"));
  CHECK_FALSE(std::filesystem::exists(dir / "z/manifest.sfm"));

  auto plain = RunConvert(src, dir / "plain");  // stored as they are: export gives the file back
  REQUIRE(plain.ok());
  CHECK(std::isnan(Values(Open(dir / "plain"), 1, "image")[60 + 30]));

  z.preprocess.nan_to_num = true;
  r = RunConvert(src, dir / "zero", z);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK_THAT(PreprocessingNotes(*r), Catch::Contains("NaN and infinite image voxels become 0 (--nan-to-num)"));
  auto rb = Open(dir / "zero");
  CHECK(ProvenanceOption(rb.ds->manifest(), "nan_to_num") == "true");
  const auto norm = Values(rb, 1, "image.normalization");  // channel 1: the mean with three zeros
  double sum = 0;
  for (int64_t k = 0; k < 60; ++k) {
    const int64_t zz = k / 20, y = k / 5 % 4, x = k % 5;
    sum += zz == 1 && y == 2 ? (x < 3 ? 0.0 : 7.0) : ramp(0, zz, y, x);
  }
  CHECK(norm[6] == Approx(sum / 60).epsilon(1e-12));
  for (double v : Values(rb, 1, "image")) CHECK(std::isfinite(v));

  // ct: a case that fails adds nothing to the statistics; skipped, the other one converts.
  ConvertOptions ct;
  ct.preprocess.normalize = {Normalization::kCt};
  ct.preprocess.intensity_samples = 1000;
  ct.skip_errors = true;
  r = RunConvert(src, dir / "ct", ct);
  REQUIRE(r.ok());
  REQUIRE(r->skipped.size() == 1);
  CHECK_THAT(r->skipped[0].reason, Catch::Contains("b_0001.nii: 2 NaN"));
  CHECK_THAT(PreprocessingNotes(*r),
             Catch::Contains("ct statistics of channel 1 over 1 training case(s): clip [21, 40]"));
}

TEST_CASE("preprocess: ct draws as many foreground values from every case as numpy's choice, bad options fail") {
  // numpy: RandomState(1234).choice(n, 3) for n = 3, 2^32 and 2^33 + 12345.
  for (const auto& [n, want] : std::vector<std::pair<uint64_t, std::vector<uint64_t>>>{
           {3, {2, 1, 0}},
           {uint64_t{1} << 32, {822569775, 2137449171, 2671936806}},
           {(uint64_t{1} << 33) + 12345, {2629000564, 3312965625, 682106748}}}) {
    detail::LegacyChoice choice(1234);
    for (uint64_t w : want) CHECK(choice.Next(n) == w);
  }
  std::vector<uint8_t> image(20), mask(20, 0);
  for (int i = 0; i < 20; ++i) image[i] = uint8_t(i * 3), mask[i] = i % 2;  // foreground values 3, 9, ..., 57
  using W = std::vector<std::pair<double, uint64_t>>;
  auto weighted = [](const detail::ForegroundSample& s) {
    W out;
    for (const auto& w : s.channels.at(0)) out.emplace_back(w.value, w.count);
    return out;
  };
  // RandomState(1234).choice(10, 4) = [3, 6, 5, 4]: foreground values 21, 39, 33, 27.
  auto s = detail::SampleForeground(image.data(), DType::kU8, {1, 4, 5}, mask.data(), DType::kU8, 1, 4);
  CHECK(weighted(s) == W{{21, 1}, {27, 1}, {33, 1}, {39, 1}});
  // choice(10, 12) = [3, 6, 5, 4, 8, 9, 1, 7, 9, 6, 8, 0]: with replacement, 12 of 10 voxels.
  s = detail::SampleForeground(image.data(), DType::kU8, {1, 4, 5}, mask.data(), DType::kU8, 1, 12);
  CHECK(weighted(s) == W{{3, 1}, {9, 1}, {21, 1}, {27, 1}, {33, 1}, {39, 2}, {45, 1}, {51, 2}, {57, 2}});
  // A case of 2 foreground voxels weighs as much as one of 10: 12 draws each.
  std::vector<uint8_t> small_mask(20, 0);
  small_mask[0] = small_mask[19] = 1;
  auto small = detail::SampleForeground(image.data(), DType::kU8, {1, 4, 5}, small_mask.data(), DType::kU8, 1, 12);
  uint64_t drawn = 0;
  for (const auto& w : small.channels[0]) drawn += w.count;
  CHECK(drawn == 12);
  auto merged = detail::MergeForeground({s, small}, 1);
  REQUIRE(merged.ok());
  double sum = 0;  // the 24 values, numpy's mean
  for (const auto* x : {&s, &small})
    for (const auto& w : x->channels[0]) sum += w.value * double(w.count);
  CHECK((*merged)[0].mean == Approx(sum / 24).epsilon(1e-15));
  // numpy over the 24 values: percentiles 0.5 and 99.5, mean and std.
  CHECK((*merged)[0].percentile_00_5 == 0);
  CHECK((*merged)[0].percentile_99_5 == 57);
  CHECK((*merged)[0].mean == 37);
  CHECK((*merged)[0].std == Approx(22.594247055390007).epsilon(1e-14));
  CHECK((*merged)[0].min == 0);
  CHECK((*merged)[0].max == 57);
  CHECK((*merged)[0].norm().clip_high == 57);

  TempDir dir;
  WriteVolume(dir / "src/v.nii.gz", DType::kU8, 3, 4, 5, 1);
  ConvertOptions ct;
  ct.preprocess.normalize = {Normalization::kCt};
  auto r = RunConvert(dir / "src", dir / "out", ct);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().ToString(), Catch::Contains("--normalize ct needs masks"));
  ConvertOptions bad;
  bad.preprocess.normalize = {Normalization::kZScore};
  bad.preprocess.dtype = DType::kU8;
  r = RunConvert(dir / "src", dir / "out", bad);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().ToString(), Catch::Contains("--dtype must be f16, f32 or f64"));
  PreprocessOptions p;
  CHECK_THAT(ParseSpacing("1,0,1", &p).ToString(), Catch::Contains("not a positive spacing"));
  CHECK_THAT(ParseSpacing("1,1", &p).ToString(), Catch::Contains("2 value(s)"));
  CHECK_THAT(ParseCommandLine({"src", "-o", "dst", "--normalize", "ct", "--dtype", "u8"}).status().ToString(),
             Catch::Contains("--dtype must be f16, f32 or f64"));
  CHECK_THAT(ParseCommandLine({"src", "-o", "dst", "--crop", "box"}).status().ToString(), Catch::Contains("--crop"));
  CHECK_FALSE(ParseNormalize("ct,max").ok());
  ConvertOptions two;
  two.preprocess.spacing = {1, 1};
  r = RunConvert(dir / "src", dir / "out", two);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().ToString(), Catch::Contains("--spacing gives 2 value(s)"));
  WritePng(dir / "png/a/x.png", 1, 4, 4, 1);
  ConvertOptions flat;
  flat.preprocess.spacing = {1, 1, 1};
  r = RunConvert(dir / "png", dir / "out", flat);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().ToString(), Catch::Contains("cannot be resampled"));
}

TEST_CASE("preprocess: --preprocess nnunet sets nnU-Net's options, flags given as well win, names pick schemes") {
  CHECK(*ChannelSchemeOf("CT") == Normalization::kCt);
  CHECK(*ChannelSchemeOf("ct") == Normalization::kCt);
  CHECK(*ChannelSchemeOf("noNorm") == Normalization::kNone);
  CHECK(*ChannelSchemeOf("T2") == Normalization::kZScore);
  CHECK(*ChannelSchemeOf("ZScore") == Normalization::kZScore);
  CHECK_THAT(ChannelSchemeOf("rgb_to_0_1").status().ToString(), Catch::Contains("no counterpart"));
  auto preset = ParseCommandLine({"src", "-o", "dst", "--preprocess", "nnunet"});
  REQUIRE(preset.ok());
  const PreprocessOptions& p = preset->options.preprocess;
  CHECK(p.crop_nonzero);
  CHECK(p.auto_spacing);
  CHECK(p.normalize_by_channel_names);
  CHECK(p.normalize.empty());
  CHECK(p.image_interp == ImageInterp::kCubic);
  CHECK(p.mask_interp == MaskInterp::kLinear);
  CHECK(p.preset == "nnunet");
  auto mixed = ParseCommandLine({"src", "-o", "dst", "--preprocess", "nnunet", "--normalize", "zscore", "--spacing",
                                 "1", "--resample-mask", "nearest"});
  REQUIRE(mixed.ok());
  CHECK_FALSE(mixed->options.preprocess.normalize_by_channel_names);
  CHECK(mixed->options.preprocess.normalize == std::vector<Normalization>{Normalization::kZScore});
  CHECK_FALSE(mixed->options.preprocess.auto_spacing);
  CHECK(mixed->options.preprocess.mask_interp == MaskInterp::kNearest);
  CHECK_FALSE(ParseCommandLine({"src", "-o", "dst", "--preprocess", "nnUNetPlans"}).ok());
}

}  // namespace shardify::convert
