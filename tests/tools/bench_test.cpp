#include "tools/bench.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/dataset.h"
#include "format/writer.h"
#include "tests/common/claims.h"
#include "tests/tools/fixtures.h"

namespace shardify::tools {
namespace {

using test::TempDir;

TEST_CASE("tools: bench refuses a manifest claiming more samples than its shards hold", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  REQUIRE(::shardify::testing::ClaimMoreSamples(tmp / "ds", uint64_t{1} << 36));  // an order of 512 GiB
  for (bool direct : {true, false}) {
    BenchOptions o;
    o.direct = direct;
    o.split = Dataset::Open(tmp / "ds").value()->manifest().splits.back().name;
    auto r = Bench(tmp / "ds", o);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().ToString());
    CHECK(r.status().code() == StatusCode::kCorruption);
    CHECK_THAT(r.status().message(), Catch::Contains("claims"));
  }
}

TEST_CASE("tools: bench reads every sample of the split each epoch, both ways", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  for (bool direct : {true, false}) {
    BenchOptions o;
    o.direct = direct;
    o.epochs = 2;
    o.batch = 3;
    o.threads = 2;
    auto r = Bench(tmp / "ds", o);
    REQUIRE(r.ok());
    CHECK(r->samples == 2 * test::kTrain);
    CHECK(r->bytes >= 2 * test::kTrain * test::kH8 * test::kW8);
    CHECK(r->samples_per_s() > 0);
  }
  std::ostringstream out;
  BenchOptions o;
  o.json = true;
  o.split = "test";
  REQUIRE(RunBench(tmp / "ds", o, out).ok());
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["samples"] == test::kTest);
  CHECK(j["samples_per_s"].get<double>() > 0);
  CHECK(j["bytes_per_s"].get<double>() > 0);
  o.batch = 0;
  CHECK(RunBench(tmp / "ds", o, out).code() == StatusCode::kInvalidArgument);
}

// Volumes for patch mode: u16 image [1, D, H, W] (and a u8 mask with mask.fg_locations)
// stored in chunks of kChunk; the first three samples are split "train", the last "test",
// which is unlabeled as shardify writes it: mask [0, D, H, W], no foreground rows.
const std::vector<Shape> kVolumes = {{1, 20, 36, 40}, {1, 12, 30, 33}, {1, 24, 16, 20}, {1, 9, 9, 9}};
const Shape kChunk = {1, 8, 16, 16};
constexpr uint64_t kTrainVolumes = 3;

void WriteVolumes(const std::string& dir, bool mask) {
  FieldSpec image{"image", FieldKind::kNdarray, DType::kU16, {1, -1, -1, -1}, {}, {}};
  image.chunk_shape = kChunk;
  FieldSpec label{"mask", FieldKind::kNdarray, DType::kU8, {-1, -1, -1, -1}, {}, {}};  // -1: unlabeled cases
  label.chunk_shape = kChunk;
  const FieldSpec locations{"mask.fg_locations", FieldKind::kNdarray, DType::kI32, {-1, 4}, {}, {}};
  WriterOptions o;
  o.fsync = false;
  const std::vector<FieldSpec> fields =
      mask ? std::vector<FieldSpec>{image, label, locations} : std::vector<FieldSpec>{image};
  auto w = DatasetWriter::Create(dir, fields, o);
  REQUIRE(w.ok());
  for (size_t i = 0; i < kVolumes.size(); ++i) {
    const Shape& s = kVolumes[i];
    const auto n = static_cast<size_t>(s[1] * s[2] * s[3]);
    std::vector<uint8_t> px(2 * n), labels(n, 0);
    for (size_t k = 0; k < n; ++k) {
      const auto v = static_cast<uint16_t>(k * 7 + i);
      std::memcpy(&px[2 * k], &v, 2);
    }
    labels[n / 2] = 1;  // one foreground voxel, listed in fg_locations
    const int32_t row[4] = {1, static_cast<int32_t>((n / 2) / (s[2] * s[3])),
                            static_cast<int32_t>((n / 2) / s[3] % s[2]), static_cast<int32_t>((n / 2) % s[3])};
    std::vector<uint8_t> rows(sizeof row);
    std::memcpy(rows.data(), row, sizeof row);
    SampleInput in;
    in.split = i < kTrainVolumes ? "train" : "test";
    in.values = {FieldValue::Array(px, s)};
    const bool unlabeled = i >= kTrainVolumes;
    if (mask) {
      in.values.push_back(unlabeled ? FieldValue::Array({}, {0, s[1], s[2], s[3]}) : FieldValue::Array(labels, s));
      in.values.push_back(unlabeled ? FieldValue::Array({}, {0, 4}) : FieldValue::Array(rows, {1, 4}));
    }
    const Status st = (*w)->Append(std::move(in));
    INFO(st.ToString());
    REQUIRE(st.ok());
  }
  REQUIRE((*w)->Finish().ok());
}

#ifdef SHARDIFY_TOOLS_WITH_READER
// A dataset with one u8 ndarray field `name` of shape `shape` (2 samples).
void WriteArrays(const std::string& dir, const std::string& name, const Shape& shape) {
  WriterOptions o;
  o.fsync = false;
  auto w = DatasetWriter::Create(dir, {{name, FieldKind::kNdarray, DType::kU8, shape, {}, {}}}, o);
  REQUIRE(w.ok());
  for (int i = 0; i < 2; ++i) {
    SampleInput in;
    in.values = {FieldValue::Array(std::vector<uint8_t>(static_cast<size_t>(*ElementCount(shape)), 1), shape)};
    REQUIRE((*w)->Append(std::move(in)).ok());
  }
  REQUIRE((*w)->Finish().ok());
}

// The most chunks of one field a patch can touch: per spatial axis ceil(patch / chunk) + 1.
uint64_t MaxChunksPerPatch(const Shape& patch) {
  uint64_t n = 1;
  for (size_t a = 0; a < patch.size(); ++a)
    n *= static_cast<uint64_t>((patch[a] + kChunk[a + 1] - 1) / kChunk[a + 1] + 1);
  return n;
}

TEST_CASE("tools: bench --patch times random patches against whole volumes", "[tools]") {
  TempDir tmp;
  for (bool mask : {false, true}) {
    INFO("mask " << mask);
    const std::string dir = tmp / (mask ? "with-mask" : "image-only");
    WriteVolumes(dir, mask);
    BenchOptions o;
    o.patch = "16x16x16";
    o.threads = 2;
    o.epochs = 2;
    o.seed = 3;
    auto r = Bench(dir, o);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    const PatchBench& p = r->patch;
    CHECK(r->mode == "patch");
    CHECK(p.patch == Shape{16, 16, 16});
    CHECK(p.label_field == (mask ? "mask" : ""));
    CHECK(p.patches == 32);  // 8 per sample, at least 32
    CHECK(p.patch_bytes == 32 * 16 * 16 * 16 * (mask ? 3u : 2u));
    CHECK(p.volumes == 2 * kTrainVolumes);
    uint64_t voxels = 0;
    for (uint64_t i = 0; i < kTrainVolumes; ++i) voxels += static_cast<uint64_t>(*ElementCount(kVolumes[i]));
    CHECK(p.volume_bytes == 2 * 2 * voxels);
    CHECK(p.patches_per_s() > 0);
    CHECK(p.full_volumes_per_s() > 0);
    CHECK(p.speedup() > 0);
    CHECK(p.chunks_per_patch() > 0);
    CHECK(p.chunks_per_patch() <= (mask ? 2 : 1) * MaxChunksPerPatch({16, 16, 16}));
    o.patches = 5;
    o.threads = 1;
    auto few = Bench(dir, o);
    REQUIRE(few.ok());
    CHECK(few->patch.patches == 5);
  }
}

TEST_CASE("tools: bench --patch prints one JSON object or a line per phase", "[tools]") {
  TempDir tmp;
  WriteVolumes(tmp / "ds", true);
  BenchOptions o;
  o.patch = "8x8x8";
  o.json = true;
  std::ostringstream out;
  REQUIRE(RunBench(tmp / "ds", o, out).ok());
  const auto j = nlohmann::json::parse(out.str());
  for (const char* key :
       {"mode", "patch", "patches", "patch_seconds", "patches_per_s", "volumes", "volume_seconds", "full_volumes_per_s",
        "patch_bytes", "volume_bytes", "bytes", "speedup", "chunks_per_patch"}) {
    CHECK(j.contains(key));
  }
  CHECK(j["mode"] == "patch");
  CHECK(j["patch"] == nlohmann::json({8, 8, 8}));
  CHECK(j["patches"] == 32);
  CHECK(j["volumes"] == kTrainVolumes);
  CHECK(j["chunks_per_patch"].get<double>() <= 2 * MaxChunksPerPatch({8, 8, 8}));
  o.json = false;
  o.split = "test";
  std::ostringstream text;
  REQUIRE(RunBench(tmp / "ds", o, text).ok());
  // The test split's one case is unlabeled: its mask patches have no channels.
  CHECK_THAT(text.str(), Catch::Contains("patches 8x8x8 with mask: 32,") && Catch::Contains("patches/s") &&
                             Catch::Contains("whole volumes: 1,") && Catch::Contains("volumes/s") &&
                             Catch::Contains("patches/s over volumes/s"));
}

TEST_CASE("tools: bench --patch of an unchunked image decodes whole blobs", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  BenchOptions o;
  o.patch = "1x4x4";
  auto r = Bench(tmp / "ds", o);
  REQUIRE(r.ok());
  CHECK(r->patch.patches == 8 * test::kTrain);
  CHECK(r->patch.chunks == 0);
  CHECK(r->patch.volumes == test::kTrain);
}
#endif

TEST_CASE("tools: bench --patch refuses bad patches and datasets without a patchable image", "[tools]") {
  TempDir tmp;
  WriteVolumes(tmp / "vol", false);
  BenchOptions o;
  for (const char* bad : {"0x4x4", "4x4", "axbxc", "4x4x4x4", "4x-4x4", "4x4x", "x4x4", "4 x4x4"}) {
    INFO(bad);
    o.patch = bad;
    const Status s = Bench(tmp / "vol", o).status();
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains("--patch"));
  }
  o.patch = "4x4x4";
#ifdef SHARDIFY_TOOLS_WITH_READER
  WriteArrays(tmp / "flat", "image", {8, 12});
  WriteArrays(tmp / "noimage", "volume", {1, 4, 4, 4});
  const Status rank = Bench(tmp / "flat", o).status();
  CHECK(rank.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(rank.message(), Catch::Contains("more than the rank of field 'image'"));
  const Status missing = Bench(tmp / "noimage", o).status();
  CHECK(missing.code() == StatusCode::kNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("'image'"));
#else
  const Status s = Bench(tmp / "vol", o).status();
  CHECK(s.code() == StatusCode::kUnsupported);
  CHECK_THAT(s.message(), Catch::Contains("reader"));
#endif
}

}  // namespace
}  // namespace shardify::tools
