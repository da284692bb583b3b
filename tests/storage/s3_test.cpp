// s3:// locations, and the endpoint, region and credentials read as the AWS tools read them.
#include "storage/s3.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "base/file.h"
#include "storage/location.h"
#include "storage/object_store.h"
#include "tests/common/environment.h"
#include "tests/common/temp_dir.h"
#include "tests/storage/servers.h"

namespace shardify::storage {
namespace {

using testing::MisbehavingServer;
using testing::Misbehaviour;
using testing::TempDir;

// Every variable S3SettingsFromEnvironment reads, set as given (others unset) for the
// test's lifetime, then restored.
struct AwsEnvironment : testing::ScopedEnvironment {
  explicit AwsEnvironment(const std::map<std::string, std::string>& set)
      : ScopedEnvironment(
            {"HOME", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
             "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
             "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "SHARDIFY_S3_ADDRESSING"},
            set) {}
};

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST_CASE("storage: an s3 location is a bucket and a key prefix") {
  auto at = ParseLocation("S3://my-bucket.2/sets/fmnist v2//");
  REQUIRE(at.ok());
  CHECK(at->kind == LocationKind::kS3);
  CHECK(at->bucket == "my-bucket.2");
  CHECK(at->prefix == "sets/fmnist v2");
  CHECK(at->text == "s3://my-bucket.2/sets/fmnist v2");
  CHECK(IsRemote("s3://bucket/x"));
  auto root = ParseLocation("s3://bucket");
  REQUIRE(root.ok());
  CHECK(root->prefix.empty());
  for (const char* bad : {"s3://", "s3://Bucket/x", "s3://ab/x", "s3://-bucket/x", "s3://bucket_1/x",
                          "s3://bucket/a//b", "s3://bucket/x?versionId=1"}) {
    INFO(bad);
    const auto refused = ParseLocation(bad);
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(refused.status().message(), Catch::Contains(ShownLocation(bad)));
  }
}

TEST_CASE("storage: s3 settings come from the AWS variables, else from the profile's files") {
  TempDir home;
  Write(home / ".aws-credentials",
        "[default]\naws_access_key_id = AKIDEFAULT\naws_secret_access_key = s3cret\n"
        "\n[lab]\naws_access_key_id=AKILAB\naws_secret_access_key=lab-secret\n"
        "aws_session_token = tok\n");
  Write(home / ".aws-config",
        "[default]\nregion = eu-west-1\n[profile lab]\nregion = us-west-2\n"
        "endpoint_url = http://127.0.0.1:9000/\n");
  const std::map<std::string, std::string> files = {{"AWS_SHARED_CREDENTIALS_FILE", home / ".aws-credentials"},
                                                    {"AWS_CONFIG_FILE", home / ".aws-config"}};
  SECTION("the default profile, on AWS's endpoint: virtual-host addressing") {
    AwsEnvironment env(files);
    auto s = S3SettingsFromEnvironment();
    REQUIRE(s.ok());
    CHECK(s->signing.access_key == "AKIDEFAULT");
    CHECK(s->signing.secret_key == "s3cret");
    CHECK(s->signing.region == "eu-west-1");
    CHECK(s->credentials_from == "profile default");
    CHECK(s->endpoint == "https://s3.eu-west-1.amazonaws.com");
    CHECK(S3PrefixUrl(*s, "data", "sets/a b+c") == "https://data.s3.eu-west-1.amazonaws.com/sets/a%20b%2Bc");
  }
  SECTION("a named profile with its own endpoint: path-style, unless told otherwise") {
    auto with = files;
    with["AWS_PROFILE"] = "lab";
    AwsEnvironment env(with);
    auto s = S3SettingsFromEnvironment();
    REQUIRE(s.ok());
    CHECK(s->signing.access_key == "AKILAB");
    CHECK(s->signing.session_token == "tok");
    CHECK(s->signing.region == "us-west-2");
    CHECK(S3PrefixUrl(*s, "data", "") == "http://127.0.0.1:9000/data");
    ::setenv("SHARDIFY_S3_ADDRESSING", "virtual", 1);
    auto v = S3SettingsFromEnvironment();
    REQUIRE(v.ok());
    CHECK(S3PrefixUrl(*v, "data", "x") == "http://data.127.0.0.1:9000/x");
  }
  SECTION("variables win over files") {
    auto with = files;
    with.insert({{"AWS_ACCESS_KEY_ID", "AKIENV"},
                 {"AWS_SECRET_ACCESS_KEY", "env-secret"},
                 {"AWS_SESSION_TOKEN", "env-token"},
                 {"AWS_REGION", "ap-south-1"},
                 {"AWS_ENDPOINT_URL", "https://minio.lan:9443"}});
    AwsEnvironment env(with);
    auto s = S3SettingsFromEnvironment();
    REQUIRE(s.ok());
    CHECK(s->signing.access_key == "AKIENV");
    CHECK(s->signing.session_token == "env-token");
    CHECK(s->signing.region == "ap-south-1");
    CHECK(s->credentials_from == "AWS_ACCESS_KEY_ID");
    CHECK(S3PrefixUrl(*s, "b-1", "p") == "https://minio.lan:9443/b-1/p");
  }
  SECTION("no credentials anywhere: unsigned requests") {
    AwsEnvironment env({{"HOME", home.path()}});
    auto s = S3SettingsFromEnvironment();
    REQUIRE(s.ok());
    CHECK_FALSE(s->signing.on());
    CHECK(s->signing.region == "us-east-1");
  }
}

TEST_CASE("storage: inconsistent s3 settings are refused, naming what is wrong") {
  TempDir home;
  auto refused = [](const std::map<std::string, std::string>& set, const std::string& says) {
    AwsEnvironment env(set);
    const auto s = S3SettingsFromEnvironment();
    CHECK(s.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.status().message(), Catch::Contains(says));
  };
  refused({{"HOME", home.path()}, {"AWS_ACCESS_KEY_ID", "AKI"}}, "AWS_SECRET_ACCESS_KEY");
  refused({{"HOME", home.path()}, {"AWS_PROFILE", "nowhere"}}, "nowhere");
  refused({{"HOME", home.path()}, {"AWS_ENDPOINT_URL", "minio:9000"}}, "minio:9000");
  refused({{"HOME", home.path()}, {"AWS_ENDPOINT_URL", "http://host/path"}}, "http://host/path");
  refused({{"HOME", home.path()}, {"SHARDIFY_S3_ADDRESSING", "dns"}}, "SHARDIFY_S3_ADDRESSING");
}

TEST_CASE("storage: an upload puts every file as a signed object, the manifest last") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  REQUIRE(MakeDirs(dir + "/parts").ok());
  for (const char* name : {"manifest.sfm", "shard-00001.sfs", "shard-00000.sfs", "skipped.tsv"}) {
    Write(dir + "/" + name, std::string("bytes of ") + name);
  }
  MisbehavingServer server(Misbehaviour::kAcceptPuts);
  AwsEnvironment env({{"HOME", tmp.path()},
                      {"AWS_ENDPOINT_URL", server.url()},
                      {"AWS_ACCESS_KEY_ID", "AKITEST"},
                      {"AWS_SECRET_ACCESS_KEY", "secret"}});
  auto store = ObjectStore::Open("s3://bucket/sets/x y");
  REQUIRE(store.ok());
  std::vector<uint64_t> told;
  auto sum = store->Upload(dir, "", {"manifest.sfm"}, {},
                           [&](uint64_t objects, uint64_t, uint64_t total) { told.push_back(objects * 10 + total); });
  REQUIRE(sum.ok());
  CHECK(sum->objects == 4);
  CHECK(told == std::vector<uint64_t>{14, 24, 34, 44});
  std::vector<std::string> lines;
  for (const std::string& head : server.heads()) {
    lines.push_back(head.substr(0, head.find("\r\n")));
    CHECK_THAT(head, Catch::Contains("Authorization: AWS4-HMAC-SHA256 Credential=AKITEST/"));
    CHECK_THAT(head, Catch::Contains("/us-east-1/s3/aws4_request"));
  }
  CHECK(lines == std::vector<std::string>{"PUT /bucket/sets/x%20y/shard-00000.sfs HTTP/1.1",
                                          "PUT /bucket/sets/x%20y/shard-00001.sfs HTTP/1.1",
                                          "PUT /bucket/sets/x%20y/skipped.tsv HTTP/1.1",
                                          "PUT /bucket/sets/x%20y/manifest.sfm HTTP/1.1"});
  CHECK(ObjectStore::Open(server.url() + "/x").status().code() == StatusCode::kUnsupported);
  // A name that would leave the prefix is refused before any request.
  CHECK(store->Delete("parts/../../other").code() == StatusCode::kInvalidArgument);
  CHECK(store->Put("/etc/x", dir + "/skipped.tsv").code() == StatusCode::kInvalidArgument);
  CHECK(store->Get("..", tmp / "got", SizeBound::AtMost(1)).code() == StatusCode::kInvalidArgument);
  CHECK(server.requests() == 4);
}

TEST_CASE("storage: an S3 listing is read strictly: keys, sizes, entities and continuation") {
  const std::string head =
      "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  auto page = ParseS3Listing(head + "<Name>b</Name><Prefix>p/</Prefix><IsTruncated>true</IsTruncated>" +
                             "<Contents><Key>p/a&amp;b</Key><Size>3</Size></Contents>" +
                             "<Contents><ETag>&quot;x&quot;</ETag><Size>12345678901</Size>" +
                             "<Key>p/c&#39;d&#x21;</Key></Contents>" +
                             "<NextContinuationToken>t+/=</NextContinuationToken></ListBucketResult>");
  REQUIRE(page.ok());
  CHECK(page->objects == std::vector<ListedObject>{{"p/a&b", 3}, {"p/c'd!", 12345678901}});
  CHECK(page->truncated);
  CHECK(page->next_token == "t+/=");
  auto last = ParseS3Listing(head + "<IsTruncated>false</IsTruncated></ListBucketResult>");
  REQUIRE(last.ok());
  CHECK(last->objects.empty());
  CHECK_FALSE(last->truncated);
  for (const std::string& bad :
       {std::string("<Error><Code>AccessDenied</Code></Error>"), head + "<Contents><Key>p/a</Contents>",
        head + "<Contents><Key>p/&bogus;</Key></Contents>", head + "<Contents><Key>p/&#0;</Key></Contents>",
        head + "<Contents><Key>p/&#x1F600;</Key></Contents>", head + "<Contents><Key>p/&amp</Key></Contents>",
        head + "<IsTruncated>true</IsTruncated></ListBucketResult>", head + "<Contents><Key>p/a</Key></Contents>",
        head + "<Contents><Key>p/a</Key><Size>-1</Size></Contents>",
        head + "<Contents><Key>p/a</Key><Size>1e3</Size></Contents>",
        head + "<Contents><Key>p/a</Key><Key>p/b</Key><Size>1</Size></Contents>",
        head + "<Contents><Key>p/a</Key><Size>1</Size>",
        head + "<IsTruncated>true</IsTruncated><IsTruncated>false</IsTruncated>"}) {
    INFO(bad);
    CHECK(ParseS3Listing(bad).status().code() == StatusCode::kCorruption);
  }
}

}  // namespace
}  // namespace shardify::storage
