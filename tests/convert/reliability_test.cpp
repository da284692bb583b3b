// Faults users hit: two converters on one destination, a failed or killed overwrite, a
// destination inside the source, class folder symlinks, hostile headers and memory limits.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "format/writer.h"
#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadText(const std::string& path) {
  const std::vector<uint8_t> b = ReadBytes(path);
  return std::string(b.begin(), b.end());
}

// Every sample of `dir` decodes (every shard is there and intact); returns their number.
uint64_t ReadAll(const std::string& dir) {
  Readback r = Open(dir);
  Decoder d;
  for (uint64_t i = 0; i < r.ds->num_samples(); ++i) {
    auto v = r.ds->Sample(i);
    REQUIRE(v.ok());
    std::vector<uint8_t> buf(*v->raw_size(0));
    REQUIRE(v->Decode(0, buf.data(), buf.size(), d).ok());
  }
  return r.ds->num_samples();
}

// A PNG chunk: length, type, data, CRC over type and data.
void PutChunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  const uint32_t n = static_cast<uint32_t>(data.size());
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(n >> s));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  const uint32_t crc = static_cast<uint32_t>(crc32(0, out.data() + start, static_cast<uInt>(out.size() - start)));
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(crc >> s));
}

// A gray 8-bit PNG whose header says w x h but whose data is one deflated row.
std::vector<uint8_t> PngClaiming(uint32_t w, uint32_t h) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  std::vector<uint8_t> ihdr;
  for (uint32_t v : {w, h}) {
    for (int s = 24; s >= 0; s -= 8) ihdr.push_back(static_cast<uint8_t>(v >> s));
  }
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});  // depth 8, gray, deflate, filter 0, no interlace
  PutChunk(png, "IHDR", ihdr);
  std::vector<uint8_t> row(1 + w, 0);
  std::vector<uint8_t> z(compressBound(static_cast<uLong>(row.size())));
  uLongf zn = static_cast<uLongf>(z.size());
  REQUIRE(compress2(z.data(), &zn, row.data(), static_cast<uLong>(row.size()), 9) == Z_OK);
  z.resize(zn);
  PutChunk(png, "IDAT", z);
  PutChunk(png, "IEND", {});
  return png;
}

// A baseline gray JPEG whose frame header says w x h, with one-symbol Huffman tables and a
// few bytes of scan data.
std::vector<uint8_t> JpegClaiming(uint16_t w, uint16_t h) {
  std::vector<uint8_t> j = {0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x43, 0x00};
  j.insert(j.end(), 64, 1);  // quantization table 0
  j.insert(j.end(), {0xFF, 0xC0, 0x00, 0x0B, 0x08, uint8_t(h >> 8), uint8_t(h), uint8_t(w >> 8), uint8_t(w), 0x01, 0x01,
                     0x11, 0x00});
  for (uint8_t table : {0x00, 0x10}) {  // DC and AC: one 1-bit code for symbol 0
    j.insert(j.end(), {0xFF, 0xC4, 0x00, 0x14, table, 1});
    j.insert(j.end(), 15, 0);
    j.push_back(0);
  }
  j.insert(j.end(), {0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x00, 0xFF, 0xD9});
  return j;
}

// A NIfTI-1 file of u8 voxels whose header says d x h x w, followed by `extra` bytes.
std::vector<uint8_t> NiftiClaiming(int16_t d, int16_t h, int16_t w, size_t extra) {
  std::vector<uint8_t> hdr(352, 0);
  auto put16 = [&](size_t at, int16_t v) { std::memcpy(&hdr[at], &v, 2); };
  const int32_t size = 348;
  std::memcpy(&hdr[0], &size, 4);
  const int16_t dims[8] = {3, w, h, d, 1, 1, 1, 1};
  for (int i = 0; i < 8; ++i) put16(40 + 2 * static_cast<size_t>(i), dims[i]);
  put16(70, 2);  // uint8
  put16(72, 8);
  const float one = 1, offset = 352;
  for (int i = 0; i < 8; ++i) std::memcpy(&hdr[76 + 4 * static_cast<size_t>(i)], &one, 4);
  std::memcpy(&hdr[108], &offset, 4);
  std::memcpy(&hdr[344], "n+1", 4);
  hdr.resize(hdr.size() + extra, 7);
  return hdr;
}

}  // namespace

TEST_CASE("convert: shardify refuses a destination another writer holds, and leaves it alone", "[subprocess]") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 3);
  const std::string out = dir / "out";
  FieldSpec index{"index", FieldKind::kInt, DType::kI64, {}, {}, {}};
  WriterOptions wo;
  wo.fsync = false;
  auto writer = DatasetWriter::Create(out, {index}, wo);  // this process writes `out` now
  REQUIRE(writer.ok());
  SampleInput sample;
  sample.values = {FieldValue::Int(7)};
  REQUIRE((*writer)->Append(std::move(sample)).ok());
  for (bool overwrite : {false, true}) {
    std::vector<std::string> args = {SHARDIFY_BIN, src, "-o", out, "--no-fsync", "-q"};
    if (overwrite) args.push_back("--overwrite");
    const int code = WaitExitCode(Spawn(args, dir / "second.log"));
    const std::string log = ReadText(dir / "second.log");
    INFO(log);
    CHECK(code == 1);
    CHECK_THAT(log, Catch::Contains("busy") && Catch::Contains("another process is writing a dataset here") &&
                        Catch::Contains("locked by process " + std::to_string(::getpid())));
  }
  REQUIRE((*writer)->Finish().ok());
  writer->reset();
  Readback r = Open(out);
  CHECK(r.ds->num_samples() == 1);
  CHECK(r.Int(0, "index") == 7);
}

TEST_CASE("convert: of two shardify runs on one destination, one fails, and the dataset is the other's",
          "[subprocess]") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 600, 24);
  TempDir other;
  const std::string src2 = ManyPngs(other, 3);
  const std::string out = dir / "out";
  const pid_t first = Spawn(
      {SHARDIFY_BIN, src, "-o", out, "--threads", "1", "--level", "19", "--shard-size", "4K", "--no-fsync", "-q"});
  REQUIRE(first > 0);
  const bool started = WaitForShard(out, first);
  const pid_t second = Spawn({SHARDIFY_BIN, src2, "-o", out, "--no-fsync", "-q"}, dir / "second.log");
  const int second_code = WaitExitCode(second);
  const int first_code = WaitExitCode(first);
  REQUIRE(started);
  const std::string log = ReadText(dir / "second.log");
  INFO(log);
  CHECK(first_code == 0);
  CHECK(second_code == 1);  // busy while the first runs, or refused by the dataset it left
  CHECK_THAT(
      log, Catch::Contains("another process is writing a dataset here") || Catch::Contains("already holds a dataset"));
  CHECK(ReadAll(out) == 600);
}

TEST_CASE("convert: a decode error half-way through --overwrite keeps the previous dataset") {
  TempDir dir;
  const std::string out = dir / "data/out";
  REQUIRE(RunConvert(ManyPngs(dir, 30), out).ok());
  const std::vector<std::string> before = Names(out);
  TempDir next;
  const std::string src = ManyPngs(next, 40);
  DamageImageData(src + "/c2/0020.png");
  ConvertOptions o;
  o.overwrite = true;
  auto r = RunConvert(src, out, o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("0020.png"));
  CHECK(ReadAll(out) == 30);
  CHECK(Names(out) == before);
  CHECK(Names(dir / "data") == std::vector<std::string>{"out"});  // no staging directory left
}

TEST_CASE("convert: kill -9 during --overwrite keeps the previous dataset, the next run cleans up", "[subprocess]") {
  TempDir dir;
  const std::string out = dir / "out";
  REQUIRE(RunConvert(ManyPngs(dir, 30), out).ok());
  TempDir big;
  const std::string src = ManyPngs(big, 600, 24);
  const pid_t pid = Spawn({SHARDIFY_BIN, src, "-o", out, "--overwrite", "--threads", "1", "--level", "19",
                           "--shard-size", "4K", "--no-fsync", "-q"});
  REQUIRE(pid > 0);
  const std::string staging = dir / ".out.shardify-new";
  const bool started = WaitForShard(staging, pid);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  REQUIRE(started);
  CHECK(ReadAll(out) == 30);
  CHECK_FALSE(fs::exists(staging + "/manifest.sfm"));  // what is left does not look like a dataset
  ConvertOptions o;
  o.overwrite = true;
  REQUIRE(RunConvert(src, out, o).ok());
  CHECK(ReadAll(out) == 600);
  CHECK(Names(dir.path()) == std::vector<std::string>{"out", "src"});
}

TEST_CASE("convert: a destination inside the source is never read as input") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 9);    // classes c0, c1, c2
  const std::string out = src + "/c1-shards";  // sorts between c1 and c2
  auto first = RunConvert(src, out);
  REQUIRE(first.ok());
  ConvertOptions o;
  o.overwrite = true;
  auto again = RunConvert(src, out, o);
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK(again->classes == std::vector<std::string>{"c0", "c1", "c2"});
  CHECK(again->warnings.empty());
  CHECK(again->samples == 9);
  Readback r = Open(out);
  for (uint64_t i = 0; i < 9; ++i) {  // c2's samples keep label 2
    CHECK(r.Int(i, "label") == r.Str(i, "path")[1] - '0');
  }
}

TEST_CASE("convert: a top-level class folder that is a directory symlink is not followed") {
  TempDir dir;
  WritePng(dir / "src/a/1.png", 1, 8, 8, 1);
  WritePng(dir / "elsewhere/2.png", 1, 8, 8, 2);
  fs::create_directory_symlink(dir / "elsewhere", dir / "src/b");
  auto r = RunConvert(dir / "src", dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->classes == std::vector<std::string>{"a"});
  CHECK(r->samples == 1);
  REQUIRE(r->warnings.size() == 1);
  CHECK_THAT(r->warnings[0], Catch::Contains("src/b") && Catch::Contains("symlink"));
}

TEST_CASE("convert: headers that claim more than their file holds fail before anything is allocated") {
  TempDir dir;
  for (const char* sub : {"nii", "png/a", "jpg/a", "gz"}) fs::create_directories(dir / sub);
  WriteBytes(dir / "nii/short.nii", NiftiClaiming(400, 512, 512, 1000));  // 100 MiB claimed, 1.3 KB file
  WriteBytes(dir / "png/a/wide.png", PngClaiming(60000, 60000));          // 3.4 GiB claimed
  WriteBytes(dir / "jpg/a/wide.jpg", JpegClaiming(60000, 60000));         // likewise
  const std::vector<uint8_t> nii = NiftiClaiming(40, 512, 512, 100);
  gzFile gz = gzopen((dir / "gz/small.nii.gz").c_str(), "wb");  // a gzip that could not inflate to its claim
  REQUIRE(gz != nullptr);
  REQUIRE(gzwrite(gz, nii.data(), static_cast<unsigned>(nii.size())) == static_cast<int>(nii.size()));
  gzclose(gz);
  for (const char* what : {"nii", "png", "jpg", "gz"}) {
    for (bool dry : {true, false}) {
      ConvertOptions o;
      o.dry_run = dry;
      auto r = RunConvert(dir / what, dir / (std::string(what) + "-out"), o);
      INFO(what << (dry ? " dry run" : "") << ": " << r.status().ToString());
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kCorruption);
      CHECK_THAT(r.status().message(), Catch::Contains("claims") && Catch::Contains("the file has only"));
    }
  }
}

TEST_CASE("convert: a sample over the per-sample memory limit fails naming it, or is skipped") {
  TempDir dir;
  WritePng(dir / "src/a/small.png", 1, 8, 8, 1);
  WritePng(dir / "src/a/large.png", 1, 40, 40, 2);  // 1600 bytes decoded
  ConvertOptions o;
  o.max_sample_bytes = 1000;
  for (bool dry : {true, false}) {
    o.dry_run = dry;
    auto r = RunConvert(dir / "src", dir / "out", o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kResourceExhausted);
    CHECK_THAT(r.status().message(), Catch::Contains("large.png") && Catch::Contains("--max-sample-memory"));
  }
  o.dry_run = false;
  o.skip_errors = true;
  auto r = RunConvert(dir / "src", dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->samples == 1);
  REQUIRE(r->skipped.size() == 1);
  CHECK_THAT(r->skipped[0].input, Catch::Contains("large.png"));
  CHECK_THAT(ReadText(dir / "out/skipped.tsv"), Catch::Contains("large.png"));
}

TEST_CASE("convert: a sample that alone needs more than --max-memory fails the run before anything is written") {
  TempDir dir;
  WritePng(dir / "src/a/1.png", 1, 8, 8, 1);
  WritePng(dir / "src/b/2.png", 3, 32, 32, 2);  // 3 KiB decoded, about 9 KiB to convert
  ConvertOptions o;
  o.max_memory = 8 << 10;
  for (bool dry : {true, false}) {
    o.dry_run = dry;
    auto r = RunConvert(dir / "src", dir / "out", o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kResourceExhausted);
    CHECK_THAT(r.status().message(), Catch::Contains("2.png") && Catch::Contains("--max-memory"));
    CHECK_FALSE(fs::exists(dir / "out"));
  }
  o.dry_run = false;
  o.max_memory = 16 << 10;  // room for one sample at a time: converted one by one
  o.threads = 4;
  auto r = RunConvert(dir / "src", dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->samples == 2);
}
