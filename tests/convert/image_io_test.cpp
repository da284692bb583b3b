// Decoding of each image kind: PNG (all color types and depths), JPEG, NIfTI-1/2.
#include "convert/decode/image_io.h"

#include <png.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;

TEST_CASE("convert: 8-bit PNG gray, gray+alpha, RGB, RGBA decode planar and exact") {
  TempDir dir;
  for (int c = 1; c <= 4; ++c) {
    const std::string path = dir / ("img" + std::to_string(c) + ".png");
    std::vector<uint8_t> px = WritePng(path, c, 5, 7, static_cast<uint32_t>(c));
    auto d = ReadImage(path);
    INFO(d.status().ToString());
    REQUIRE(d.ok());
    CHECK(d->info.kind == ImageKind::kPng);
    CHECK(d->info.dtype == DType::kU8);
    CHECK(d->info.shape == Shape{c, 5, 7});
    CHECK(d->pixels == px);
    auto info = ReadImageInfo(path);
    REQUIRE(info.ok());
    CHECK(info->shape == d->info.shape);
  }
}

TEST_CASE("convert: 16-bit PNG keeps u16 values") {
  TempDir dir;
  std::vector<uint16_t> v;
  for (int i = 0; i < 6 * 4; ++i) v.push_back(static_cast<uint16_t>(i * 2731 + 7));
  WriteRawPng(dir / "a.png", 6, 4, PNG_COLOR_TYPE_GRAY, 16, v);
  auto d = ReadImage(dir / "a.png");
  REQUIRE(d.ok());
  CHECK(d->info.dtype == DType::kU16);
  CHECK(d->info.shape == Shape{1, 4, 6});
  std::vector<uint16_t> got(v.size());
  std::memcpy(got.data(), d->pixels.data(), got.size() * 2);
  CHECK(got == v);
}

TEST_CASE("convert: 1, 2, 4 and 8-bit gray PNG keep their stored values, also with a tRNS chunk (alpha 0 or 255)") {
  TempDir dir;
  for (int bits : {1, 2, 4, 8}) {
    std::vector<uint16_t> v;
    for (int i = 0; i < 8 * 3; ++i) v.push_back(static_cast<uint16_t>(i % (1 << bits)));
    for (bool trns : {false, true}) {
      const std::string path = dir / ("g" + std::to_string(bits) + (trns ? "t" : "") + ".png");
      WriteRawPng(path, 8, 3, PNG_COLOR_TYPE_GRAY, bits, v, trns);
      auto d = ReadImage(path);
      INFO("bits " << bits << " tRNS " << trns << " " << d.status().ToString());
      REQUIRE(d.ok());
      CHECK(d->info.dtype == DType::kU8);
      REQUIRE(d->info.shape == Shape{trns ? 2 : 1, 3, 8});
      CHECK(ReadImageInfo(path)->shape == d->info.shape);
      for (size_t i = 0; i < v.size(); ++i) {
        CHECK(d->pixels[i] == v[i]);
        if (trns) CHECK(d->pixels[v.size() + i] == (v[i] == 1 ? 0 : 255));  // gray 1 is transparent
      }
    }
  }
}

TEST_CASE("convert: palette PNG expands to RGB, with tRNS to RGBA") {
  TempDir dir;
  std::vector<uint16_t> v;
  for (int i = 0; i < 4 * 4; ++i) v.push_back(static_cast<uint16_t>(i % 16));
  WriteRawPng(dir / "p.png", 4, 4, PNG_COLOR_TYPE_PALETTE, 4, v);
  auto d = ReadImage(dir / "p.png");
  INFO(d.status().ToString());
  REQUIRE(d.ok());
  CHECK(d->info.shape == Shape{3, 4, 4});
  for (size_t i = 0; i < v.size(); ++i) {  // palette entry k is (10k, 255-10k, 3k)
    CHECK(d->pixels[i] == v[i] * 10);
    CHECK(d->pixels[16 + i] == 255 - v[i] * 10);
    CHECK(d->pixels[32 + i] == v[i] * 3);
  }
  WriteRawPng(dir / "t.png", 4, 4, PNG_COLOR_TYPE_PALETTE, 4, v, /*trns=*/true);
  auto t = ReadImage(dir / "t.png");
  REQUIRE(t.ok());
  REQUIRE(t->info.shape == Shape{4, 4, 4});
  for (size_t i = 0; i < v.size(); ++i) CHECK(t->pixels[48 + i] == 255 - v[i]);
}

TEST_CASE("convert: JPEG gray and RGB decode close to the written pixels") {
  TempDir dir;
  for (int c : {1, 3}) {
    const std::string path = dir / ("j" + std::to_string(c) + ".jpg");
    std::vector<uint8_t> px(static_cast<size_t>(c * 16 * 16));
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(100 + (i % 16) * 4);
    REQUIRE(WriteImage2D(path, DType::kU8, {c, 16, 16}, px).ok());
    auto d = ReadImage(path);
    INFO(d.status().ToString());
    REQUIRE(d.ok());
    CHECK(d->info.kind == ImageKind::kJpeg);
    REQUIRE(d->info.shape == Shape{c, 16, 16});
    double err = 0;
    for (size_t i = 0; i < px.size(); ++i) err += std::abs(int(px[i]) - int(d->pixels[i]));
    CHECK(err / static_cast<double>(px.size()) < 6.0);
  }
}

TEST_CASE("convert: NIfTI of every dtype keeps dtype, voxels, geometry and header bytes") {
  TempDir dir;
  for (DType t : {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kU32, DType::kI32, DType::kF32, DType::kF64,
                  DType::kI64}) {
    for (const char* ext : {".nii", ".nii.gz"}) {
      const std::string path = dir / (std::string("v_") + DTypeName(t) + ext);
      WriteVolume(path, t, 3, 4, 5, 11);
      auto d = ReadImage(path);
      INFO(path << " " << d.status().ToString());
      REQUIRE(d.ok());
      CHECK(d->info.dtype == t);
      CHECK(d->info.shape == Shape{1, 3, 4, 5});
      CHECK(d->pixels == ItkVoxels(path));
      CHECK(d->nifti_header.size() == 348);
      CHECK(Near(d->info.geometry.spacing, ItkGeometry(path).spacing));
      CHECK(Near(d->info.geometry.direction, ItkGeometry(path).direction));
      CHECK(Near(d->info.geometry.origin, TestGeometry().origin, 1e-4));
    }
  }
}

TEST_CASE("convert: 4D NIfTI becomes [T, D, H, W]") {
  TempDir dir;
  WriteVolume(dir / "t.nii.gz", DType::kI16, 2, 3, 4, 5, TestGeometry(), /*channels=*/3);
  auto d = ReadImage(dir / "t.nii.gz");
  REQUIRE(d.ok());
  CHECK(d->info.shape == Shape{3, 2, 3, 4});
  CHECK(d->pixels == ItkVoxels(dir / "t.nii.gz"));
}

TEST_CASE("convert: big-endian NIfTI-1 reads the same voxels and geometry") {
  TempDir dir;
  WriteVolume(dir / "le.nii", DType::kI16, 3, 4, 5, 3);
  WriteBytes(dir / "be.nii", ToBigEndianNifti1(ReadBytes(dir / "le.nii"), 2));
  auto le = ReadImage(dir / "le.nii");
  auto be = ReadImage(dir / "be.nii");
  INFO(be.status().ToString());
  REQUIRE(le.ok());
  REQUIRE(be.ok());
  CHECK(be->pixels == le->pixels);
  CHECK(be->info.dtype == DType::kI16);
  CHECK(Near(be->info.geometry.origin, le->info.geometry.origin));
  CHECK(Near(be->info.geometry.direction, le->info.geometry.direction));
  const std::vector<uint8_t> be_bytes = ReadBytes(dir / "be.nii");
  CHECK(be->nifti_header == std::vector<uint8_t>(be_bytes.begin(), be_bytes.begin() + 348));
}

TEST_CASE("convert: NIfTI-2 reads voxels and the geometry ITK gives its NIfTI-1 twin") {
  TempDir dir;
  WriteVolume(dir / "one.nii", DType::kF32, 3, 4, 5, 9);
  WriteBytes(dir / "two.nii", ToNifti2(ReadBytes(dir / "one.nii")));
  auto d = ReadImage(dir / "two.nii");
  INFO(d.status().ToString());
  REQUIRE(d.ok());
  CHECK(d->nifti_header.size() == 540);
  CHECK(d->info.shape == Shape{1, 3, 4, 5});
  CHECK(d->pixels == ItkVoxels(dir / "one.nii"));
  const Geometry itk = ItkGeometry(dir / "one.nii");
  CHECK(Near(d->info.geometry.spacing, itk.spacing, 1e-5));
  CHECK(Near(d->info.geometry.origin, itk.origin, 1e-4));
  CHECK(Near(d->info.geometry.direction, itk.direction, 1e-4));
}

TEST_CASE("convert: real example files from insighttoolkit5-examples") {
  auto png = ReadImage(ItkDataDir() + "/BrainProtonDensitySlice.png");
  INFO(png.status().ToString());
  REQUIRE(png.ok());
  CHECK(png->info.dtype == DType::kU8);
  REQUIRE(png->info.shape == Shape{3, 217, 181});  // an 8-bit colormap PNG, expanded to RGB
  png_image ref{};                                 // an independent read with libpng's simplified API
  ref.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_file(&ref, (ItkDataDir() + "/BrainProtonDensitySlice.png").c_str()) != 0);
  ref.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> rgb(PNG_IMAGE_SIZE(ref));
  REQUIRE(png_image_finish_read(&ref, nullptr, rgb.data(), 0, nullptr) != 0);
  const size_t hw = 217 * 181;
  REQUIRE(rgb.size() == 3 * hw);
  size_t mismatches = 0;
  for (size_t p = 0; p < hw; ++p) {
    for (size_t k = 0; k < 3; ++k) mismatches += rgb[p * 3 + k] != png->pixels[k * hw + p];
  }
  CHECK(mismatches == 0);
  for (const char* f : {"KmeansTest_T1UCharRaw.nii.gz", "KmeansTest_T1RawSkullStrip.nii.gz",
                        "KmeansTest_T1KmeansPrelimSegmentation.nii.gz"}) {
    const std::string path = ItkDataDir() + "/" + f;
    auto v = ReadImage(path);
    INFO(path << " " << v.status().ToString());
    REQUIRE(v.ok());
    CHECK(v->info.shape.size() == 4);
    CHECK(v->pixels == ItkVoxels(path));
    CHECK(v->info.geometry == ItkGeometry(path));
  }
}

namespace {

// The file `dir`/a.nii, named by a path of `length` characters (padded with "./").
std::string PathOfLength(const std::string& dir, size_t length) {
  const std::string name = "a.nii";
  std::string path = dir + "/";
  while (path.size() + 2 + name.size() <= length) path += "./";
  if (path.size() + name.size() < length) path += "/";
  return path + name;
}

// Reads the header of each of `paths` on two threads that start each read together.
// Returns 0 when every read succeeds.
int ReadHeadersOnTwoThreads(const std::vector<std::string>& paths) {
  std::atomic<size_t> arrived{0};
  std::atomic<bool> failed{false};
  auto read = [&] {
    for (size_t i = 0; i < paths.size(); ++i) {
      arrived.fetch_add(1);
      while (arrived.load() < 2 * (i + 1)) {
      }
      if (!ReadImageInfo(paths[i]).ok()) failed = true;
    }
  };
  std::thread a(read);
  std::thread b(read);
  a.join();
  b.join();
  return failed ? 1 : 0;
}

}  // namespace

// ITK 5.2's NIfTI reader keeps the name of the last file it read in a static string that
// it assigns without a lock; two reads at once whose names outgrow that string free its
// buffer twice. Here every read outgrows it (each name is twice as long as the last), in
// a fresh child process per round so that each round starts from the same short string;
// a corrupted heap ends the child (glibc's checks, or the sanitizer's). Unguarded, the
// first or second round ends that way; a second of rounds is a wide margin.
TEST_CASE("convert: NIfTI headers read on two threads at once leave the heap intact") {
  TempDir dir;
  WriteVolume(dir / "a.nii", DType::kU8, 2, 3, 4, 1);
  REQUIRE(ReadImageInfo(PathOfLength(dir.path(), dir.path().size() + 8)).ok());
  std::vector<std::string> paths;
  for (size_t n = 2 * dir.path().size(); n < 4000; n = 2 * n + 1) paths.push_back(PathOfLength(dir.path(), n));
  int rounds = 0;
  int status = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < until && status == 0) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(ReadHeadersOnTwoThreads(paths));
    REQUIRE(::waitpid(child, &status, 0) == child);
    ++rounds;
  }
  INFO("round " << rounds << ": wait status " << status);
  CHECK(status == 0);
}
