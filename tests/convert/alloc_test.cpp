// An allocation that fails while converting is an error naming the input, never an abort.
// A separate program because it replaces the global operator new (not built under the
// sanitizers, which own it).
#include <catch2/catch.hpp>
#include <cstdint>

#include "tests/common/alloc_counter.h"
#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;

TEST_CASE("convert: an allocation that fails while decoding is an error naming the input") {
  TempDir dir;
  WritePng(dir / "src/a/big.png", 1, 1000, 2000, 1);  // 2 MB decoded
  WritePng(dir / "src/a/small.png", 1, 8, 8, 2);
  for (bool skip : {false, true}) {
    ConvertOptions o;
    o.skip_errors = skip;
    o.threads = 1;
    ::shardify::testing::FailAllocationsAbove(3 << 19);  // 1.5 MB: the big image cannot be held
    auto r = RunConvert(dir / "src", dir / (skip ? "skipped" : "failed"), o);
    ::shardify::testing::FailAllocationsAbove(SIZE_MAX);
    INFO(r.status().ToString());
    if (!skip) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kResourceExhausted);
      CHECK_THAT(r.status().message(), Catch::Contains("big.png") && Catch::Contains("out of memory"));
    } else {
      REQUIRE(r.ok());
      CHECK(r->samples == 1);
      REQUIRE(r->skipped.size() == 1);
      CHECK_THAT(r->skipped[0].input, Catch::Contains("big.png"));
      CHECK_THAT(r->skipped[0].reason, Catch::Contains("out of memory"));
    }
  }
}
