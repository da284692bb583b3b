// Transfer limits: the defaults from SHARDIFY_REMOTE_* variables, read in one place, and
// bad values refused with the variable's name; a server that trickles is abandoned at the
// minimum rate, and a body past its bound is refused before it is received.
#include "storage/transfer.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/file.h"
#include "tests/common/environment.h"
#include "tests/common/temp_dir.h"
#include "tests/common/watchdog.h"
#include "tests/storage/servers.h"

namespace shardify::storage {
namespace {

using testing::Lighttpd;
using testing::MisbehavingServer;
using testing::Misbehaviour;
using testing::TempDir;

// The SHARDIFY_REMOTE_* variables set as given (the others unset) while it lives, then
// restored.
struct LimitVariables : testing::ScopedEnvironment {
  explicit LimitVariables(const std::map<std::string, std::string>& set)
      : ScopedEnvironment({"SHARDIFY_REMOTE_CONNECT_TIMEOUT", "SHARDIFY_REMOTE_STALL_TIMEOUT",
                           "SHARDIFY_REMOTE_MIN_RATE", "SHARDIFY_REMOTE_ATTEMPTS", "SHARDIFY_CACHE_WAIT"},
                          set) {}
};

TEST_CASE("storage: transfer limits left at 0 come from SHARDIFY_REMOTE_*, else the defaults") {
  {
    const LimitVariables none({});
    const Result<TransferOptions> o = ResolveTransferOptions(TransferOptions());
    REQUIRE(o.ok());
    CHECK(o->connect_timeout_s == 10);
    CHECK(o->stall_timeout_s == 30);
    CHECK(o->min_rate == 1024);
    CHECK(o->attempts == 5);
    CHECK(o->cache_wait_s == 120);
  }
  const LimitVariables set({{"SHARDIFY_REMOTE_CONNECT_TIMEOUT", "2.5"},
                            {"SHARDIFY_REMOTE_STALL_TIMEOUT", "4"},
                            {"SHARDIFY_REMOTE_MIN_RATE", "65536"},
                            {"SHARDIFY_REMOTE_ATTEMPTS", "2"},
                            {"SHARDIFY_CACHE_WAIT", "0.5"}});
  Result<TransferOptions> o = ResolveTransferOptions(TransferOptions());
  REQUIRE(o.ok());
  CHECK(o->connect_timeout_s == 2.5);
  CHECK(o->stall_timeout_s == 4);
  CHECK(o->min_rate == 65536);
  CHECK(o->attempts == 2);
  CHECK(o->cache_wait_s == 0.5);
  TransferOptions own;  // a value set in code wins
  own.stall_timeout_s = 7;
  own.attempts = 1;
  o = ResolveTransferOptions(own);
  REQUIRE(o.ok());
  CHECK(o->connect_timeout_s == 2.5);
  CHECK(o->stall_timeout_s == 7);
  CHECK(o->attempts == 1);
}

TEST_CASE("storage: a bad SHARDIFY_REMOTE_* value is an error naming the variable") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"SHARDIFY_REMOTE_STALL_TIMEOUT", "abc"},   {"SHARDIFY_REMOTE_STALL_TIMEOUT", "0"},
      {"SHARDIFY_REMOTE_STALL_TIMEOUT", "-3"},    {"SHARDIFY_REMOTE_STALL_TIMEOUT", "5s"},
      {"SHARDIFY_REMOTE_STALL_TIMEOUT", "nan"},   {"SHARDIFY_REMOTE_CONNECT_TIMEOUT", "1e9"},
      {"SHARDIFY_REMOTE_CONNECT_TIMEOUT", "inf"}, {"SHARDIFY_REMOTE_ATTEMPTS", "0"},
      {"SHARDIFY_REMOTE_ATTEMPTS", "2.5"},        {"SHARDIFY_REMOTE_ATTEMPTS", "1000"},
      {"SHARDIFY_REMOTE_MIN_RATE", "0"},          {"SHARDIFY_REMOTE_MIN_RATE", "1.5"},
      {"SHARDIFY_REMOTE_MIN_RATE", "2e9"},
  };
  for (const auto& [name, value] : bad) {
    INFO(name + "=" + value);
    const LimitVariables set(std::map<std::string, std::string>{{name, value}});
    const Result<TransferOptions> o = ResolveTransferOptions(TransferOptions());
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(o.status().message(), Catch::StartsWith(name + "='" + value + "' is not "));
  }
  {
    const LimitVariables set(std::map<std::string, std::string>{{"SHARDIFY_CACHE_WAIT", "-1"}});
    CHECK_THAT(ResolveTransferOptions(TransferOptions()).status().message(),
               Catch::StartsWith("SHARDIFY_CACHE_WAIT='-1' is not "));
  }
  const LimitVariables none({});
  TransferOptions negative;
  negative.attempts = -1;
  CHECK_THAT(ResolveTransferOptions(negative).status().message(), Catch::Contains("attempts -1"));
  TransferOptions fast;
  fast.min_rate = 1ull << 31;
  CHECK_THAT(ResolveTransferOptions(fast).status().message(), Catch::Contains("min_rate 2147483648"));
}

TEST_CASE("storage: a transfer with the default options takes its limits from the environment", "[subprocess]") {
  const LimitVariables set({{"SHARDIFY_REMOTE_STALL_TIMEOUT", "1"}, {"SHARDIFY_REMOTE_ATTEMPTS", "2"}});
  MisbehavingServer stall(Misbehaviour::kStall);
  const auto start = std::chrono::steady_clock::now();
  const auto body = testing::WithinSeconds(30, "fetching from a stalled server",
                                           [&] { return FetchToMemory(stall.url() + "/x", 100, TransferOptions()); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_FALSE(body.ok());
  CHECK_THAT(body.status().message(), Catch::Contains(stall.url() + "/x") && Catch::Contains("after 2 attempts"));
  CHECK(stall.requests() == 2);
  CHECK(seconds < 10);

  const LimitVariables bad(std::map<std::string, std::string>{{"SHARDIFY_REMOTE_ATTEMPTS", "many"}});
  const auto refused = FetchToMemory(stall.url() + "/x", 100, TransferOptions());
  CHECK_THAT(refused.status().message(), Catch::StartsWith("SHARDIFY_REMOTE_ATTEMPTS='many'"));
  CHECK(stall.requests() == 2);  // refused before any request
}

TEST_CASE("storage: a server that trickles is abandoned at the minimum rate, naming the object and the rate") {
  const LimitVariables set({{"SHARDIFY_REMOTE_STALL_TIMEOUT", "1"}, {"SHARDIFY_REMOTE_ATTEMPTS", "1"}});
  MisbehavingServer trickle(Misbehaviour::kTrickle);  // 4 bytes a second
  TempDir tmp;
  const auto start = std::chrono::steady_clock::now();
  const Status got = testing::WithinSeconds(60, "fetching from a trickling server", [&] {
    return FetchToFile(trickle.url() + "/shard", tmp / "shard", SizeBound::Exactly(1000, "its manifest"),
                       TransferOptions());
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(got.code() == StatusCode::kIOError);
  CHECK_THAT(got.message(), Catch::StartsWith(trickle.url() + "/shard: slower than 1024 bytes a second for 1 s (") &&
                                Catch::Contains(" of 1000 bytes received; SHARDIFY_REMOTE_MIN_RATE") &&
                                Catch::EndsWith("(after 1 attempt)"));
  CHECK(seconds < 10);
  CHECK_FALSE(PathExists(tmp / "shard"));
}

TEST_CASE("storage: a body whose Content-Length is past its bound is refused before it comes") {
  MisbehavingServer server(Misbehaviour::kTruncate);  // says 1000 bytes, sends 10
  TransferOptions o;
  o.attempts = 3;
  const Result<std::vector<uint8_t>> body = FetchToMemory(server.url() + "/listing", 100, o);
  CHECK(body.status().code() == StatusCode::kIOError);
  CHECK(body.status().message() == server.url() +
                                       "/listing: the object is larger than 100 bytes, the most this read takes "
                                       "(the answer's Content-Length is 1000)");
  CHECK(server.requests() == 1);  // not tried again
  TempDir tmp;
  const Status file = FetchToFile(server.url() + "/part.sfs", tmp / "part", SizeBound::Exactly(99, "the listing"), o);
  CHECK(file.code() == StatusCode::kCorruption);
  CHECK_THAT(file.message(), Catch::Contains("larger than 99 bytes, the size the listing says"));
  CHECK_FALSE(PathExists(tmp / "part"));
}

TEST_CASE("storage: a redirect is followed within its scheme, host and port only", "[subprocess]") {
  TempDir tmp;
  REQUIRE(MakeDirs(tmp / "www/ds").ok());
  std::ofstream(tmp / "www/ds/object") << "the object";
  MisbehavingServer other(Misbehaviour::kAcceptPuts);  // another origin: answers 200 to anything
  Lighttpd server(tmp / "www", tmp.path(),
                  "server.modules += (\"mod_redirect\")\n"
                  "url.redirect = (\"^/moved/(.*)$\" => \"/ds/$1\", \"^/away/(.*)$\" => \"" +
                      other.url() + "/$1?sig=planted\")\n");
  INFO(server.why());
  REQUIRE(server.started());
  TransferOptions o;
  o.attempts = 1;
  const Result<std::vector<uint8_t>> moved = FetchToMemory(server.url() + "/moved/object", 100, o);
  REQUIRE(moved.ok());
  CHECK(std::string(moved->begin(), moved->end()) == "the object");
  REQUIRE(FetchToFile(server.url() + "/moved/object", tmp / "copy", SizeBound::Exactly(10, "its manifest"), o).ok());
  CHECK(*FileSize(tmp / "copy") == 10);

  const Result<std::vector<uint8_t>> away = FetchToMemory(server.url() + "/away/object", 100, o);
  REQUIRE_FALSE(away.ok());
  CHECK(away.status().code() == StatusCode::kIOError);
  CHECK_THAT(away.status().message(), Catch::StartsWith(server.url() + "/away/object: redirected to " + other.url() +
                                                        "/object?... (another scheme, host or port"));
  CHECK(FetchToFile(server.url() + "/away/object", tmp / "other", SizeBound::AtMost(100), o).code() ==
        StatusCode::kIOError);
  CHECK_FALSE(PathExists(tmp / "other"));
  CHECK(other.requests() == 0);
}

}  // namespace
}  // namespace shardify::storage
