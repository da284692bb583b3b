#include "tools/info.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/dataset.h"
#include "tests/tools/fixtures.h"
#include "tools/tool_internal.h"

namespace shardify::tools {
namespace {

using nlohmann::json;
using test::TempDir;

struct Gray8 {
  TempDir tmp;
  std::string dir = tmp / "ds";
  Gray8() { test::WriteGray8(dir); }
};

TEST_CASE("tools: info JSON lists samples, splits, fields, classes, shards and bytes", "[tools]") {
  Gray8 f;
  std::ostringstream out;
  InfoOptions o;
  o.json = true;
  REQUIRE(RunInfo(f.dir, o, out).ok());
  const json j = json::parse(out.str());
  auto ds = Dataset::Open(f.dir).value();
  CHECK(j["samples"] == test::kTrain + test::kTest);
  CHECK(j["shards"] == ds->manifest().shards.size());
  CHECK(j["shards"].get<size_t>() > 1);
  CHECK(j["splits"]["train"] == test::kTrain);
  CHECK(j["splits"]["test"] == test::kTest);
  CHECK(j["classes"] == json(test::kClasses));
  REQUIRE(j["fields"].size() == 3);
  CHECK(j["fields"][0]["name"] == "image");
  CHECK(j["fields"][0]["dtype"] == "u8");
  CHECK(j["fields"][0]["shape"] == json({1, test::kH8, test::kW8}));
  CHECK(j["fields"][1]["dtype"] == "i64");
  uint64_t counted = 0, unlabeled = 0;
  for (uint64_t i = 0; i < test::kTrain + test::kTest; ++i) {
    if (test::LabelOf(i) == 0) ++counted;
    if (test::LabelOf(i) < 0) ++unlabeled;
  }
  CHECK(j["class_counts"]["cat"] == counted);
  CHECK(j["class_counts"]["(unlabeled)"] == unlabeled);
  uint64_t stored = 0;
  for (const ShardInfo& s : ds->manifest().shards) stored += s.size_bytes;
  CHECK(j["stored_bytes"] == stored);
  CHECK(j["raw_bytes"] == (test::kTrain + test::kTest) * test::kH8 * test::kW8);
  CHECK(j["provenance"]["converter"] == "tools-test");
}

TEST_CASE("tools: info text names splits, classes and the compression ratio", "[tools]") {
  Gray8 f;
  std::ostringstream out;
  REQUIRE(RunInfo(f.dir, InfoOptions{}, out).ok());
  const std::string s = out.str();
  CHECK(s.find("train 10") != std::string::npos);
  CHECK(s.find("test 4") != std::string::npos);
  CHECK(s.find("bird") != std::string::npos);
  CHECK(s.find("ratio") != std::string::npos);
  CHECK(s.find("image") != std::string::npos);
}

TEST_CASE("tools: info on a missing directory is NotFound or IOError naming it", "[tools]") {
  TempDir tmp;
  std::ostringstream out;
  Status st = RunInfo(tmp / "nothing", InfoOptions{}, out);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() != StatusCode::kCorruption);
  CHECK(st.message().find("nothing") != std::string::npos);
}

TEST_CASE("tools: ls JSON has one row per sample of the split with its shard", "[tools]") {
  Gray8 f;
  std::ostringstream out;
  LsOptions o;
  o.json = true;
  o.split = "test";
  REQUIRE(RunLs(f.dir, o, out).ok());
  const json rows = json::parse(out.str());
  REQUIRE(rows.size() == test::kTest);
  auto ds = Dataset::Open(f.dir).value();
  for (size_t r = 0; r < rows.size(); ++r) {
    const uint64_t i = test::kTrain + r;
    CHECK(rows[r]["index"] == i);
    CHECK(rows[r]["split"] == "test");
    CHECK(rows[r]["label"] == test::LabelOf(i));
    CHECK(rows[r]["shape"] == json({1, test::kH8, test::kW8}));
    CHECK(rows[r]["shard"] == ds->Sample(i).value().shard_file());
    CHECK(rows[r]["stored_bytes"].get<uint64_t>() > 0);
  }
}

TEST_CASE("tools: ls text honours offset and limit", "[tools]") {
  Gray8 f;
  std::ostringstream out;
  LsOptions o;
  o.offset = 3;
  o.limit = 2;
  REQUIRE(RunLs(f.dir, o, out).ok());
  std::istringstream lines(out.str());
  std::string line;
  std::vector<std::string> all;
  while (std::getline(lines, line)) all.push_back(line);
  REQUIRE(all.size() == 3);  // header + 2 rows
  CHECK(all[1].find(" 3  train") != std::string::npos);
  CHECK(all[2].find(" 4  train") != std::string::npos);
}

TEST_CASE("tools: ls of an unknown split names the known ones", "[tools]") {
  Gray8 f;
  std::ostringstream out;
  LsOptions o;
  o.split = "val";
  Status st = RunLs(f.dir, o, out);
  REQUIRE(st.code() == StatusCode::kNotFound);
  CHECK(st.message().find("train") != std::string::npos);
}

TEST_CASE("tools: JSON keeps bytes that are not UTF-8 as surrogate escapes, and valid text as it is", "[tools]") {
  CHECK(detail::Dump(json("caf\xE9/\xC3\xA9")) == "\"caf\\udce9/\xC3\xA9\"");
  CHECK(detail::Dump(json::array({"\xFF", 1, nullptr})) == "[\"\\udcff\",1,null]");
  // Well-formed text (quotes, backslashes, control characters, every UTF-8 length) reads
  // back as the same JSON.
  const json valid = {{"a\"b\\c", {1.5, "tab\tnew\nline\x01", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"}},
                      {"n", {{"x", true}, {"y", -3}}}};
  CHECK(json::parse(detail::Dump(valid)) == valid);
}

}  // namespace
}  // namespace shardify::tools
