#include "tools/show.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/tools/fixtures.h"

namespace shardify::tools {
namespace {

using nlohmann::json;
using test::TempDir;

TEST_CASE("tools: show JSON gives every field of a 2D sample", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  std::ostringstream out;
  ShowOptions o;
  o.json = true;
  const uint64_t i = 4;
  REQUIRE(RunShow(tmp / "ds", i, o, out).ok());
  const json j = json::parse(out.str());
  CHECK(j["sample"] == i);
  CHECK(j["split"] == "train");
  REQUIRE(j["fields"].size() == 3);
  CHECK(j["fields"][0]["shape"] == json({1, test::kH8, test::kW8}));
  CHECK(j["fields"][0]["raw_bytes"] == test::kH8 * test::kW8);
  CHECK(j["fields"][1]["value"] == test::LabelOf(i));
  CHECK(j["fields"][1]["class"] == test::kClasses[test::LabelOf(i)]);
  CHECK(j["fields"][2]["value"] == "img/" + std::to_string(i) + ".png");
}

TEST_CASE("tools: show text previews the image with one line per character row", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  std::ostringstream out;
  ShowOptions o;
  o.preview_cols = 12;
  REQUIRE(RunShow(tmp / "ds", 0, o, out).ok());
  const std::string s = out.str();
  CHECK(s.find("preview 12x8 -> 12x4") != std::string::npos);
  size_t rows = 0;
  for (size_t p = s.find("  |"); p != std::string::npos; p = s.find("  |", p + 1)) ++rows;
  CHECK(rows == 4);
}

TEST_CASE("tools: show of a volume prints geometry values and the NIfTI header", "[tools]") {
  TempDir tmp;
  const test::NiftiSource src = test::ReadNiftiSource(test::kNiftiPath);
  test::WriteVolume(tmp / "vol", src);
  std::ostringstream out;
  ShowOptions o;
  o.json = true;
  REQUIRE(RunShow(tmp / "vol", 0, o, out).ok());
  const json j = json::parse(out.str());
  CHECK(j["fields"][0]["shape"] == json(src.shape));
  CHECK(j["fields"][1]["values"] == json(src.spacing));
  const json& nifti = j["fields"][4]["nifti"];
  CHECK(nifti["version"] == 1);
  CHECK(nifti["dim"] == json({src.shape[3], src.shape[2], src.shape[1]}));
  CHECK(nifti["datatype"] == 4);
  std::ostringstream text;
  REQUIRE(RunShow(tmp / "vol", 0, ShowOptions{}, text).ok());
  CHECK(text.str().find("middle slice z = " + std::to_string(src.shape[1] / 2)) != std::string::npos);
}

TEST_CASE("tools: show past the last sample is OutOfRange", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  std::ostringstream out;
  CHECK(RunShow(tmp / "ds", test::kTrain + test::kTest, ShowOptions{}, out).code() == StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace shardify::tools
