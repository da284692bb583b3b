// Group-aware splits (--group-by): every sample of a group lands in one split.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

#include "convert/programs/cli.h"
#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;

namespace {

// UW-Madison's layout: 6 cases, 2 days each, 3 slices a day; no organ marked.
std::string RleSource(const TempDir& dir) {
  const std::string src = dir / "gi";
  std::string csv = "id,class,segmentation\n";
  std::vector<uint16_t> v(6 * 4, 300);
  for (int c = 1; c <= 6; ++c) {
    for (int d = 1; d <= 2; ++d) {
      const std::string day = "case" + std::to_string(c) + "_day" + std::to_string(d);
      for (int s = 1; s <= 3; ++s) {
        const std::string slice = "slice_000" + std::to_string(s);
        WriteRawPng(src + "/train/case" + std::to_string(c) + "/" + day + "/scans/" + slice + "_6_4_1.50_1.50.png", 6,
                    4, 0, 16, v);
        for (const char* organ : {"large_bowel", "small_bowel", "stomach"})
          csv += day + "_" + slice + "," + organ + ",\n";
      }
    }
  }
  WriteText(src + "/train.csv", csv);
  return src;
}

// path -> split of every sample of a converted dataset.
std::map<std::string, std::string> SplitOfPath(const std::string& dir) {
  Readback rb = Open(dir);
  std::map<std::string, std::string> out;
  for (const SplitInfo& s : rb.ds->manifest().splits) {
    for (uint64_t i = s.first_sample; i < s.first_sample + s.num_samples; ++i) out[rb.Str(i, "path")] = s.name;
  }
  return out;
}

// How many splits the samples of each group (prefix of `path` up to `cut`) landed in.
std::map<std::string, std::set<std::string>> SplitsOfGroups(const std::map<std::string, std::string>& split_of,
                                                            const std::string& cut) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [path, split] : split_of) out[path.substr(0, path.find(cut))].insert(split);
  return out;
}

ConvertOptions Grouped(const std::string& group_by, uint64_t seed = 5) {
  ConvertOptions o;
  o.split = {{"train", 0.6}, {"val", 0.2}, {"test", 0.2}};
  o.seed = seed;
  o.group_by = group_by;
  return o;
}

}  // namespace

TEST_CASE("convert: --group-by case never puts two slices of one case in two splits, nor do day and a regex") {
  TempDir dir;
  const std::string src = RleSource(dir);
  auto r = RunConvert(src, dir / "case", Grouped("case"));
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->groups == 6);
  const auto by_case = SplitOfPath(dir / "case");
  REQUIRE(by_case.size() == 36);
  std::set<std::string> used;
  for (const auto& [group, splits] : SplitsOfGroups(by_case, "_day")) {
    INFO(group);
    CHECK(splits.size() == 1);
    used.insert(*splits.begin());
  }
  CHECK(used == std::set<std::string>{"train", "val", "test"});
  CHECK_THAT(FormatSummary(*r), Catch::Contains("(6 groups, each in one split)"));

  auto d = RunConvert(src, dir / "day", Grouped("day"));
  REQUIRE(d.ok());
  CHECK(d->groups == 12);
  for (const auto& [group, splits] : SplitsOfGroups(SplitOfPath(dir / "day"), "_slice")) CHECK(splits.size() == 1);

  // A regex naming the same groups gives the same splits; the same seed, the same again.
  REQUIRE(RunConvert(src, dir / "regex", Grouped("^(case[0-9]+)_")).ok());
  CHECK(SplitOfPath(dir / "regex") == by_case);
  REQUIRE(RunConvert(src, dir / "again", Grouped("case")).ok());
  CHECK(SplitOfPath(dir / "again") == by_case);
  bool recorded = false;
  const Readback rb = Open(dir / "case");
  for (const auto& kv : rb.ds->manifest().provenance.options) {
    recorded = recorded || (kv.key == "group_by" && kv.value == "case");
  }
  CHECK(recorded);
}

TEST_CASE("convert: group splits are stratified by label where the labels allow") {
  TempDir dir;
  // Two classes, 8 patients each (p10..p17, p20..p27), 3 images per patient.
  for (int c = 0; c < 2; ++c) {
    const std::string cls = c == 0 ? "benign" : "malignant";
    for (int p = 10 + 10 * c; p < 18 + 10 * c; ++p) {
      for (int k = 0; k < 3; ++k) {
        WritePng(dir / "src/" + cls + "/p" + std::to_string(p) + "_" + std::to_string(k) + ".png", 1, 4, 4,
                 uint32_t(p * 3 + k));
      }
    }
  }
  ConvertOptions o = Grouped("^[^/]+/(p[0-9]+)_");
  o.split = {{"train", 0.5}, {"val", 0.5}};
  auto r = RunConvert(dir / "src", dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  Readback rb = Open(dir / "out");
  std::map<std::string, std::map<int64_t, int>> labels;  // split -> label -> samples
  std::map<std::string, std::set<std::string>> splits_of;
  for (const SplitInfo& s : rb.ds->manifest().splits) {
    for (uint64_t i = s.first_sample; i < s.first_sample + s.num_samples; ++i) {
      ++labels[s.name][rb.Int(i, "label")];
      const std::string path = rb.Str(i, "path");
      splits_of[path.substr(0, path.find('_'))].insert(s.name);
    }
  }
  for (const auto& [patient, splits] : splits_of) CHECK(splits.size() == 1);
  CHECK(labels["train"] == std::map<int64_t, int>{{0, 12}, {1, 12}});
  CHECK(labels["val"] == std::map<int64_t, int>{{0, 12}, {1, 12}});
}

TEST_CASE("convert: --group-by refuses a keyword the layout lacks, a bad regex, an unmatched name, and no --split") {
  TempDir dir;
  WritePng(dir / "src/a/1.png", 1, 4, 4, 1);
  WritePng(dir / "src/a/2.png", 1, 4, 4, 2);
  auto keyword = RunConvert(dir / "src", dir / "out", Grouped("day"));
  REQUIRE_FALSE(keyword.ok());
  CHECK(keyword.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(keyword.status().message(), Catch::Contains("folder layout has no such natural group") &&
                                             Catch::Contains("rle: case, rle: day, nnunet: case"));
  auto bad = RunConvert(dir / "src", dir / "out", Grouped("(["));
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("not a regular expression"));
  auto unmatched = RunConvert(dir / "src", dir / "out", Grouped("^b/"));
  REQUIRE_FALSE(unmatched.ok());
  CHECK_THAT(unmatched.status().message(), Catch::Contains("does not match input a/1.png"));
  CHECK_FALSE(HasDatasetFiles(dir / "out"));
  auto cli = ParseCommandLine({dir / "src", "-o", dir / "out", "--group-by", "case"});
  REQUIRE_FALSE(cli.ok());
  CHECK_THAT(cli.status().message(), Catch::Contains("--split"));
  auto ok = ParseCommandLine({dir / "src", "-o", dir / "out", "--split", "train=0.5,val=0.5", "--group-by", "case"});
  REQUIRE(ok.ok());
  CHECK(ok->options.group_by == "case");
}
