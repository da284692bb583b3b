#include "tools/stats.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/tools/fixtures.h"

namespace shardify::tools {
namespace {

using test::TempDir;

TEST_CASE("tools: stats match a direct computation, per channel, on any thread count", "[tools]") {
  TempDir tmp;
  test::WriteRgb16WithMask(tmp / "ds");
  const size_t plane = test::kH16 * test::kW16;
  for (size_t threads : {1, 3}) {
    StatsOptions o;
    o.threads = threads;
    auto r = ComputeStats(tmp / "ds", o);
    REQUIRE(r.ok());
    CHECK(r->samples == test::kRgbSamples);
    REQUIRE(r->fields.size() == 2);
    REQUIRE(r->fields[0].channels.size() == 3);
    for (size_t c = 0; c < 3; ++c) {
      double sum = 0, sq = 0, lo = 1e9, hi = -1;
      for (uint64_t i = 0; i < test::kRgbSamples; ++i) {
        for (size_t k = 0; k < plane; ++k) {
          const double x = test::Pixel16(i, c * plane + k);
          sum += x, sq += x * x, lo = std::min(lo, x), hi = std::max(hi, x);
        }
      }
      const double n = double(test::kRgbSamples * plane), mean = sum / n;
      const ChannelStats& s = r->fields[0].channels[c];
      CHECK(s.count == test::kRgbSamples * plane);
      CHECK(s.min == lo);
      CHECK(s.max == hi);
      CHECK(s.mean == Approx(mean));
      CHECK(s.stddev() == Approx(std::sqrt(sq / n - mean * mean)));
    }
    CHECK(r->labels.at(0) == 2);  // labels i % 3 for i < 5: 0,1,2,0,1
    CHECK(r->labels.at(2) == 1);
  }
}

TEST_CASE("tools: stats JSON of one split has a label histogram with class names", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  std::ostringstream out;
  StatsOptions o;
  o.json = true;
  o.split = "test";
  REQUIRE(RunStats(tmp / "ds", o, out).ok());
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["samples"] == test::kTest);
  CHECK(j["fields"][0]["name"] == "image");
  CHECK(j["fields"][0]["channels"][0]["count"] == test::kTest * test::kH8 * test::kW8);
  uint64_t total = 0;
  for (const auto& h : j["label_histogram"]) {
    total += h["count"].get<uint64_t>();
    if (h["label"].get<int64_t>() >= 0) CHECK(h["class"] == test::kClasses[h["label"].get<int64_t>()]);
  }
  CHECK(total == test::kTest);
}

}  // namespace
}  // namespace shardify::tools
