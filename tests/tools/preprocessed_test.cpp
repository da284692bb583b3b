// shardtool export of preprocessed data: source headers retyped for another dtype, headers
// that no longer fit, half floats, source dtypes and the source grid.
#include <catch2/catch.hpp>
#include <cstring>
#include <sstream>

#include "format/elements.h"
#include "format/writer.h"
#include "media/nifti.h"
#include "tests/tools/fixtures.h"
#include "tools/export.h"

namespace shardify::tools {
namespace {

using test::TempDir;

FieldSpec Spec(const std::string& name, FieldKind kind, DType dtype, Shape shape, const std::string& role) {
  return test::Spec(name, kind, dtype, std::move(shape), {{"role", role}});
}

void Write(const std::string& dir, std::vector<FieldSpec> fields, std::vector<FieldValue> values) {
  WriterOptions o;
  o.fsync = false;
  auto w = DatasetWriter::Create(dir, std::move(fields), o);
  REQUIRE(w.ok());
  SampleInput s;
  s.values = std::move(values);
  REQUIRE((*w)->Append(std::move(s)).ok());
  REQUIRE((*w)->Finish().ok());
}

Status Export(const std::string& dir, const std::string& path, const std::string& field, bool source_grid = false) {
  ExportOptions o;
  o.field = field;
  o.source_grid = source_grid;
  std::ostringstream out;
  return RunExport(dir, 0, path, o, out);
}

std::vector<uint8_t> I64(const std::vector<int64_t>& v) {
  std::vector<uint8_t> b(v.size() * 8);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST_CASE("tools: a mask on the source grid gets the source image's header, retyped, and overlays it", "[tools]") {
  const test::NiftiSource src = test::ReadNiftiSource(test::kNiftiPath);  // i16 [1, 62, 128, 128]
  TempDir tmp;
  std::vector<uint8_t> mask(62 * 128 * 128);
  for (size_t k = 0; k < mask.size(); ++k) mask[k] = static_cast<uint8_t>(k % 3);
  Write(tmp / "pred",
        {Spec("mask", FieldKind::kNdarray, DType::kU8, {1, -1, -1, -1}, "mask"),
         Spec("mask.nifti_header", FieldKind::kBytes, DType::kU8, {}, "nifti_header")},
        {FieldValue::Array(mask, src.shape), FieldValue::Bytes(src.header)});
  REQUIRE(Export(tmp / "pred", tmp / "m.nii", "mask").ok());
  const std::vector<uint8_t> file = test::ReadFile(tmp / "m.nii");
  REQUIRE(file.size() == 352 + mask.size());
  auto h = media::ParseStoredNiftiHeader(file.data(), 348);
  REQUIRE(h.ok());
  CHECK(h->datatype == 2);
  CHECK(h->bitpix == 8);
  CHECK(h->scl_slope == 0);
  // Dims, pixdim, qform, sform and their codes: the source's bytes.
  CHECK(std::equal(file.begin() + 40, file.begin() + 70, src.header.begin() + 40));
  CHECK(std::equal(file.begin() + 76, file.begin() + 108, src.header.begin() + 76));
  CHECK(std::equal(file.begin() + 252, file.begin() + 348, src.header.begin() + 252));
  CHECK(std::equal(file.begin() + 352, file.end(), mask.begin()));
  // A header that does not fit the array is not used: one is made from the geometry.
  auto fits = media::NiftiHeaderFits(src.header, {1, 31, 128, 128});
  REQUIRE(fits.ok());
  CHECK_FALSE(*fits);
  CHECK(*media::NiftiHeaderFits(src.header, src.shape));
}

TEST_CASE("tools: export writes a promoted field in its source dtype, half floats as f32, cropped arrays back in place",
          "[tools]") {
  const test::NiftiSource src = test::ReadNiftiSource(test::kNiftiPath);
  TempDir tmp;
  // The brain as i32 (promoted from i16), cropped to a box, with its record.
  const int64_t start[3] = {10, 20, 30}, size[3] = {40, 60, 50};
  std::vector<int32_t> crop;
  const auto* voxels = reinterpret_cast<const int16_t*>(src.file.data() + src.vox_offset);
  for (int64_t z = 0; z < size[0]; ++z)
    for (int64_t y = 0; y < size[1]; ++y)
      for (int64_t x = 0; x < size[2]; ++x) {
        const int64_t k = ((z + start[0]) * 128 + y + start[1]) * 128 + x + start[2];
        crop.push_back(voxels[k]);
      }
  std::vector<uint8_t> bytes(crop.size() * 4);
  std::memcpy(bytes.data(), crop.data(), bytes.size());
  FieldSpec dtype;
  dtype.name = "image.source_dtype";
  dtype.kind = FieldKind::kString;
  Write(tmp / "ds",
        {Spec("image", FieldKind::kNdarray, DType::kI32, {1, -1, -1, -1}, "image"),
         Spec("image.nifti_header", FieldKind::kBytes, DType::kU8, {}, "nifti_header"), dtype,
         Spec("source.shape", FieldKind::kNdarray, DType::kI64, {3}, "source_grid"),
         Spec("source.crop_box", FieldKind::kNdarray, DType::kI64, {2, 3}, "source_grid")},
        {FieldValue::Array(bytes, {1, size[0], size[1], size[2]}), FieldValue::Bytes(src.header),
         FieldValue::String("i16"), FieldValue::Array(I64({62, 128, 128}), {3}),
         FieldValue::Array(I64({10, 20, 30, 40, 60, 50}), {2, 3})});
  REQUIRE(Export(tmp / "ds", tmp / "back.nii", "", true).ok());
  const std::vector<uint8_t> back = test::ReadFile(tmp / "back.nii");
  REQUIRE(back.size() == src.file.size());
  CHECK(std::equal(back.begin(), back.begin() + 348, src.header.begin()));  // i16 again: the header unchanged
  const auto* got = reinterpret_cast<const int16_t*>(back.data() + 352);
  size_t inside = 0, outside_zero = 0;
  for (int64_t z = 0; z < 62; ++z)
    for (int64_t y = 0; y < 128; ++y)
      for (int64_t x = 0; x < 128; ++x) {
        const int64_t k = (z * 128 + y) * 128 + x;
        const bool in = z >= 10 && z < 50 && y >= 20 && y < 80 && x >= 30 && x < 80;
        if (in)
          inside += got[k] == voxels[k];
        else
          outside_zero += got[k] == 0;
      }
  CHECK(inside == 40 * 60 * 50);
  CHECK(outside_zero == 62 * 128 * 128 - 40 * 60 * 50);
  // Half floats: NIfTI has none, f32 holds them exactly.
  std::vector<uint8_t> half(2 * 8);
  for (int k = 0; k < 8; ++k) {
    const uint16_t h = FloatToHalf(0.5f * float(k) - 1.25f);
    std::memcpy(&half[2 * k], &h, 2);
  }
  Write(tmp / "half", {Spec("image", FieldKind::kNdarray, DType::kF16, {1, 2, 2, 2}, "image")},
        {FieldValue::Array(half, {1, 2, 2, 2})});
  REQUIRE(Export(tmp / "half", tmp / "half.nii", "").ok());
  const std::vector<uint8_t> h = test::ReadFile(tmp / "half.nii");
  REQUIRE(h.size() == 352 + 32);
  float v[8];
  std::memcpy(v, h.data() + 352, 32);
  for (int k = 0; k < 8; ++k) CHECK(v[k] == 0.5f * float(k) - 1.25f);
}

}  // namespace shardify::tools
