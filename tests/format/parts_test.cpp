// Datasets written in parts: the part manifest, and merging parts into one dataset
// (renumbered shards, shifted sample numbers, splits and statistics, re-runs, refusals).
#include "format/parts.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <set>

#include "base/file.h"
#include "format/dataset.h"
#include "format/destination_internal.h"
#include "tests/common/temp_dir.h"
#include "tests/format/fixtures.h"

using namespace shardify;
using shardify::testing::ImageLabelFields;
using shardify::testing::ImageLabelSample;
using shardify::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kShardBytes = 600;  // a few samples per shard

PartInfo Slice(uint32_t k, uint32_t n, uint64_t total) {
  PartInfo p;
  p.index = k;
  p.count = n;
  p.first_sample = total * (k - 1) / n;
  p.samples = total * k / n - p.first_sample;
  return p;
}

std::string SplitOf(uint64_t i, uint64_t total) { return i < total * 3 / 4 ? "train" : "val"; }

// Writes part k of n of samples [0, total) into dir/parts/, leaving out those in `skip`
// (inputs that failed), as a converter does.
void WritePart(const std::string& dir, uint32_t k, uint32_t n, uint64_t total, const std::set<uint64_t>& skip = {}) {
  WriterOptions o;
  o.part = Slice(k, n, total);
  o.target_shard_bytes = kShardBytes;
  o.fsync = false;
  o.classes = {"c0", "c1"};
  o.provenance.source = "src";
  auto w = DatasetWriter::Create(PartDir(dir, o.part), ImageLabelFields(), o);
  REQUIRE(w.ok());
  for (uint64_t i = o.part.first_sample; i < o.part.first_sample + o.part.samples; ++i) {
    if (skip.count(i) == 0) REQUIRE((*w)->Append(ImageLabelSample(i, SplitOf(i, total))).ok());
  }
  REQUIRE((*w)->Finish().ok());
}

// The same samples through one writer.
void WriteWhole(const std::string& dir, uint64_t total, const std::set<uint64_t>& skip = {}) {
  WriterOptions o;
  o.target_shard_bytes = kShardBytes;
  o.fsync = false;
  o.classes = {"c0", "c1"};
  o.provenance.source = "src";
  auto w = DatasetWriter::Create(dir, ImageLabelFields(), o);
  REQUIRE(w.ok());
  for (uint64_t i = 0; i < total; ++i) {
    if (skip.count(i) == 0) REQUIRE((*w)->Append(ImageLabelSample(i, SplitOf(i, total))).ok());
  }
  REQUIRE((*w)->Finish().ok());
}

MergeSummary MergeOk(const std::string& dir) {
  MergeOptions o;
  o.fsync = false;
  auto r = MergeParts(dir, o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

Status MergeError(const std::string& dir) {
  auto r = MergeParts(dir, MergeOptions{false, {}, {}});
  REQUIRE_FALSE(r.ok());
  CHECK_FALSE(fs::exists(dir + "/manifest.sfm"));
  return r.status();
}

// `merged` holds the samples of `whole`, with the same splits and statistics; every shard
// passes the reader's checks (its index's first_sample included).
void ExpectSame(const std::string& whole, const std::string& merged) {
  auto a = Dataset::Open(whole), b = Dataset::Open(merged);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const Manifest &ma = (*a)->manifest(), &mb = (*b)->manifest();
  REQUIRE(mb.num_samples == ma.num_samples);
  CHECK(mb.splits == ma.splits);
  CHECK(mb.fields == ma.fields);
  CHECK(mb.classes == ma.classes);
  REQUIRE(mb.stats.size() == 1);
  CHECK(mb.stats[0].count == ma.stats[0].count);
  CHECK(mb.stats[0].min == ma.stats[0].min);
  CHECK(mb.stats[0].max == ma.stats[0].max);
  CHECK(std::fabs(mb.stats[0].mean - ma.stats[0].mean) < 1e-12 * ma.stats[0].mean);
  CHECK(std::fabs(mb.stats[0].stddev - ma.stats[0].stddev) < 1e-12 * ma.stats[0].stddev);
  for (size_t s = 0; s < mb.shards.size(); ++s) {
    CHECK(mb.shards[s].file_name == ShardFileName(s));
    CHECK((*b)->CheckShard(s).ok());
  }
  Decoder dec;
  std::vector<uint8_t> x(64), y(64);
  for (uint64_t i = 0; i < ma.num_samples; ++i) {
    auto sa = (*a)->Sample(i), sb = (*b)->Sample(i);
    REQUIRE(sb.ok());
    REQUIRE(sa->Decode(0, x.data(), x.size(), dec).ok());
    REQUIRE(sb->Decode(0, y.data(), y.size(), dec).ok());
    CHECK(x == y);
    CHECK(*sa->int_value(1) == *sb->int_value(1));
    CHECK(*sa->bytes_value(2) == *sb->bytes_value(2));
  }
}

}  // namespace

TEST_CASE("parts: a part manifest numbers samples from the part's first and is no dataset") {
  TempDir dir;
  WritePart(dir.path(), 2, 3, 30);
  const PartInfo part = Slice(2, 3, 30);
  const std::string pdir = PartDir(dir.path(), part);
  CHECK(pdir == dir / "parts/00002-of-00003");
  CHECK(fs::exists(pdir + "/part.sfm"));
  CHECK_FALSE(fs::exists(pdir + "/manifest.sfm"));
  auto m = ReadPartManifest(pdir);
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  CHECK(m->num_samples == 10);
  CHECK(m->shards.front().first_sample == 10);
  CHECK(m->splits.front().first_sample == 10);
  CHECK(*PartOf(*m, "x") == part);
  auto bytes = ReadWholeFile(pdir + "/part.sfm", 1 << 20);
  auto as_dataset = DecodeManifestFile(bytes->data(), bytes->size(), "part.sfm");
  REQUIRE_FALSE(as_dataset.ok());
  CHECK_THAT(as_dataset.status().message(), Catch::Contains("starts at sample 10, expected 0"));
  CHECK(Dataset::Open(pdir).status().code() == StatusCode::kNotFound);
  CHECK(ReadPartManifest(dir / "parts/00001-of-00003").status().code() == StatusCode::kNotFound);
  WriterOptions bad;
  bad.part = PartInfo{4, 3, 0, 1};
  CHECK_THAT(DatasetWriter::Create(dir / "bad", ImageLabelFields(), bad).status().message(), Catch::Contains("1..3"));
}

TEST_CASE("parts: merge renames the shards in order and combines splits and statistics") {
  TempDir dir;
  const std::string dst = dir / "merged";
  for (uint32_t k : {3u, 1u, 2u}) WritePart(dst, k, 3, 30);  // in any order, as parallel runs finish
  WriteWhole(dir / "whole", 30);
  const MergeSummary s = MergeOk(dst);
  CHECK(s.parts == 3);
  CHECK(s.samples == 30);
  CHECK(s.shards_rewritten == 0);
  CHECK_FALSE(fs::exists(dst + "/parts"));
  ExpectSame(dir / "whole", dst);
  const MergeSummary again = MergeOk(dst);
  CHECK(again.already_merged);
  CHECK(again.samples == 30);
}

TEST_CASE("parts: samples left out of a part shift the next, their shards get a new first_sample") {
  TempDir dir;
  const std::string dst = dir / "merged";
  const std::set<uint64_t> skip = {3, 4, 12};
  for (uint32_t k : {1u, 2u, 3u}) WritePart(dst, k, 3, 30, skip);
  WriteWhole(dir / "whole", 30, skip);
  const uint64_t later = ReadPartManifest(dst + "/parts/00002-of-00003")->shards.size() +
                         ReadPartManifest(dst + "/parts/00003-of-00003")->shards.size();
  const MergeSummary s = MergeOk(dst);
  CHECK(s.samples == 27);
  CHECK(s.shards_rewritten == later);
  CHECK(s.bytes_rewritten > 0);
  ExpectSame(dir / "whole", dst);
}

TEST_CASE("parts: a merge interrupted half-way runs again") {
  TempDir dir;
  const std::string dst = dir / "merged";
  for (uint32_t k : {1u, 2u}) WritePart(dst, k, 2, 20, {1});
  WriteWhole(dir / "whole", 20, {1});
  // As a merge killed after moving part 1's first shard and copying part 2's first one.
  REQUIRE(RenameFile(dst + "/parts/00001-of-00002/shard-00000.sfs", dst + "/shard-00000.sfs").ok());
  const uint64_t part1_shards = ReadPartManifest(dst + "/parts/00001-of-00002")->shards.size();
  fs::copy_file(dst + "/parts/00002-of-00002/shard-00000.sfs", dst + "/" + ShardFileName(part1_shards));
  REQUIRE(WriteFileAtomic(dst + "/shard-00099.sfs.tmp", "x", 1, false).ok());
  MergeOk(dst);
  CHECK_FALSE(fs::exists(dst + "/shard-00099.sfs.tmp"));
  ExpectSame(dir / "whole", dst);
}

TEST_CASE("parts: merge refuses a damaged shard and a part being written, naming them") {
  TempDir dir;
  const std::string dst = dir / "merged";
  for (uint32_t k : {1u, 2u, 3u}) WritePart(dst, k, 3, 30);
  const std::string shard = dst + "/parts/00002-of-00003/shard-00000.sfs";
  std::vector<uint8_t> bytes = *ReadWholeFile(shard, 1 << 20);
  bytes[bytes.size() - 20] ^= 1;  // a footer byte: its checksum fails
  REQUIRE(WriteFileAtomic(shard, bytes.data(), bytes.size(), false).ok());
  Status st = MergeError(dst);
  CHECK(st.code() == StatusCode::kCorruption);
  CHECK_THAT(st.message(), Catch::Contains("part 2/3") && Catch::Contains("shard-00000.sfs"));
  bytes[bytes.size() - 20] ^= 1;
  REQUIRE(WriteFileAtomic(shard, bytes.data(), bytes.size(), false).ok());
  {
    auto lock = FileLock::Acquire(dst + "/parts/00003-of-00003/" + detail::kLockFileName);
    REQUIRE(lock.ok());
    st = MergeError(dst);
    CHECK(st.code() == StatusCode::kBusy);
    CHECK_THAT(st.message(), Catch::Contains("part 3/3"));
  }
  CHECK(MergeOk(dst).samples == 30);
  CHECK(MergeParts(dir / "nothing").status().code() == StatusCode::kNotFound);
}

TEST_CASE("parts: a part folder that is a symbolic link is refused, and the folder it names left as it was") {
  TempDir dir;
  const std::string dst = dir / "merged";
  for (uint32_t k : {1u, 2u}) WritePart(dst, k, 2, 20);
  fs::rename(dst + "/parts/00002-of-00002", dir / "elsewhere");
  fs::create_directory_symlink(dir / "elsewhere", dst + "/parts/00002-of-00002");
  const auto files = std::distance(fs::directory_iterator(dir / "elsewhere"), fs::directory_iterator());
  const Status st = MergeError(dst);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("00002-of-00002") && Catch::Contains("symbolic link"));
  CHECK(std::distance(fs::directory_iterator(dir / "elsewhere"), fs::directory_iterator()) == files);
  CHECK(fs::exists(dst + "/parts/00001-of-00002/part.sfm"));
}

TEST_CASE("parts: a hidden folder under parts/ is passed over, and left there by the merge") {
  TempDir dir;
  const std::string dst = dir / "merged";
  for (uint32_t k : {1u, 2u}) WritePart(dst, k, 2, 20);
  REQUIRE(MakeDirs(dst + "/parts/.00001-of-00002").ok());
  REQUIRE(WriteFileAtomic(dst + "/parts/.00001-of-00002/note", "x", 1, false).ok());
  CHECK(MergeOk(dst).samples == 20);
  CHECK(fs::exists(dst + "/parts/.00001-of-00002/note"));
  CHECK_FALSE(fs::exists(dst + "/parts/00001-of-00002"));
  CHECK(MergeOk(dst).already_merged);
}
