#include "tools/nifti.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <sstream>

#include "format/writer.h"
#include "media/nifti.h"
#include "tests/tools/fixtures.h"
#include "tools/export.h"

#ifdef SHARDIFY_TESTS_WITH_ITK
#include <itkImage.h>
#include <itkImageFileReader.h>
#endif

namespace shardify::tools {
namespace {

using test::TempDir;

// Turns a little-endian NIfTI-1 header into the same header in big-endian byte order.
std::vector<uint8_t> ToBigEndian(std::vector<uint8_t> h) {
  auto swap = [&](size_t off, size_t n) { std::reverse(h.begin() + off, h.begin() + off + n); };
  swap(0, 4);
  for (size_t off = 40; off < 56; off += 2) swap(off, 2);
  swap(70, 2);
  swap(72, 2);
  for (size_t off = 76; off < 120; off += 4) swap(off, 4);  // pixdim, vox_offset, scl_*
  swap(252, 2);
  swap(254, 2);
  for (size_t off = 256; off < 328; off += 4) swap(off, 4);  // quatern, qoffset, srow
  return h;
}

TEST_CASE("tools: a big-endian header gets its voxels swapped back to big-endian", "[tools]") {
  const Shape shape = {1, 2, 3, 4};
  auto le = media::MakeNifti1Header(shape, DType::kI16, {0.5, 0.5, 2}, {}, {});
  REQUIRE(le.ok());
  const std::vector<uint8_t> be = ToBigEndian(*le);
  auto info = media::ParseStoredNiftiHeader(be.data(), be.size());
  REQUIRE(info.ok());
  CHECK(info->big_endian);
  CHECK(info->dim[1] == 4);
  CHECK(info->dim[3] == 2);
  CHECK(info->vox_offset == 352);
  CHECK(info->pixdim[3] == 2.0);
  std::vector<int16_t> voxels(24);
  for (size_t k = 0; k < voxels.size(); ++k) voxels[k] = static_cast<int16_t>(k * 1000 - 7000);
  auto image = BuildNiftiImage(be, reinterpret_cast<const uint8_t*>(voxels.data()), 48, DType::kI16);
  REQUIRE(image.ok());
  REQUIRE(image->size() == 352 + 48);
  CHECK(std::equal(be.begin(), be.end(), image->begin()));
  for (size_t k = 0; k < voxels.size(); ++k) {
    const uint8_t* p = image->data() + 352 + 2 * k;
    CHECK(static_cast<int16_t>(p[0] << 8 | p[1]) == voxels[k]);
  }
}

TEST_CASE("tools: NIfTI headers that cannot be right are Corruption", "[tools]") {
  auto h = media::MakeNifti1Header({1, 2, 3, 4}, DType::kU8, {}, {}, {});
  REQUIRE(h.ok());
  CHECK(media::ParseStoredNiftiHeader(h->data(), 100).status().code() == StatusCode::kCorruption);
  std::vector<uint8_t> bad = *h;
  bad[40] = 9;  // rank 9
  CHECK(media::ParseStoredNiftiHeader(bad.data(), bad.size()).status().code() == StatusCode::kCorruption);
  bad = *h;
  bad[42] = 0, bad[43] = 0;  // dim[1] = 0
  CHECK(media::ParseStoredNiftiHeader(bad.data(), bad.size()).status().code() == StatusCode::kCorruption);
  const uint8_t vox[24] = {};
  CHECK(BuildNiftiImage(*h, vox, 23, DType::kU8).status().code() == StatusCode::kInvalidArgument);
  CHECK(BuildNiftiImage(*h, vox, 24, DType::kI16).status().code() == StatusCode::kInvalidArgument);
  CHECK(media::MakeNifti1Header({1, 2, 3}, DType::kF16, {}, {}, {}).status().code() == StatusCode::kUnsupported);
}

#ifdef SHARDIFY_TESTS_WITH_ITK
TEST_CASE("tools: a volume without a stored header exports with its geometry", "[tools]") {
  TempDir tmp;
  FieldSpec image{"image", FieldKind::kNdarray, DType::kF32, {1, 3, 4, 5}, {}, {}};
  FieldSpec spacing{"image.spacing", FieldKind::kNdarray, DType::kF64, {3}, {}, {}};
  FieldSpec origin{"image.origin", FieldKind::kNdarray, DType::kF64, {3}, {}, {}};
  FieldSpec direction{"image.direction", FieldKind::kNdarray, DType::kF64, {9}, {}, {}};
  WriterOptions wo;
  wo.fsync = false;
  auto w = DatasetWriter::Create(tmp / "ds", {image, spacing, origin, direction}, wo);
  REQUIRE(w.ok());
  std::vector<float> v(60);
  for (size_t k = 0; k < v.size(); ++k) v[k] = 0.25f * static_cast<float>(k) - 3;
  const std::vector<double> sp = {0.5, 0.75, 2}, org = {-10, 20, 5}, dir = {0, 1, 0, -1, 0, 0, 0, 0, 1};
  auto bytes = [](const void* p, size_t n) {
    return std::vector<uint8_t>(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  SampleInput s;
  s.values = {FieldValue::Array(bytes(v.data(), 240), {1, 3, 4, 5}), FieldValue::Array(bytes(sp.data(), 24), {3}),
              FieldValue::Array(bytes(org.data(), 24), {3}), FieldValue::Array(bytes(dir.data(), 72), {9})};
  REQUIRE((*w)->Append(std::move(s)).ok());
  REQUIRE((*w)->Finish().ok());
  std::ostringstream out;
  REQUIRE(RunExport(tmp / "ds", 0, tmp / "g.nii.gz", ExportOptions{}, out).ok());
  using Image = itk::Image<float, 3>;
  auto reader = itk::ImageFileReader<Image>::New();
  reader->SetFileName(tmp / "g.nii.gz");
  reader->Update();
  const Image* img = reader->GetOutput();
  const auto size = img->GetLargestPossibleRegion().GetSize();
  CHECK(size[0] == 5);
  CHECK(size[1] == 4);
  CHECK(size[2] == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(img->GetSpacing()[i] == Approx(sp[i]));
    CHECK(img->GetOrigin()[i] == Approx(org[i]));
    for (int j = 0; j < 3; ++j) CHECK(img->GetDirection()[i][j] == Approx(dir[i * 3 + j]).margin(1e-6));
  }
  CHECK(std::memcmp(img->GetBufferPointer(), v.data(), 240) == 0);
}
#endif

TEST_CASE("tools: a mask without geometry of its own exports with its image's spacing", "[tools]") {
  TempDir tmp;
  // As the rle layout writes a 1.5 x 1.25 mm slice: geometry on the image only.
  const std::vector<FieldSpec> fields = {
      {"image", FieldKind::kNdarray, DType::kU16, {1, 4, 6}, {}, {{"role", "image"}}},
      {"mask", FieldKind::kNdarray, DType::kU8, {3, 4, 6}, {}, {{"role", "mask"}, {"multi_label", "true"}}},
      {"image.spacing", FieldKind::kNdarray, DType::kF64, {2}, {}, {}},
      {"image.origin", FieldKind::kNdarray, DType::kF64, {2}, {}, {}},
      {"image.direction", FieldKind::kNdarray, DType::kF64, {4}, {}, {}}};
  WriterOptions wo;
  wo.fsync = false;
  auto w = DatasetWriter::Create(tmp / "ds", fields, wo);
  REQUIRE(w.ok());
  auto doubles = [](std::vector<double> v) {
    std::vector<uint8_t> b(v.size() * 8);
    std::memcpy(b.data(), v.data(), b.size());
    return FieldValue::Array(std::move(b), {int64_t(v.size())});
  };
  std::vector<uint8_t> mask(72, 0);
  mask[7] = mask[24 + 8] = mask[48 + 9] = 1;
  SampleInput s;
  s.values = {FieldValue::Array(std::vector<uint8_t>(48, 3), {1, 4, 6}), FieldValue::Array(mask, {3, 4, 6}),
              doubles({1.5, 1.25}), doubles({0, 0}), doubles({1, 0, 0, 1})};
  REQUIRE((*w)->Append(std::move(s)).ok());
  REQUIRE((*w)->Finish().ok());
  std::ostringstream out;
  ExportOptions o;
  o.field = "mask";
  REQUIRE(RunExport(tmp / "ds", 0, tmp / "m.nii", o, out).ok());
  const std::vector<uint8_t> file = test::ReadFile(tmp / "m.nii");
  auto h = media::ParseStoredNiftiHeader(file.data(), 348);
  INFO(h.status().ToString());
  REQUIRE(h.ok());
  CHECK(h->dim[1] == 6);
  CHECK(h->dim[2] == 4);
  CHECK(h->dim[4] == 3);  // one volume per class
  CHECK(h->pixdim[1] == Approx(1.5));
  CHECK(h->pixdim[2] == Approx(1.25));
  CHECK(std::equal(mask.begin(), mask.end(), file.begin() + media::VoxOffsetBytes(*h)));
}

}  // namespace
}  // namespace shardify::tools
