#include "tools/verify.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/dataset.h"
#include "format/layout.h"
#include "tests/tools/fixtures.h"
#include "tools/common.h"

namespace shardify::tools {
namespace {

using test::TempDir;

struct Damaged {
  TempDir tmp;
  std::string dir = tmp / "ds";
  Manifest manifest;
  Damaged() {
    test::WriteGray8(dir);
    manifest = Dataset::Open(dir).value()->manifest();
    REQUIRE(manifest.shards.size() >= 3);
  }
  std::string ShardPath(size_t n) const { return dir + "/" + manifest.shards[n].file_name; }
};

VerifyReport Verify(const std::string& dir, bool quick = false) {
  VerifyOptions o;
  o.quick = quick;
  o.threads = 2;
  auto r = VerifyDataset(dir, o);
  REQUIRE(r.ok());
  return *r;
}

// Offset of the stored bytes of `sample`'s image blob inside its shard file.
size_t BlobOffset(const std::string& dir, uint64_t sample, const std::vector<uint8_t>& file) {
  auto ds = Dataset::Open(dir).value();
  const BlobInfo b = ds->Sample(sample).value().blob(0).value();
  const std::vector<uint8_t> stored(b.data, b.data + b.stored_size);
  auto it = std::search(file.begin(), file.end(), stored.begin(), stored.end());
  REQUIRE(it != file.end());
  return static_cast<size_t>(it - file.begin());
}

TEST_CASE("tools: verify of a clean dataset checks every blob and finds nothing", "[tools]") {
  Damaged d;
  const VerifyReport r = Verify(d.dir);
  CHECK(r.ok());
  CHECK(r.shards == d.manifest.shards.size());
  CHECK(r.samples == d.manifest.num_samples);
  CHECK(r.blobs == d.manifest.num_samples);
  std::ostringstream out;
  VerifyOptions o;
  o.json = true;
  REQUIRE(RunVerify(d.dir, o, out).ok());
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["ok"] == true);
  CHECK(j["problems"].empty());
  // The text says what was checked: every blob, or with --quick the structure only.
  std::ostringstream full, quick;
  REQUIRE(RunVerify(d.dir, VerifyOptions{}, full).ok());
  CHECK_THAT(full.str(), Catch::Contains(std::to_string(d.manifest.num_samples) + " blobs checked, 0 problem(s)"));
  VerifyOptions q;
  q.quick = true;
  REQUIRE(RunVerify(d.dir, q, quick).ok());
  CHECK_THAT(quick.str(), Catch::Contains("structure checked (file sizes, shard ends, footers, indices; no blob "
                                          "decoded or checksummed") &&
                              !Catch::Contains("blobs checked") &&
                              Catch::Contains(" " + std::to_string(d.manifest.num_samples) + " samples, "));
}

TEST_CASE("tools: verify names the shard and sample of a flipped blob byte and keeps going", "[tools]") {
  Damaged d;
  const uint64_t victim = d.manifest.shards[1].first_sample;
  std::vector<uint8_t> file = test::ReadFile(d.ShardPath(1));
  const size_t at = BlobOffset(d.dir, victim, file);
  file[at + 3] ^= 0x40;
  test::WriteFile(d.ShardPath(1), file);
  const VerifyReport r = Verify(d.dir);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].shard == d.manifest.shards[1].file_name);
  REQUIRE(r.problems[0].sample.has_value());
  CHECK(*r.problems[0].sample == victim);
  CHECK(r.problems[0].what.find("image") != std::string::npos);
  CHECK(r.samples == d.manifest.num_samples);  // every other sample was still checked
  CHECK(Verify(d.dir, true).ok());             // --quick does not read blobs
  std::ostringstream out;
  Status st = RunVerify(d.dir, VerifyOptions{}, out);
  CHECK(ExitCodeFor(st) == kExitProblem);
  CHECK(out.str().find("shard " + d.manifest.shards[1].file_name + " sample " + std::to_string(victim) + ": ") !=
        std::string::npos);
}

TEST_CASE("tools: verify reports a flipped index byte as a problem of its shard", "[tools]") {
  Damaged d;
  std::vector<uint8_t> file = test::ReadFile(d.ShardPath(2));
  const ShardFooter footer = DecodeShardFooter(file.data() + file.size() - kShardFooterSize);
  REQUIRE(footer.index_length > 0);
  file[footer.index_offset + footer.index_length / 2] ^= 0x01;
  test::WriteFile(d.ShardPath(2), file);
  for (bool quick : {false, true}) {
    const VerifyReport r = Verify(d.dir, quick);
    REQUIRE(r.problems.size() == 1);
    CHECK(r.problems[0].shard == d.manifest.shards[2].file_name);
    CHECK_FALSE(r.problems[0].sample.has_value());
  }
}

TEST_CASE("tools: verify reports a truncated shard and a deleted shard", "[tools]") {
  Damaged d;
  std::vector<uint8_t> file = test::ReadFile(d.ShardPath(0));
  file.resize(file.size() - 10);
  test::WriteFile(d.ShardPath(0), file);
  std::filesystem::remove(d.ShardPath(2));
  const VerifyReport r = Verify(d.dir, true);
  REQUIRE(r.problems.size() == 2);
  CHECK(r.problems[0].shard == d.manifest.shards[0].file_name);
  CHECK(r.problems[0].what.find("size") != std::string::npos);
  CHECK(r.problems[1].shard == d.manifest.shards[2].file_name);
  CHECK(r.problems[1].what.find("missing") != std::string::npos);
  std::ostringstream out;
  VerifyOptions o;
  o.json = true;
  CHECK(ExitCodeFor(RunVerify(d.dir, o, out)) == kExitProblem);
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["ok"] == false);
  REQUIRE(j["problems"].size() == 2);
  CHECK(j["problems"][1]["shard"] == d.manifest.shards[2].file_name);
  CHECK(j["problems"][1]["sample"].is_null());
}

TEST_CASE("tools: verify reports a damaged manifest, a missing one is a usage error", "[tools]") {
  Damaged d;
  const std::string path = d.dir + "/" + kManifestFileName;
  std::vector<uint8_t> m = test::ReadFile(path);
  m[m.size() / 2] ^= 0x10;
  test::WriteFile(path, m);
  const VerifyReport r = Verify(d.dir);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].shard == kManifestFileName);
  std::filesystem::remove(path);
  std::ostringstream out;
  CHECK(ExitCodeFor(RunVerify(d.dir, VerifyOptions{}, out)) == kExitUsage);
}

}  // namespace
}  // namespace shardify::tools
