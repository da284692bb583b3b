// Where the converter must compute what nnU-Net's readers and scipy compute, to the bit or
// not at all: NIfTI scaling (convert/decode/nifti.cpp ScaleImage), scipy's linear zoom and
// nearest-neighbour ties (convert/preprocess/zoom.cpp), and the reason given when no training case can
// be read. python/tests/test_nnunet_parity.py compares whole datasets with a reference of
// nnU-Net; these pin the pieces.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>

#include "convert/decode/image_io.h"
#include "convert/preprocess/preprocess_internal.h"
#include "convert/preprocess/resample_internal.h"
#include "format/elements.h"
#include "media/nifti.h"
#include "tests/convert/convert_fixtures.h"

namespace shardify::convert {
namespace {

using namespace testing;

// A .nii volume [1, 2, 3, 4] of `dtype` holding 0, 1, 2, ... with the given scaling.
std::string ScaledVolume(const std::string& path, DType dtype, float slope, float inter) {
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  std::vector<uint8_t> px(v.size() * DTypeSize(dtype));
  ConvertElements(reinterpret_cast<const uint8_t*>(v.data()), DType::kF64, px.data(), dtype, v.size());
  MakeDirs(std::filesystem::path(path).parent_path());
  REQUIRE(WriteNifti(path, dtype, {1, 2, 3, 4}, px, TestGeometry()).ok());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(112);  // scl_slope, scl_inter: NIfTI-1, little-endian
  f.write(reinterpret_cast<const char*>(&slope), 4);
  f.write(reinterpret_cast<const char*>(&inter), 4);
  REQUIRE(f.good());
  return path;
}

// Element i of stored bytes of `dtype`, as a double.
double At(const std::vector<uint8_t>& bytes, DType dtype, size_t i) {
  return ElementAsDouble(bytes.data() + i * DTypeSize(dtype), dtype);
}

std::string Lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

std::vector<float> Floats(const DecodedImage& d) {
  REQUIRE(d.info.dtype == DType::kF32);
  std::vector<float> v(d.pixels.size() / 4);
  std::memcpy(v.data(), d.pixels.data(), d.pixels.size());
  return v;
}

TEST_CASE("fidelity: NIfTI scaling gives the values nibabel and ITK read, the header then says none") {
  TempDir dir;
  const std::string u16 = ScaledVolume(dir / "u16.nii", DType::kU16, 1.0f, -1024.0f);
  auto d = ReadImage(u16);
  REQUIRE(d.ok());
  CHECK(d->info.dtype == DType::kU16);  // as stored, until asked
  CHECK(d->info.scaling.applies());
  REQUIRE(ScaleImage(u16, &*d).ok());
  const std::vector<float> v = Floats(*d);
  CHECK(v[0] == -1024.0f);
  CHECK(v[23] == -1001.0f);
  auto header = media::ParseNiftiHeader(d->nifti_header.data(), d->nifti_header.size());
  REQUIRE(header.ok());
  CHECK(header->scl_slope == 0);
  CHECK(header->scl_inter == 0);
  CHECK(header->datatype == media::NiftiDatatypeOf(DType::kF32));
  auto info = ReadImageInfo(u16);
  REQUIRE(info.ok());
  REQUIRE(ScaleInfo(u16, &*info).ok());
  CHECK(info->dtype == DType::kF32);

  // A float slope: stored * slope + inter in double, then float32 (nibabel's get_fdata, cast).
  const std::string half = ScaledVolume(dir / "half.nii", DType::kI16, 0.1f, 0.3f);
  d = ReadImage(half);
  REQUIRE(ScaleImage(half, &*d).ok());
  CHECK(Floats(*d)[7] == static_cast<float>(7 * double(0.1f) + double(0.3f)));

  // No scaling: slope 0 (the standard's none), NaN (none to nibabel and ITK), or (1, 0).
  for (float slope : {0.0f, NAN, 1.0f}) {
    const std::string p = ScaledVolume(dir / "none.nii", DType::kI16, slope, 0.0f);
    d = ReadImage(p);
    REQUIRE(ScaleImage(p, &*d).ok());
    CHECK(d->info.dtype == DType::kI16);
  }
  // Scalings the readers disagree on are refused, naming the file.
  for (auto [slope, inter] : {std::pair<float, float>{INFINITY, 0}, {1, NAN}, {2, INFINITY}, {1e-30f, 0}}) {
    const std::string p = ScaledVolume(dir / "bad.nii", DType::kI16, slope, inter);
    d = ReadImage(p);
    const Status s = ScaleImage(p, &*d);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.ToString(), Catch::Contains("bad.nii") && Catch::Contains("readers disagree"));
  }
}

TEST_CASE("fidelity: values are scaled where preprocessing or --dtype interprets them, stored as they are otherwise") {
  TempDir dir;
  ScaledVolume(dir / "src/a.nii", DType::kU16, 1.0f, -1024.0f);
  auto plain = RunConvert(dir / "src", dir / "plain");
  REQUIRE(plain.ok());
  Readback rb = Open(dir / "plain");
  CHECK(rb.ds->manifest().fields[static_cast<size_t>(rb.Field("image"))].dtype == DType::kU16);
  CHECK(At(rb.Array(0, "image"), DType::kU16, 5) == 5);
  ConvertOptions typed;
  typed.preprocess.dtype = DType::kI16;
  auto r = RunConvert(dir / "src", dir / "typed", typed);
  REQUIRE(r.ok());
  CHECK_THAT(Lines(r->preprocessing), Catch::Contains("scl_slope/scl_inter applied to the voxels of 1 case(s)"));
  rb = Open(dir / "typed");
  CHECK(At(rb.Array(0, "image"), DType::kI16, 5) == -1019);
}

TEST_CASE("fidelity: nearest neighbour along an axis rounds exact halves up, as scipy's map_coordinates") {
  // 6 -> 3 slices: coordinates 0.5, 2.5, 4.5, each exactly between two slices.
  CHECK(detail::NearestSource(0, 6, 3) == 1);
  CHECK(detail::NearestSource(1, 6, 3) == 3);
  CHECK(detail::NearestSource(2, 6, 3) == 5);
  // 2 -> 4: coordinates -0.25, 0.25, 0.75, 1.25 (clamped to the axis).
  CHECK(detail::NearestSource(0, 2, 4) == 0);
  CHECK(detail::NearestSource(3, 2, 4) == 1);
  std::vector<uint8_t> out;
  const uint8_t in[6] = {10, 11, 12, 13, 14, 15};
  detail::NearestAlongAxis(in, 1, 1, {6, 1, 1}, 0, 3, &out);
  CHECK(out == std::vector<uint8_t>{11, 13, 15});
}

TEST_CASE("fidelity: linear zoom of an indicator lands exactly on 0.5 where scipy's does") {
  // 4 -> 2 along z: each output voxel halfway between two; a label on one of them gives
  // exactly 0.5, which the >= 0.5 rule keeps.
  const std::vector<double> in = {1, 0, 0, 1};
  std::vector<double> out;
  detail::ZoomLinear(in, {4, 1, 1}, {2, 1, 1}, {0, 1, 2}, &out);
  CHECK(out == std::vector<double>{0.5, 0.5});
  // Unchanged axes keep their voxels exactly, whatever the order the axes are taken in.
  std::vector<double> cube(2 * 3 * 4);
  for (size_t i = 0; i < cube.size(); ++i) cube[i] = static_cast<double>(i % 3 == 0);
  for (const std::array<int, 3>& order : {std::array<int, 3>{0, 1, 2}, {2, 0, 1}, {1, 2, 0}}) {
    detail::ZoomLinear(cube, {2, 3, 4}, {2, 3, 4}, order, &out);
    CHECK(out == cube);
  }
}

TEST_CASE("fidelity: when no training case can be read, --preprocess nnunet says why the first one failed") {
  TempDir dir;
  for (int i = 0; i < 2; ++i) {
    WriteVolume(dir / ("src/images/c" + std::to_string(i) + ".nii"), DType::kI16, 4, 5, 6, i + 1);
    WriteLabels(dir / ("src/masks/c" + std::to_string(i) + ".nii"), 4, 5, 7, i + 1);  // 7 wide: not the image
  }
  ConvertOptions o;
  REQUIRE(ApplyPreset("nnunet", {}, &o.preprocess).ok());
  auto r = RunConvert(dir / "src", dir / "out", o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().ToString(), Catch::Contains("c0") && Catch::Contains("has spatial shape"));
  CHECK_THAT(r.status().ToString(), !Catch::Contains("no readable training case"));
}

}  // namespace
}  // namespace shardify::convert
