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
  const auto fragment = ParseLocation("https://host/ds?sig=secret#part");
  CHECK(fragment.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(fragment.status().message(), Catch::Contains("https://host/ds?...: a dataset URL takes no fragment"));
  CHECK(ParseLocation("s3://bucket/ds?versionId=1").status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("storage: a URL's query goes with every object and stays out of messages") {
  const auto signed_prefix = ParseLocation("https://cdn.example.org/sets/fmnist/?sv=2024&sig=a%2Fb");
  REQUIRE(signed_prefix.ok());
  CHECK(signed_prefix->kind == LocationKind::kHttp);
  CHECK(signed_prefix->base == "https://cdn.example.org/sets/fmnist");
  CHECK(signed_prefix->text == "https://cdn.example.org/sets/fmnist?...");
  CHECK(ObjectUrl(*signed_prefix, "manifest.sfm") ==
        "https://cdn.example.org/sets/fmnist/manifest.sfm?sv=2024&sig=a%2Fb");
  const auto empty_query = ParseLocation("http://h/a?");
  REQUIRE(empty_query.ok());
  CHECK(ObjectUrl(*empty_query, "x") == "http://h/a/x");
}

TEST_CASE("storage: a location is shown with its query and user as dots, a directory as it is") {
  CHECK(ShownLocation("http://h/a/manifest.sfm?sig=x") == "http://h/a/manifest.sfm?...");
  CHECK(ShownLocation("HTTPS://user:pw@h:8443/a?sv=1&sig=x#f") == "HTTPS://...@h:8443/a?...");
  CHECK(ShownLocation("http://h/a/manifest.sfm") == "http://h/a/manifest.sfm");
  CHECK(ShownLocation("http://h/a@b") == "http://h/a@b");
  CHECK(ShownLocation("s3://bucket/x?versionId=1") == "s3://bucket/x?...");
  CHECK(ShownLocation("data/what?sig=not-a-query") == "data/what?sig=not-a-query");
  const auto refused = ParseLocation("s3://bucket/x?versionId=secret");
  CHECK_THAT(refused.status().message(), Catch::StartsWith("s3://bucket/x?...: ") && !Catch::Contains("secret"));
}

TEST_CASE("storage: object names are percent-encoded in URLs, slashes kept") {
  const auto at = ParseLocation("http://h:8000/sets/a%20b?sig=x");
  REQUIRE(at.ok());
  CHECK(ObjectUrl(*at, "parts/00001-of-00002/shard 0?#%.sfs") ==
        "http://h:8000/sets/a%20b/parts/00001-of-00002/shard%200%3F%23%25.sfs?sig=x");
  CHECK(PercentEncode("a-z_0.9~/+&=", false) == "a-z_0.9~%2F%2B%26%3D");
}

TEST_CASE("storage: the origin of a URL is its scheme, host and port, the default port filled in") {
  CHECK(OriginOf("HTTP://Example.org/a?b") == "http://example.org:80");
  CHECK(OriginOf("http://example.org:80/x") == OriginOf("http://example.org/y"));
  CHECK(OriginOf("https://u:p@127.0.0.1:9000") == "https://127.0.0.1:9000");
  CHECK(OriginOf("http://[::1]:81/x") == "http://[::1]:81");
  CHECK(OriginOf("http://[::1]/x") == "http://[::1]:80");
  CHECK(OriginOf("https://h/x") != OriginOf("http://h:443/x"));  // https to http: another origin
  CHECK(OriginOf("http://127.0.0.1:8000/") != OriginOf("http://127.0.0.2:8000/"));
  CHECK(OriginOf("ftp://h/x").empty());
  CHECK(OriginOf("/relative").empty());
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
