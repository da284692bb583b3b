// Conversion in parts: N parts + merge hold what one run writes, field by field; merge
// refuses parts that are missing, incomplete, duplicated or of another conversion; a
// complete part is not converted again; an interrupted one never looks complete.
#include "convert/pipeline/parts.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "convert/programs/cli.h"
#include "format/writer.h"
#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;
namespace fs = std::filesystem;

namespace {

using State = ConvertSummary::PartState;

// Converts parts 1..n of src into dst (each must succeed) and merges them.
MergeSummary ConvertInParts(const std::string& src, const std::string& dst, uint32_t n, ConvertOptions o) {
  o.parts = n;
  for (uint32_t k = 1; k <= n; ++k) {
    o.part = k;
    auto r = RunConvert(src, dst, o);
    INFO("part " << k << "/" << n << ": " << r.status().ToString());
    REQUIRE(r.ok());
    CHECK(r->part_state == State::kConverted);
  }
  auto merged = Merge(dst, /*fsync=*/false);
  INFO(merged.status().ToString());
  REQUIRE(merged.ok());
  CHECK(merged->parts == n);
  CHECK_FALSE(fs::exists(dst + "/parts"));
  return *merged;
}

bool Close(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(a)); }

// `merged` holds what `one` holds: samples in order with their arrays, shapes, labels and
// paths; splits, class names and counts, fields with their dictionaries, statistics.
void ExpectSameDataset(const std::string& one, const std::string& merged) {
  const Readback a = Open(one), b = Open(merged);
  const Manifest &ma = a.ds->manifest(), &mb = b.ds->manifest();
  REQUIRE(mb.num_samples == ma.num_samples);
  CHECK(mb.splits == ma.splits);
  CHECK(mb.classes == ma.classes);
  CHECK(mb.fields == ma.fields);
  CHECK(mb.format_version == ma.format_version);
  REQUIRE(mb.stats.size() == ma.stats.size());
  for (size_t i = 0; i < ma.stats.size(); ++i) {
    INFO("stats of " << ma.stats[i].field);
    CHECK(mb.stats[i].field == ma.stats[i].field);
    CHECK(mb.stats[i].count == ma.stats[i].count);
    CHECK(mb.stats[i].min == ma.stats[i].min);
    CHECK(mb.stats[i].max == ma.stats[i].max);
    CHECK(Close(mb.stats[i].mean, ma.stats[i].mean));
    CHECK(Close(mb.stats[i].stddev, ma.stats[i].stddev));
  }
  std::map<std::pair<std::string, int64_t>, int> counts_a, counts_b;  // (split, label) -> samples
  for (uint64_t i = 0; i < ma.num_samples; ++i) {
    INFO("sample " << i);
    CHECK(b.Str(i, "path") == a.Str(i, "path"));
    CHECK(b.Int(i, "label") == a.Int(i, "label"));
    CHECK(b.ShapeOf(i, "image") == a.ShapeOf(i, "image"));
    CHECK(b.Array(i, "image") == a.Array(i, "image"));
  }
  for (const SplitInfo& s : ma.splits) {
    for (uint64_t i = s.first_sample; i < s.first_sample + s.num_samples; ++i) {
      ++counts_a[{s.name, a.Int(i, "label")}];
      ++counts_b[{s.name, b.Int(i, "label")}];
    }
  }
  CHECK(counts_b == counts_a);
}

std::string Text(const std::string& path) {
  const std::vector<uint8_t> b = ReadBytes(path);
  return std::string(b.begin(), b.end());
}

}  // namespace

TEST_CASE("parts: 3 parts + merge hold what one run writes, with a random split across parts") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 45);  // 3 classes, varying shapes ([-1, -1, 8])
  ConvertOptions o;
  o.split = {{"train", 0.6}, {"val", 0.2}, {"test", 0.2}};
  o.seed = 5;
  o.level = 3;
  o.dict = 0;
  o.shard_bytes = 512;  // several shards per part
  REQUIRE(RunConvert(src, dir / "one", o).ok());
  const MergeSummary s = ConvertInParts(src, dir / "merged", 3, o);
  CHECK(s.samples == 45);
  CHECK(s.shards_rewritten == 0);
  CHECK(s.shards > 3);
  ExpectSameDataset(dir / "one", dir / "merged");
  const Readback merged = Open(dir / "merged");
  const Manifest& m = merged.ds->manifest();
  for (size_t i = 0; i < m.shards.size(); ++i) CHECK(m.shards[i].file_name == ShardFileName(i));
  CHECK(std::find(m.provenance.options.begin(), m.provenance.options.end(), KeyValue{"parts", "3"}) !=
        m.provenance.options.end());
}

TEST_CASE("parts: every part trains the same dictionary, and the merged dataset has it") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 90, 24);
  ConvertOptions o;
  o.dict = 1;
  o.level = 3;
  auto one = RunConvert(src, dir / "one", o);
  REQUIRE(one.ok());
  REQUIRE(one->dictionary);
  ConvertInParts(src, dir / "merged", 2, o);
  ExpectSameDataset(dir / "one", dir / "merged");  // fields compare their dictionary bytes
  const Readback read = Open(dir / "merged");
  const Manifest& merged = read.ds->manifest();
  CHECK_FALSE(merged.fields[0].dictionary.empty());

  // The writer records its raw-literals choice in the provenance once the dictionary is
  // trained; that is no option asked for, so a part run again is complete already, or
  // merged already, rather than "another conversion".
  REQUIRE(std::find_if(merged.provenance.options.begin(), merged.provenance.options.end(), [](const KeyValue& kv) {
            return kv.key == kRawLiteralsKey;
          }) != merged.provenance.options.end());
  o.parts = 2;
  o.part = 1;
  auto again = RunConvert(src, dir / "merged", o);
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK(again->part_state == State::kMerged);
  REQUIRE(RunConvert(src, dir / "part", o).ok());
  auto complete = RunConvert(src, dir / "part", o);
  INFO(complete.status().ToString());
  REQUIRE(complete.ok());
  CHECK(complete->part_state == State::kComplete);
}

TEST_CASE("parts: skipped inputs shift the later parts, whose shards merge renumbers") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 30);
  DamageImageData(src + "/c0/0003.png");  // fails when decoded, in part 1
  WriteBytes(src + "/c1/0004.png", {});   // fails inspection, which every part does
  ConvertOptions o;
  o.skip_errors = true;
  o.dict = 0;
  o.shard_bytes = 1024;
  auto one = RunConvert(src, dir / "one", o);
  REQUIRE(one.ok());
  REQUIRE(one->skipped.size() == 2);
  const MergeSummary s = ConvertInParts(src, dir / "merged", 3, o);
  CHECK(s.samples == 28);
  CHECK(s.shards_rewritten > 0);  // the shards of parts 2 and 3 start one sample earlier
  CHECK(s.table_rows == 2);
  ExpectSameDataset(dir / "one", dir / "merged");
  CHECK(Text(dir / "merged/skipped.tsv") == Text(dir / "one/skipped.tsv"));
}

TEST_CASE("parts: --preprocess nnunet in parts leaves the plans and fingerprint of the whole in the merged dataset") {
  TempDir dir;
  for (int i = 0; i < 3; ++i) {
    WriteVolume(dir / ("src/images/c" + std::to_string(i) + ".nii"), DType::kI16, 4, 6, 5, i + 1);
    WriteLabels(dir / ("src/masks/c" + std::to_string(i) + ".nii"), 4, 6, 5, i + 1);
  }
  ConvertOptions o;
  REQUIRE(ApplyPreset("nnunet", {}, &o.preprocess).ok());
  o.preprocess.intensity_samples = 3000;
  auto one = RunConvert(dir / "src", dir / "one", o);
  REQUIRE(one.ok());
  ConvertInParts(dir / "src", dir / "merged", 2, o);
  const Readback a = Open(dir / "one"), b = Open(dir / "merged");
  for (uint64_t i = 0; i < 3; ++i) CHECK(b.Array(i, "image") == a.Array(i, "image"));
  for (const std::string name : {"/nnUNetPlans.json", "/dataset_fingerprint.json"}) {
    INFO(name);
    CHECK(Text(dir / "merged" + name) == Text(dir / "one" + name));
    CHECK(Text(dir / "one" + name).find("spacing") != std::string::npos);
  }
}

TEST_CASE("parts: merge refuses missing, incomplete, duplicate and mismatched parts, naming the part") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 12);
  const std::string dst = dir / "ds";
  ConvertOptions o;
  o.dict = 0;
  o.parts = 3;
  auto convert = [&](uint32_t k, ConvertOptions with) {
    with.part = k;
    with.parts = 3;
    return RunConvert(src, dst, with);
  };
  auto merge_error = [&] {
    auto r = Merge(dst, false);
    REQUIRE_FALSE(r.ok());
    CHECK_FALSE(fs::exists(dst + "/manifest.sfm"));
    return r.status();
  };
  REQUIRE(convert(1, o).ok());
  REQUIRE(convert(3, o).ok());
  Status st = merge_error();
  CHECK(st.code() == StatusCode::kNotFound);
  CHECK_THAT(st.message(), Catch::Contains("part 2/3") && Catch::Contains("missing"));

  ConvertOptions other = o;
  other.level = 7;
  REQUIRE(convert(2, other).ok());
  st = merge_error();
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("part 2/3") && Catch::Contains("option 'level' is '7'"));
  auto again = convert(2, o);  // the part there is of another conversion: refused unless overwrite
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == StatusCode::kAlreadyExists);
  CHECK_THAT(again.status().message(), Catch::Contains("--overwrite"));

  fs::copy(dir / "src", dir / "elsewhere", fs::copy_options::recursive);
  fs::remove_all(dst + "/parts/00002-of-00003");
  ConvertOptions moved = o;
  moved.part = 2;
  REQUIRE(RunConvert(dir / "elsewhere", dst, moved).ok());
  CHECK_THAT(merge_error().message(), Catch::Contains("part 2/3") && Catch::Contains("source"));

  fs::remove_all(dst + "/parts/00002-of-00003");
  fs::copy(dst + "/parts/00001-of-00003", dst + "/parts/00002-of-00003");
  CHECK_THAT(merge_error().message(), Catch::Contains("part 2/3") && Catch::Contains("duplicate"));

  ConvertOptions replace = o;
  replace.overwrite = true;
  REQUIRE(convert(2, replace).ok());
  fs::create_directories(dst + "/parts/00001-of-00002");
  CHECK_THAT(merge_error().message(), Catch::Contains("00001-of-00002") && Catch::Contains("different conversions"));
  fs::remove(dst + "/parts/00001-of-00002");

  fs::remove(dst + "/parts/00003-of-00003/part.sfm");  // what a crash before the end leaves
  st = merge_error();
  CHECK(st.code() == StatusCode::kNotFound);
  CHECK_THAT(st.message(), Catch::Contains("part 3/3") && Catch::Contains("not complete"));
  REQUIRE(convert(3, o).ok());
  REQUIRE(Merge(dst, false).ok());
  ConvertOptions whole = o;
  whole.parts = 0;
  REQUIRE(RunConvert(src, dir / "one", whole).ok());
  ExpectSameDataset(dir / "one", dst);
}

TEST_CASE("parts: a complete part is not converted again, an interrupted one never looks complete") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 20);
  const std::string dst = dir / "ds";
  ConvertOptions o;
  o.dict = 0;
  o.shard_bytes = 1024;
  o.parts = 2;
  o.part = 1;
  REQUIRE(RunConvert(src, dst, o).ok());
  const std::string part1 = dst + "/parts/00001-of-00002";
  const auto before = DirBytes(part1);
  const auto written = fs::last_write_time(part1 + "/part.sfm");
  auto rerun = RunConvert(src, dst, o);
  REQUIRE(rerun.ok());
  CHECK(rerun->part_state == State::kComplete);
  CHECK(rerun->samples == 10);
  CHECK(DirBytes(part1) == before);
  CHECK(fs::last_write_time(part1 + "/part.sfm") == written);

  // Cancelled half-way, after some shards: the writer removes what it wrote.
  std::atomic<bool> cancel{false};
  CancelAt sink(&cancel, 6);
  o.part = 2;
  o.cancel = &cancel;
  o.source = src;
  o.dest = dst;
  o.fsync = false;
  auto cancelled = Convert(o, &sink);
  REQUIRE_FALSE(cancelled.ok());
  CHECK(cancelled.status().code() == StatusCode::kCancelled);
  const std::string part2 = dst + "/parts/00002-of-00002";
  CHECK_FALSE(HasDatasetFiles(part2));
  CHECK_FALSE(fs::exists(part2 + "/part.sfm"));
  // Killed half-way: shards and a temporary part manifest, but no part.sfm.
  fs::create_directories(part2);
  fs::copy_file(part1 + "/shard-00000.sfs", part2 + "/shard-00000.sfs");
  fs::copy_file(part1 + "/part.sfm", part2 + "/part.sfm.tmp");
  auto merged = Merge(dst, false);
  REQUIRE_FALSE(merged.ok());
  CHECK_THAT(merged.status().message(), Catch::Contains("part 2/2") && Catch::Contains("not complete"));

  o.cancel = nullptr;
  auto second = RunConvert(src, dst, o);  // the part alone, again
  REQUIRE(second.ok());
  CHECK(second->part_state == State::kConverted);
  CHECK_FALSE(fs::exists(part2 + "/part.sfm.tmp"));
  merged = Merge(dst, false);
  REQUIRE(merged.ok());
  CHECK_FALSE(merged->already_merged);
  ConvertOptions whole = o;
  whole.parts = whole.part = 0;
  REQUIRE(RunConvert(src, dir / "one", whole).ok());
  ExpectSameDataset(dir / "one", dst);

  // Once merged: a part run has nothing to do, merge says so, a one-run conversion is refused.
  auto after = RunConvert(src, dst, o);
  REQUIRE(after.ok());
  CHECK(after->part_state == State::kMerged);
  merged = Merge(dst, false);
  REQUIRE(merged.ok());
  CHECK(merged->already_merged);
  CHECK(Merge(dir / "one", false).status().code() == StatusCode::kAlreadyExists);
}

TEST_CASE("parts: --part K/N and auto from the launcher's environment") {
  std::map<std::string, std::string> env;
  const EnvLookup lookup = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK(*ParsePart("1/4", lookup) == std::pair<uint32_t, uint32_t>{1, 4});
  CHECK(*ParsePart("4/4", lookup) == std::pair<uint32_t, uint32_t>{4, 4});
  for (const char* bad : {"0/4", "5/4", "1/0", "x/4", "1/", "4", "1/100000", "-1/4"}) {
    INFO(bad);
    auto r = ParsePart(bad, lookup);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("--part"));
  }
  CHECK_THAT(ParsePart("auto", lookup).status().message(), Catch::Contains("RANK"));
  env = {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}};
  CHECK(*ParsePart("auto", lookup) == std::pair<uint32_t, uint32_t>{3, 3});
  env["SLURM_ARRAY_TASK_ID"] = "11";
  env["SLURM_ARRAY_TASK_MIN"] = "10";
  env["SLURM_ARRAY_TASK_MAX"] = "17";
  env["SLURM_ARRAY_TASK_COUNT"] = "8";
  CHECK(*ParsePart("auto", lookup) == std::pair<uint32_t, uint32_t>{2, 8});  // the array wins over srun
  env["SLURM_ARRAY_TASK_COUNT"] = "4";                                       // --array=10-17:2
  CHECK_THAT(ParsePart("auto", lookup).status().message(), Catch::Contains("consecutive"));
  env["RANK"] = "0";
  env["WORLD_SIZE"] = "2";
  CHECK(*ParsePart("auto", lookup) == std::pair<uint32_t, uint32_t>{1, 2});  // torchrun's wins over Slurm's
  env["RANK"] = "2";
  CHECK_THAT(ParsePart("auto", lookup).status().message(), Catch::Contains("RANK=2"));

  auto c = ParseCommandLine({"src", "-o", "dst", "--part", "2/4"});
  REQUIRE(c.ok());
  CHECK(c->options.part == 2);
  CHECK(c->options.parts == 4);
  CHECK(ParseCommandLine({"src", "-o", "dst"})->options.parts == 0);
}

TEST_CASE("parts: shardify --part and shardify merge on the command line", "[subprocess]") {
  TempDir dir;
  const std::string src = ManyPngs(dir, 8), dst = dir / "ds", bin = SHARDIFY_BIN;
  std::string out;
  CHECK(Shell(bin + " '" + src + "' -o '" + dst + "' --no-fsync --part 0/2", &out) == 2);
  CHECK_THAT(out, Catch::Contains("--part"));
  out.clear();
  CHECK(Shell(bin + " merge '" + dst + "'", &out) == 1);  // nothing converted yet
  CHECK_THAT(out, Catch::Contains("no such directory"));
  for (const char* k : {"1/2", "2/2"}) {
    out.clear();
    CHECK(Shell(bin + " '" + src + "' -o '" + dst + "' --no-fsync --part " + k, &out) == 0);
    CHECK_THAT(out, Catch::Contains(std::string("part ") + k + ": samples"));
  }
  out.clear();
  CHECK(Shell(bin + " merge '" + dst + "' --no-fsync", &out) == 0);
  CHECK_THAT(out, Catch::Contains("8 samples from 2 parts"));
  out.clear();
  CHECK(Shell(bin + " merge", &out) == 2);
  out.clear();
  CHECK(Shell(bin + " merge --help", &out) == 0);
  CHECK_THAT(out, Catch::Contains("--no-fsync"));
}
