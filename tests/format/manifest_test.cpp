#include "format/manifest.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "format/layout.h"

using namespace shardify;

namespace {
Manifest Sample() {
  Manifest m;
  m.format_version = kFormatVersion;
  m.fields = {{"image", FieldKind::kNdarray, DType::kU16, {-1, 256, 256}, {1, 2, 3}, {{"role", "image"}}},
              {"label", FieldKind::kInt, DType::kU8, {}, {}, {}}};
  m.num_samples = 10;
  m.splits = {{"train", 0, 8}, {"val", 8, 2}};
  m.classes = {"cat", "dog"};
  m.shards = {{"shard-00000.sfs", 1000, 0, 6, 77}, {"shard-00001.sfs", 900, 6, 4, 78}};
  m.provenance = {"shardify", "0.1.0", "/data/src", {{"level", "3"}}};
  m.stats = {{"image", 655360, 0, 4095, 100.5, 20.25}};
  return m;
}
}  // namespace

TEST_CASE("format: manifest encodes and decodes to an equal struct") {
  const Manifest m = Sample();
  const std::vector<uint8_t> bytes = EncodeManifestFile(m);
  auto back = DecodeManifestFile(bytes.data(), bytes.size(), "manifest.sfm");
  REQUIRE(back.ok());
  CHECK(*back == m);
  CHECK(EncodeManifestFile(*back) == bytes);  // deterministic
}

TEST_CASE("format: manifest validation names the offending entry") {
  Manifest m = Sample();
  m.shards[1].file_name = "../../etc/passwd";
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("not a plain file name"));
  for (const std::string bad : {"shard\n00001.sfs", "shard\x1b[2J.sfs", "..\\shard.sfs", "shard\xff.sfs"}) {
    m = Sample();
    m.shards[1].file_name = bad;
    const std::string message = ValidateManifest(m).message();
    CHECK_THAT(message, Catch::Contains("not a plain file name"));
    CHECK(std::none_of(message.begin(), message.end(), [](char c) { return c == '\n' || c == '\x1b'; }));
  }
  m = Sample();
  m.shards[1].first_sample = 5;
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("starts at sample 5, expected 6"));
  m = Sample();
  m.splits[1].num_samples = 1;
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("splits cover 9 samples"));
  m = Sample();
  m.fields[1].name = "image";
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("appears twice"));
  m = Sample();
  m.fields[0].dtype = static_cast<DType>(42);
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("unknown dtype code 42"));
  m = Sample();
  m.fields[0].shape = Shape(9, 1);
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("rank 9 exceeds 8"));
}

TEST_CASE("format: a damaged manifest file is corruption, never a crash") {
  const std::vector<uint8_t> good = EncodeManifestFile(Sample());
  for (size_t cut = 0; cut < good.size(); cut += 7) {  // every truncation
    auto r = DecodeManifestFile(good.data(), cut, "m");
    CHECK_FALSE(r.ok());
  }
  for (size_t i = 0; i < good.size(); ++i) {  // every single flipped byte
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x40;
    auto r = DecodeManifestFile(bad.data(), bad.size(), "m");
    REQUIRE_FALSE(r.ok());
    CHECK((r.status().code() == StatusCode::kCorruption || r.status().code() == StatusCode::kUnsupported));
  }
}
