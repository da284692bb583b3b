// Dataset locations: directories, http(s) URLs, and what is refused.
#include "storage/location.h"

#include <catch2/catch.hpp>

#include "base/strings.h"

namespace shardify::storage {
namespace {

TEST_CASE("storage: a location is a directory or an http(s) URL, and object URLs append the name") {
  auto local = ParseLocation("data/fmnist/");
  REQUIRE(local.ok());
  CHECK(local->kind == LocationKind::kLocal);
  CHECK(local->text == "data/fmnist");
  CHECK_FALSE(IsRemote("data/fmnist"));

  auto web = ParseLocation("HTTPS://example.org:8443/sets/fmnist//");
  REQUIRE(web.ok());
  CHECK(web->kind == LocationKind::kHttp);
  CHECK(IsRemote("HTTPS://example.org:8443/sets/fmnist//"));
  CHECK(ObjectUrl(*web, "manifest.sfm") == "https://example.org:8443/sets/fmnist/manifest.sfm");
  auto host_only = ParseLocation("http://127.0.0.1:8000");
  REQUIRE(host_only.ok());
  CHECK(ObjectUrl(*host_only, "shard-00000.sfs") == "http://127.0.0.1:8000/shard-00000.sfs");
}

TEST_CASE("storage: unusable locations are refused, naming them") {
  CHECK(ParseLocation("").status().code() == StatusCode::kInvalidArgument);
  const auto ftp = ParseLocation("ftp://host/prefix");
  CHECK(ftp.status().code() == StatusCode::kUnsupported);
  CHECK_THAT(ftp.status().message(), Catch::Contains("ftp://host/prefix"));
  CHECK(ParseLocation("http:///path").status().code() == StatusCode::kInvalidArgument);
  CHECK(ParseLocation("http://user@host/path").status().code() == StatusCode::kInvalidArgument);
  const auto query = ParseLocation("https://host/ds?token=1");
  CHECK(query.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(query.status().message(), Catch::Contains("query"));
}

TEST_CASE("storage: sizes are bytes or K/M/G/T multiples of 1024") {
  CHECK(*ParseByteSize("256M") == 256ull << 20);
  CHECK(*ParseByteSize("4k") == 4096);
  CHECK(*ParseByteSize("1000") == 1000);
  CHECK(*ParseByteSize("2T") == 2ull << 40);
  for (const char* bad : {"", "-5", "12Q", "M", "0", "1.5G", "99999999999T"}) {
    INFO(bad);
    CHECK(ParseByteSize(bad).status().code() == StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace shardify::storage
