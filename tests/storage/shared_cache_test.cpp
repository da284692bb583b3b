// One cache folder shared by the readers of a node: Loaders in two processes reading one
// remote dataset through a small cache both finish with the batches read from disk; a
// limit too small for the batches one Loader has in flight is refused at open with the
// smallest that would do; and a reader that never gets room fails after the wait, saying
// what holds the cache.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/file.h"
#include "format/dataset.h"
#include "reader/loader.h"
#include "storage/remote.h"
#include "tests/common/temp_dir.h"
#include "tests/common/watchdog.h"
#include "tests/reader/reader_fixtures.h"
#include "tests/storage/served_dataset.h"
#include "tests/storage/servers.h"

namespace shardify {
namespace {

using testing::Lighttpd;
using testing::ServedDataset;
using testing::TempDir;

// The dataset the tests serve: 360 images in about 33 shards.
constexpr uint64_t kCacheSamples = 360;

// Batches of 8 in shard_windowed order (windows of 2 shards), 2 epochs, prefetch 2.
LoaderOptions Windowed(uint64_t seed, const storage::RemoteOptions& remote) {
  LoaderOptions o;
  o.batch_size = 8;
  o.prefetch = 2;
  o.threads = 2;
  o.fields = {"image", "label"};
  o.sampler.order = SampleOrder::kShardWindowed;
  o.sampler.window_shards = 2;
  o.sampler.epochs = 2;
  o.sampler.seed = seed;
  o.remote = remote;
  return o;
}

storage::RemoteOptions Cache(const std::string& dir, uint64_t limit, double wait_s) {
  storage::RemoteOptions r;
  r.cache_dir = dir;
  r.cache_limit = limit;
  r.transfer.cache_wait_s = wait_s;
  r.transfer.stall_timeout_s = 5;
  return r;
}

// Every batch's bytes of a run of `o` over `location`, concatenated; the first error
// instead, when one comes. No Catch macros: it runs in child processes too.
Result<std::vector<uint8_t>> ReadAll(const std::string& location, const LoaderOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, Loader::Open(location, o));
  std::vector<uint8_t> all;
  while (true) {
    ASSIGN_OR_RETURN(std::shared_ptr<Batch> b, loader->Next());
    if (!b) return all;
    for (const BatchField& f : b->fields) {
      all.insert(all.end(), static_cast<const uint8_t*>(f.data), static_cast<const uint8_t*>(f.data) + f.bytes);
    }
  }
}

// The smallest cache limit Loader::Open takes for `o` (from its refusal of a limit of one
// shard, which it must refuse); o.remote.cache_dir is set.
uint64_t SmallestLimit(const std::string& url, LoaderOptions o, uint64_t largest) {
  o.remote.cache_limit = largest;
  const auto refused = Loader::Open(url, o);
  REQUIRE(refused.status().code() == StatusCode::kInvalidArgument);
  // std::regex is avoided here: GCC 12 warns of its internals under -fsanitize (the ASan build).
  const std::string message = refused.status().message(), lead = "must be at least ";
  const size_t at = message.find(lead);
  REQUIRE(at != std::string::npos);
  const size_t digits = at + lead.size();
  const size_t end = message.find_first_not_of("0123456789", digits);
  REQUIRE(end > digits);
  REQUIRE(message.compare(end, 6, " bytes") == 0);
  return std::stoull(message.substr(digits, end - digits));
}

TEST_CASE("storage: Loaders in two processes share a small cache and read what they read from disk", "[subprocess]") {
  ServedDataset served(kCacheSamples);
  INFO(served.server.why());
  REQUIRE(served.server.started());
  const std::string url = served.server.url() + "/ds", cache = served.tmp / "cache";
  const uint64_t largest = served.LargestShard();
  const uint64_t one = SmallestLimit(url, Windowed(0, Cache(served.tmp / "cache", 0, 2)), largest);
  // Room for both Loaders' batches in flight at once, far less than the dataset.
  const std::vector<uint64_t> sizes = served.ShardSizes();
  REQUIRE(2 * one < std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}) / 2);
  const storage::RemoteOptions shared = Cache(cache, 2 * one, 20);
  std::vector<pid_t> children;
  for (uint64_t seed : {1, 2}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const Result<std::vector<uint8_t>> remote = ReadAll(url, Windowed(seed, shared));
      const Result<std::vector<uint8_t>> local = ReadAll(served.tmp / "www/ds", Windowed(seed, shared));
      if (!remote.ok()) std::fprintf(stderr, "%s\n", remote.status().ToString().c_str());
      ::_exit(remote.ok() && local.ok() && !local->empty() && *remote == *local ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    const int code = testing::WithinSeconds(120, "two processes reading through one cache", [pid] {
      int status = 0;
      return ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    });
    CHECK(code == 0);
  }
}

TEST_CASE("storage: a cache too small for a Loader's batches in flight is refused at open, naming the smallest",
          "[subprocess]") {
  ServedDataset served(kCacheSamples);
  INFO(served.server.why());
  REQUIRE(served.server.started());
  const std::string url = served.server.url() + "/ds";
  const uint64_t largest = served.LargestShard();
  const uint64_t smallest = SmallestLimit(url, Windowed(0, Cache(served.tmp / "cache", 0, 2)), largest);
  CHECK(smallest % largest == 0);
  CHECK(smallest > 2 * largest);  // more than one batch's window: the batches in flight

  storage::RemoteOptions remote = Cache(served.tmp / "cache", smallest - 1, 2);
  const auto refused = Loader::Open(url, Windowed(0, remote));
  REQUIRE(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::Contains("at least " + std::to_string(smallest) + " bytes"));
  CHECK_THAT(refused.status().message(), Catch::Contains("prefetch 2 + 1"));

  // What is taken at open is enough: a run reads every batch (none waits out its 2 s).
  remote.cache_limit = smallest;
  for (uint64_t seed : {3, 4}) {
    const Result<std::vector<uint8_t>> read = ReadAll(url, Windowed(seed, remote));
    INFO(read.status().ToString());
    REQUIRE(read.ok());
    CHECK(*read == *ReadAll(served.tmp / "www/ds", Windowed(seed, remote)));
  }
}

TEST_CASE("storage: a Loader that never gets room in the cache fails after the wait, saying what holds it",
          "[subprocess]") {
  ServedDataset served(kCacheSamples);
  INFO(served.server.why());
  REQUIRE(served.server.started());
  const std::string url = served.server.url() + "/ds";
  const uint64_t largest = served.LargestShard();
  const uint64_t limit = SmallestLimit(url, Windowed(0, Cache(served.tmp / "cache", 0, 2)), largest);
  const storage::RemoteOptions remote = Cache(served.tmp / "cache", limit, 0.5);
  ReadOptions ro;
  ro.remote = remote;
  auto ds = Dataset::Open(url, ro);
  REQUIRE(ds.ok());
  const std::string folder = (*ds)->remote()->cache()->dir();
  // Another reader holds a file that leaves less room than any shard needs.
  auto other = storage::Cache::Open(folder, limit);
  REQUIRE(other.ok());
  const uint64_t filler = limit - served.ShardSizes().front() + 1;
  auto held = (*other)->Get("other", filler, [filler](const std::string& path) {
    const std::string bytes(filler, 'x');
    return WriteFileAtomic(path, bytes.data(), bytes.size(), /*fsync=*/false);
  });
  REQUIRE(held.ok());

  auto loader = Loader::Open(url, Windowed(0, remote));
  REQUIRE(loader.ok());
  const auto start = std::chrono::steady_clock::now();
  const auto next = testing::WithinSeconds(60, "waiting for room", [&] { return (*loader)->Next(); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(next.status().code() == StatusCode::kResourceExhausted);
  const std::string& m = next.status().message();
  CHECK_THAT(m, Catch::Contains("cache " + folder + ": no room for shard-"));
  CHECK_THAT(m, Catch::Contains("after waiting 0.5 s: the limit is " + std::to_string(limit) + " bytes and " +
                                std::to_string(filler) + " bytes (1 file) are held by 1 reader"));
  CHECK(waited >= 0.5);
  CHECK(waited < 30);
}

}  // namespace
}  // namespace shardify
