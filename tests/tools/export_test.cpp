#include "tools/export.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/tools/fixtures.h"

#ifdef SHARDIFY_TESTS_WITH_ITK
#include <itkImage.h>
#include <itkImageFileReader.h>
#include <itkRGBPixel.h>
#endif

namespace shardify::tools {
namespace {

using test::BigEndian32;
using test::TempDir;

std::vector<uint8_t> Gunzip(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  REQUIRE(gz != nullptr);
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(gz);
  return out;
}

// Width, height, bit depth and colour type from a PNG's IHDR chunk.
struct Ihdr {
  uint32_t width = 0, height = 0;
  int depth = 0, color = 0;
};
Ihdr ReadIhdr(const std::vector<uint8_t>& png) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  REQUIRE(png.size() > 33);
  REQUIRE(std::memcmp(png.data(), kSig, 8) == 0);
  REQUIRE(std::memcmp(png.data() + 12, "IHDR", 4) == 0);
  return {BigEndian32(&png[16]), BigEndian32(&png[20]), png[24], png[25]};
}

TEST_CASE("tools: export writes a 2D u8 sample as an 8-bit gray PNG of its size", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  std::ostringstream out;
  const uint64_t i = 5;
  REQUIRE(RunExport(tmp / "ds", i, tmp / "a.png", ExportOptions{}, out).ok());
  const Ihdr h = ReadIhdr(test::ReadFile(tmp / "a.png"));
  CHECK(h.width == test::kW8);
  CHECK(h.height == test::kH8);
  CHECK(h.depth == 8);
  CHECK(h.color == 0);
#ifdef SHARDIFY_TESTS_WITH_ITK
  using Image = itk::Image<unsigned char, 2>;
  auto reader = itk::ImageFileReader<Image>::New();
  reader->SetFileName(tmp / "a.png");
  reader->Update();
  const Image* img = reader->GetOutput();
  REQUIRE(img->GetLargestPossibleRegion().GetSize()[0] == test::kW8);
  const unsigned char* px = img->GetBufferPointer();
  for (size_t k = 0; k < test::kH8 * test::kW8; ++k) REQUIRE(px[k] == test::Pixel8(i, k));
#endif
}

TEST_CASE("tools: export writes a u16 RGB sample as a 16-bit RGB PNG, pixel for pixel", "[tools]") {
  TempDir tmp;
  test::WriteRgb16WithMask(tmp / "ds");
  std::ostringstream out;
  const uint64_t i = 2;
  REQUIRE(RunExport(tmp / "ds", i, tmp / "c.png", ExportOptions{}, out).ok());
  const Ihdr h = ReadIhdr(test::ReadFile(tmp / "c.png"));
  CHECK(h.width == test::kW16);
  CHECK(h.height == test::kH16);
  CHECK(h.depth == 16);
  CHECK(h.color == 2);
#ifdef SHARDIFY_TESTS_WITH_ITK
  using Image = itk::Image<itk::RGBPixel<unsigned short>, 2>;
  auto reader = itk::ImageFileReader<Image>::New();
  reader->SetFileName(tmp / "c.png");
  reader->Update();
  const auto* px = reader->GetOutput()->GetBufferPointer();
  const size_t plane = test::kH16 * test::kW16;
  for (size_t k = 0; k < plane; ++k) {
    for (size_t c = 0; c < 3; ++c) REQUIRE(px[k][c] == test::Pixel16(i, c * plane + k));
  }
#endif
}

TEST_CASE("tools: export of another field and unsupported targets", "[tools]") {
  TempDir tmp;
  test::WriteRgb16WithMask(tmp / "ds");
  std::ostringstream out;
  ExportOptions o;
  o.field = "mask";
  o.json = true;
  REQUIRE(RunExport(tmp / "ds", 1, tmp / "m.png", o, out).ok());
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["field"] == "mask");
  CHECK(ReadIhdr(test::ReadFile(tmp / "m.png")).depth == 8);
  CHECK(RunExport(tmp / "ds", 1, tmp / "m.bmp", o, out).code() == StatusCode::kInvalidArgument);
  o.field = "label";
  CHECK(RunExport(tmp / "ds", 1, tmp / "m.png", o, out).code() == StatusCode::kInvalidArgument);
  o.field = "nope";
  CHECK(RunExport(tmp / "ds", 1, tmp / "m.png", o, out).code() == StatusCode::kNotFound);
}

TEST_CASE("tools: export of a volume to .nii equals the source file byte for byte", "[tools]") {
  TempDir tmp;
  const test::NiftiSource src = test::ReadNiftiSource(test::kNiftiPath);
  test::WriteVolume(tmp / "vol", src);
  std::ostringstream out;
  REQUIRE(RunExport(tmp / "vol", 0, tmp / "v.nii", ExportOptions{}, out).ok());
  CHECK(test::ReadFile(tmp / "v.nii") == src.file);
  REQUIRE(RunExport(tmp / "vol", 0, tmp / "v.nii.gz", ExportOptions{}, out).ok());
  CHECK(Gunzip(tmp / "v.nii.gz") == src.file);
  CHECK(RunExport(tmp / "vol", 0, tmp / "v.png", ExportOptions{}, out).code() == StatusCode::kUnsupported);
}

#ifdef SHARDIFY_TESTS_WITH_ITK
using Volume = itk::Image<short, 3>;

Volume::Pointer ReadVolume(const std::string& path) {
  auto reader = itk::ImageFileReader<Volume>::New();
  reader->SetFileName(path);
  reader->Update();
  return reader->GetOutput();
}

TEST_CASE("tools: an exported .nii.gz reads back in ITK with the source voxels and geometry", "[tools]") {
  TempDir tmp;
  const test::NiftiSource src = test::ReadNiftiSource(test::kNiftiPath);
  test::WriteVolume(tmp / "vol", src);
  std::ostringstream out;
  REQUIRE(RunExport(tmp / "vol", 0, tmp / "v.nii.gz", ExportOptions{}, out).ok());
  auto a = ReadVolume(test::kNiftiPath);
  auto b = ReadVolume(tmp / "v.nii.gz");
  REQUIRE(a->GetLargestPossibleRegion() == b->GetLargestPossibleRegion());
  CHECK(a->GetSpacing() == b->GetSpacing());
  CHECK(a->GetOrigin() == b->GetOrigin());
  CHECK(a->GetDirection() == b->GetDirection());
  const size_t n = a->GetLargestPossibleRegion().GetNumberOfPixels();
  CHECK(std::memcmp(a->GetBufferPointer(), b->GetBufferPointer(), n * sizeof(short)) == 0);
}
#endif

}  // namespace
}  // namespace shardify::tools
