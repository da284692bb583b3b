// A distributed run on a dataset served over HTTP whose shards stall for one rank: that
// rank gives up within the transfer limits of its environment, naming the object, and the
// other stops naming that rank; neither waits for --dist-timeout.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "base/file.h"
#include "fixtures.h"
#include "format/dataset.h"
#include "ranks.h"
#include "tests/storage/servers.h"

using namespace shardify;

TEST_CASE("distributed: a rank whose remote shard reads stall stops naming the object, and the other names that rank",
          "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteClassFixture(dir / "www/data", false, 64).ok());
  // Rank 1 reads the same dataset at /stalled: lighttpd serves its manifest and passes
  // every other request on to a server that never answers.
  REQUIRE(MakeDirs(dir / "www/stalled").ok());
  std::filesystem::copy_file(dir / "www/data/manifest.sfm", dir / "www/stalled/manifest.sfm");
  testing::MisbehavingServer stall(testing::Misbehaviour::kStall);
  const std::string stall_port = stall.url().substr(stall.url().rfind(':') + 1);
  testing::Lighttpd server(dir / "www", dir.path(),
                           "server.modules += (\"mod_proxy\")\n"
                           "$HTTP[\"url\"] =~ \"^/stalled/(?!manifest\\.sfm$)\" {\n"
                           "  proxy.server = (\"\" => ((\"host\" => \"127.0.0.1\", \"port\" => " +
                               stall_port + ")))\n}\n");
  INFO(server.why());
  REQUIRE(server.started());
  testing::PortLease lease;
  REQUIRE(lease.port() != 0);

  const std::vector<std::string> env = {"SHARDIFY_CACHE_DIR=" + (dir / "cache"), "SHARDIFY_REMOTE_STALL_TIMEOUT=1",
                                        "SHARDIFY_REMOTE_ATTEMPTS=2"};
  // Far beyond the wait below: a rank that learns of the failure only from the timeout fails the test.
  const std::string args = " --model mlp --batch 16 --epochs 1 --threads 1 --dist-timeout 300 --out " + (dir / "out");
  const auto start = std::chrono::steady_clock::now();
  testing::Rank zero(0, 2, lease.port(), "train " + server.url() + "/data" + args, dir / "rank0.log", env);
  testing::Rank one(1, 2, lease.port(), "train " + server.url() + "/stalled" + args, dir / "rank1.log", env);
  // With the default limits (30 s stalls, 5 attempts) rank 1 would take minutes.
  const double bound = 45;
  const int code1 = one.Wait(bound);
  const double left = bound - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int code0 = zero.Wait(std::max(left, 1.0));
  const std::string log0 = testing::Slurp(dir / "rank0.log"), log1 = testing::Slurp(dir / "rank1.log");
  INFO("rank 0:\n" << log0 << "rank 1:\n" << log1);
  CHECK(code1 == 1);
  CHECK(code0 == 1);

  // The object rank 1 stalled on: one of the dataset's shards, at rank 1's location.
  const auto local = Dataset::Open(dir / "www/data");
  REQUIRE(local.ok());
  std::string stalled;
  for (const ShardInfo& shard : (*local)->manifest().shards) {
    const std::string url = server.url() + "/stalled/" + shard.file_name + ": ";
    if (log1.find(url) != std::string::npos) stalled = url;
  }
  REQUIRE_FALSE(stalled.empty());
  CHECK_THAT(log1, Catch::Contains("shardtrain (rank 1): ") && Catch::Contains("(after 2 attempts)"));
  CHECK_THAT(log0, Catch::Contains("shardtrain (rank 0): ") && Catch::Contains("rank 1 stopped: ") &&
                       Catch::Contains(stalled));
}
