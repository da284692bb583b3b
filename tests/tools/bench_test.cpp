#include "tools/bench.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/tools/fixtures.h"

namespace shardify::tools {
namespace {

using test::TempDir;

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

}  // namespace
}  // namespace shardify::tools
