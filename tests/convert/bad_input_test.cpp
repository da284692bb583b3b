// Bad input never crashes the converter; every message names the file or the case.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "base/strings.h"
#include "convert/sources/case.h"
#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;
namespace fs = std::filesystem;

namespace {

// The inverse of DecodeRle, for one mask channel of `n` pixels (row-major): the runs of
// nonzero pixels as "start length ..." with 1-based starts; "" when there are none.
std::string EncodeRle(const uint8_t* mask, uint64_t n) {
  std::string out;
  for (uint64_t i = 0; i < n;) {
    if (mask[i] == 0) {
      ++i;
      continue;
    }
    uint64_t j = i;
    while (j < n && mask[j] != 0) ++j;
    out += (out.empty() ? "" : " ") + std::to_string(i + 1) + " " + std::to_string(j - i);
    i = j;
  }
  return out;
}

// A class-folder source with two good images in class "a".
std::string GoodSource(const TempDir& dir) {
  WritePng(dir / "src/a/1.png", 1, 4, 4, 1);
  WritePng(dir / "src/a/2.png", 1, 4, 4, 2);
  return dir / "src";
}

// Expects the conversion to fail naming `needle`, then to succeed with skip, listing it.
void ExpectFailThenSkip(const TempDir& dir, const std::string& src, const std::string& needle, size_t good) {
  fs::remove_all(dir / "out");
  auto r = RunConvert(src, dir / "out");
  REQUIRE_FALSE(r.ok());
  INFO(r.status().ToString());
  CHECK(r.status().message().find(needle) != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out/manifest.sfm"));
  ConvertOptions o;
  o.skip_errors = true;
  auto s = RunConvert(src, dir / "out", o);
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  CHECK(s->samples == good);
  REQUIRE(s->skipped.size() == 1);
  CHECK(s->skipped[0].reason.find(needle) != std::string::npos);
  std::string tsv;
  for (uint8_t b : ReadBytes(dir / "out/skipped.tsv")) tsv += static_cast<char>(b);
  CHECK(tsv.find(needle) != std::string::npos);
  CHECK(Open(dir / "out").ds->num_samples() == good);
}

}  // namespace

TEST_CASE("convert: corrupt PNG fails naming the file, or is skipped") {
  TempDir dir;
  std::string src = GoodSource(dir);
  std::vector<uint8_t> png = ReadBytes(dir / "src/a/1.png");
  for (size_t i = 40; i < png.size(); ++i) png[i] ^= 0x5A;
  WriteBytes(dir / "src/a/bad.png", png);
  ExpectFailThenSkip(dir, src, "a/bad.png", 2);
}

TEST_CASE("convert: truncated PNG fails naming the file") {
  TempDir dir;
  std::string src = GoodSource(dir);
  std::vector<uint8_t> png = ReadBytes(dir / "src/a/1.png");
  png.resize(png.size() / 2);
  WriteBytes(dir / "src/a/cut.png", png);
  ExpectFailThenSkip(dir, src, "a/cut.png", 2);
}

TEST_CASE("convert: truncated JPEG fails naming the file") {
  TempDir dir;
  MakeDirs(dir / "src/a");
  std::vector<uint8_t> px = Pixels(32 * 32, 3);
  REQUIRE(WriteImage2D(dir / "src/a/good.jpg", DType::kU8, {1, 32, 32}, px).ok());
  std::vector<uint8_t> jpg = ReadBytes(dir / "src/a/good.jpg");
  jpg.resize(jpg.size() * 2 / 3);
  WriteBytes(dir / "src/a/cut.jpg", jpg);
  ExpectFailThenSkip(dir, dir / "src", "a/cut.jpg", 1);
}

TEST_CASE("convert: zero-byte and non-image files named .png fail naming the file") {
  TempDir dir;
  std::string src = GoodSource(dir);
  WriteBytes(dir / "src/a/empty.png", {});
  ExpectFailThenSkip(dir, src, "empty.png", 2);
  fs::remove(dir / "src/a/empty.png");
  WriteText(dir / "src/a/text.png", "this is not an image\n");
  ExpectFailThenSkip(dir, src, "text.png", 2);
}

TEST_CASE("convert: corrupt and truncated .nii.gz fail naming the file") {
  TempDir dir;
  WriteVolume(dir / "vols/good.nii.gz", DType::kI16, 4, 4, 4, 1);
  std::vector<uint8_t> gz = ReadBytes(dir / "vols/good.nii.gz");
  std::vector<uint8_t> cut(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2));
  WriteBytes(dir / "vols/cut.nii.gz", cut);
  ExpectFailThenSkip(dir, dir / "vols", "cut.nii.gz", 1);
  fs::remove(dir / "vols/cut.nii.gz");
  std::vector<uint8_t> bad = gz;
  for (size_t i = 12; i < bad.size(); ++i) bad[i] = static_cast<uint8_t>(bad[i] * 7 + 1);
  WriteBytes(dir / "vols/garbled.nii.gz", bad);
  ExpectFailThenSkip(dir, dir / "vols", "garbled.nii.gz", 1);
}

TEST_CASE("convert: other files are ignored and empty class folders are kept with a warning") {
  TempDir dir;
  std::string src = GoodSource(dir);
  WriteText(dir / "src/a/notes.txt", "hello");
  WriteText(dir / "src/.DS_Store", "x");
  MakeDirs(dir / "src/b_empty");
  WritePng(dir / "src/c/1.png", 1, 4, 4, 3);
  auto r = RunConvert(src, dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->ignored_files == 1);
  CHECK(r->classes == std::vector<std::string>{"a", "b_empty", "c"});
  REQUIRE(r->warnings.size() == 1);
  CHECK(r->warnings[0].find("b_empty") != std::string::npos);
  CHECK(Open(dir / "out").Int(2, "label") == 2);
}

TEST_CASE("convert: mixed shapes and channel counts become variable dims, mixed dtypes a dtype holding both") {
  TempDir dir;
  WritePng(dir / "src/a/1.png", 1, 4, 4, 1);
  WritePng(dir / "src/a/2.png", 3, 5, 4, 2);
  auto r = RunConvert(dir / "src", dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / "out");
  CHECK(rb.ds->manifest().fields[rb.Field("image")].shape == Shape{-1, -1, 4});
  CHECK(rb.ShapeOf(1, "image") == Shape{3, 5, 4});
  std::vector<uint16_t> v(16, 1000);
  WriteRawPng(dir / "src/a/3.png", 4, 4, 0, 16, v);
  r = RunConvert(dir / "src", dir / "mixed");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto mixed = Open(dir / "mixed");
  CHECK(mixed.ds->manifest().fields[mixed.Field("image")].dtype == DType::kU16);
  CHECK(mixed.Str(0, "image.source_dtype") == "u8");
  CHECK(mixed.Str(2, "image.source_dtype") == "u16");
}

TEST_CASE("convert: symlink loops and dangling links do not hang or crash") {
  TempDir dir;
  std::string src = GoodSource(dir);
  fs::create_directory_symlink(dir / "src", dir / "src/a/loop");       // a directory cycle: not followed
  fs::create_symlink(dir / "src/a/self.png", dir / "src/a/self.png");  // ELOOP on stat
  ExpectFailThenSkip(dir, src, "self.png", 2);
  fs::remove(dir / "src/a/self.png");
  fs::create_symlink(dir / "missing.png", dir / "src/a/gone.png");
  ExpectFailThenSkip(dir, src, "gone.png", 2);
}

TEST_CASE("convert: spaces and non-ASCII in paths") {
  TempDir dir;
  auto px = WritePng(dir / u8"src/クラス A/ü b.png", 1, 3, 3, 5);
  auto r = RunConvert(dir / "src", dir / u8"out dir é");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / u8"out dir é");
  CHECK(rb.Str(0, "path") == u8"クラス A/ü b.png");
  CHECK(rb.ds->manifest().classes[0] == u8"クラス A");
  CHECK(rb.Array(0, "image") == px);
}

TEST_CASE("convert: a file name that is not UTF-8 is a bad input, a class name that is not fails the run") {
  TempDir dir;
  const std::string src = GoodSource(dir);
  WritePng(dir / "src/a/caf\xE9.png", 1, 4, 4, 3);
  ExpectFailThenSkip(dir, src, "a/caf\\xE9.png: name is not UTF-8", 2);
  WritePng(dir / "src/caf\xE9/1.png", 1, 4, 4, 4);
  ConvertOptions skip;
  skip.skip_errors = true;
  const auto r = RunConvert(src, dir / "out2", skip);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains("class name 'caf\\xE9' is not UTF-8"));
  CHECK(IsUtf8(r.status().message()));
  CHECK_FALSE(fs::exists(dir / "out2/manifest.sfm"));
}

TEST_CASE("convert: nnU-Net channels or labels that disagree name the case and what differs") {
  TempDir dir;
  const std::string src = dir / "ds";
  WriteText(src + "/dataset.json",
            R"({"channel_names": {"0": "CT", "1": "PET"}, "labels": {"background": 0, "x": 1}})");
  WriteVolume(src + "/imagesTr/ok_0000.nii.gz", DType::kI16, 2, 3, 4, 1);
  WriteVolume(src + "/imagesTr/ok_0001.nii.gz", DType::kI16, 2, 3, 4, 2);
  WriteVolume(src + "/labelsTr/ok.nii.gz", DType::kU8, 2, 3, 4, 3);
  WriteVolume(src + "/imagesTr/moved_0000.nii.gz", DType::kI16, 2, 3, 4, 1);
  WriteVolume(src + "/imagesTr/moved_0001.nii.gz", DType::kI16, 2, 3, 4, 2, TestGeometry(5.0));
  WriteVolume(src + "/labelsTr/moved.nii.gz", DType::kU8, 2, 3, 4, 3);
  auto r = RunConvert(src, dir / "out");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("imagesTr/moved") != std::string::npos);
  CHECK(r.status().message().find("origin") != std::string::npos);
  fs::remove_all(src + "/imagesTr/moved_0001.nii.gz");
  WriteVolume(src + "/imagesTr/moved_0001.nii.gz", DType::kI16, 2, 3, 4, 2);
  fs::remove(src + "/labelsTr/moved.nii.gz");
  WriteVolume(src + "/labelsTr/moved.nii.gz", DType::kU8, 2, 3, 5, 3);
  r = RunConvert(src, dir / "out");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("imagesTr/moved") != std::string::npos);
  CHECK(r.status().message().find("spatial shape") != std::string::npos);
  fs::remove(src + "/imagesTr/moved_0001.nii.gz");
  r = RunConvert(src, dir / "out");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("missing channel 1") != std::string::npos);
}

TEST_CASE("convert: bad idx files and run-length strings name the file or case") {
  TempDir dir;
  MakeDirs(dir / "idx");
  WriteBytes(dir / "idx/train-images-idx3-ubyte", {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3});
  WriteBytes(dir / "idx/train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 2, 1, 1});
  auto r = RunConvert(dir / "idx", dir / "out");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("train-images-idx3-ubyte: truncated") != std::string::npos);
  std::vector<uint8_t> m(4 * 4);
  REQUIRE_FALSE(DecodeRle("15 3", m.data(), 16, "case1_day1_slice_0001").ok());
  Status odd = DecodeRle("1 2 5", m.data(), 16, "case1_day1_slice_0001");
  CHECK(odd.message().find("case1_day1_slice_0001") != std::string::npos);
  CHECK(DecodeRle("14 3", m.data(), 16, "x").ok());
}

TEST_CASE("convert: run-length strings encode back to what they decode from") {
  std::vector<uint8_t> m(20, 0);
  REQUIRE(DecodeRle("1 3 10 2 20 1", m.data(), m.size(), "x").ok());
  CHECK(EncodeRle(m.data(), m.size()) == "1 3 10 2 20 1");
  CHECK(EncodeRle(m.data(), 0).empty());
  uint32_t state = 7;
  for (int round = 0; round < 20; ++round) {
    std::vector<uint8_t> mask(97);
    for (uint8_t& v : mask) v = (state = state * 1103515245u + 12345u) >> 30 == 0;  // runs of ones
    std::vector<uint8_t> back(mask.size(), 0);
    REQUIRE(DecodeRle(EncodeRle(mask.data(), mask.size()), back.data(), back.size(), "x").ok());
    CHECK(back == mask);
  }
}

TEST_CASE("convert: a label file that does not fit the dataset is reported with its own name") {
  TempDir dir;
  for (const char* n : {"a", "b"}) WritePng(dir / "src/images/" + n + ".png", 1, 4, 4, 1);
  WritePng(dir / "src/masks/a.png", 1, 4, 4, 2);
  // A volume as the mask of a 2D image (mixed dtypes would be promoted, not refused).
  WriteVolume(dir / "src/masks/b.nii", DType::kU16, 2, 4, 4, 1);
  ExpectFailThenSkip(dir, dir / "src", "masks/b.nii) has spatial shape [2, 4, 4]", 1);
}

TEST_CASE("convert: an existing dataset is refused unless overwrite, dry run writes nothing") {
  TempDir dir;
  std::string src = GoodSource(dir);
  ConvertOptions dry;
  dry.dry_run = true;
  auto d = RunConvert(src, dir / "out", dry);
  REQUIRE(d.ok());
  CHECK(d->samples == 2);
  CHECK_FALSE(fs::exists(dir / "out"));
  REQUIRE(RunConvert(src, dir / "out").ok());
  auto again = RunConvert(src, dir / "out");
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == StatusCode::kAlreadyExists);
  ConvertOptions o;
  o.overwrite = true;
  CHECK(RunConvert(src, dir / "out", o).ok());
}

TEST_CASE("convert: hostile NIfTI header sizes are refused before allocating") {
  TempDir dir;
  WriteVolume(dir / "v.nii", DType::kI16, 2, 2, 2, 1);
  std::vector<uint8_t> b = ReadBytes(dir / "v.nii");
  auto put16 = [&](size_t off, int16_t v) { std::memcpy(&b[off], &v, 2); };
  put16(42, 32000);  // dim[1..3] = 32000: 65 TB of voxels
  put16(44, 32000);
  put16(46, 32000);
  WriteBytes(dir / "huge.nii", b);
  auto r = ReadImage(dir / "huge.nii");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("huge.nii") != std::string::npos);
  put16(42, -4);
  WriteBytes(dir / "neg.nii", b);
  auto n = ReadImage(dir / "neg.nii");
  REQUIRE_FALSE(n.ok());
  CHECK(n.status().message().find("dim[1]") != std::string::npos);
  std::vector<uint8_t> cut(b.begin(), b.begin() + 200);
  WriteBytes(dir / "short.nii", cut);
  auto s = ReadImage(dir / "short.nii");
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("short.nii: truncated NIfTI header") != std::string::npos);
}
