// Listing an object store that is not trusted: a listing that goes on (new keys on every
// page, or empty pages that never end) is refused at the bound its caller gives, naming
// the prefix and the bound, before it fills memory or runs on.
#include "storage/object_store.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "tests/common/environment.h"
#include "tests/common/temp_dir.h"
#include "tests/common/watchdog.h"
#include "tests/storage/servers.h"

namespace shardify::storage {
namespace {

using testing::MisbehavingServer;
using testing::Misbehaviour;
using testing::TempDir;

TEST_CASE("storage: a listing that goes on past its caller's bound is refused, naming the prefix and the bound") {
  TempDir home;
  for (const Misbehaviour how : {Misbehaviour::kEndlessListing, Misbehaviour::kEmptyListing}) {
    const bool keys = how == Misbehaviour::kEndlessListing;
    INFO((keys ? "1,000 new keys a page" : "empty pages"));
    MisbehavingServer server(how);
    const testing::ScopedEnvironment env(
        {"HOME", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
         "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "SHARDIFY_S3_ADDRESSING"},
        {{"HOME", home.path()}, {"AWS_ENDPOINT_URL", server.url()}});
    const Result<ObjectStore> store = ObjectStore::Open("s3://bucket/ds");
    REQUIRE(store.ok());
    const auto listed =
        testing::WithinSeconds(60, "listing an endless listing", [&] { return store->List("parts/", 2500); });
    REQUIRE_FALSE(listed.ok());
    CHECK(listed.status().code() == StatusCode::kResourceExhausted);
    CHECK_THAT(listed.status().message(), Catch::StartsWith("s3://bucket/ds/parts/: the listing ") &&
                                              Catch::Contains("2500 objects") && Catch::Contains("refused"));
    // 1,000 keys a page: refused with the page that passes the bound; empty pages: after
    // 2500 / 100 + 10 pages.
    CHECK(server.requests() == (keys ? 3 : 35));
  }
}

}  // namespace
}  // namespace shardify::storage
