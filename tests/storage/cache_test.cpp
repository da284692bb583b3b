// The bounded cache: whole files only, one fetch per key across processes, least recently
// used first out, never a held file, and a bounded wait when held files leave no room, then
// a clear error.
#include "storage/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/file.h"
#include "tests/common/temp_dir.h"

namespace shardify::storage {
namespace {

using testing::TempDir;

// A fetch that writes `size` bytes of `fill` and appends a line to `log` (counting fetches
// across processes).
Cache::Fetch Writes(uint64_t size, char fill, const std::string& log = "") {
  return [size, fill, log](const std::string& path) {
    if (!log.empty()) std::ofstream(log, std::ios::app) << "fetch\n";
    std::ofstream(path, std::ios::binary) << std::string(size, fill);
    return Status::Ok();
  };
}

size_t Lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  const Result<std::vector<std::string>> names = ListDir(dir);
  REQUIRE(names.ok());
  for (const std::string& n : *names) {
    if (n[0] != '.' && n.find(".lock") == std::string::npos) out.push_back(n);
  }
  return out;
}

// Sets the time of last use of the cache's file `path` (its modification time, which Get
// refreshes) to `seconds` after the epoch.
void SetUsed(const std::string& path, time_t seconds) {
  const struct timespec times[2] = {{0, UTIME_OMIT}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

TEST_CASE("storage: a cached file is fetched once and read from the cache after") {
  TempDir tmp;
  auto cache = Cache::Open(tmp / "c", 1000);
  REQUIRE(cache.ok());
  const std::string log = tmp / "log";
  auto a = (*cache)->Get("a", 100, Writes(100, 'a', log));
  REQUIRE(a.ok());
  CHECK(*FileSize((*a)->path()) == 100);
  auto again = (*cache)->Get("a", 100, Writes(100, 'x', log));
  REQUIRE(again.ok());
  CHECK(Lines(log) == 1);
  std::ifstream in((*again)->path());
  CHECK(in.get() == 'a');
  CHECK(*(*cache)->BytesUsed() == 100);
}

TEST_CASE("storage: room is made by evicting the least recently used file that no one holds") {
  TempDir tmp;
  auto cache = Cache::Open(tmp / "c", 300);
  REQUIRE(cache.ok());
  auto held = (*cache)->Get("held", 100, Writes(100, 'h'));
  REQUIRE(held.ok());
  for (const char* k : {"new", "old"}) REQUIRE((*cache)->Get(k, 100, Writes(100, 'x')).ok());  // released at once
  // Use times set apart by seconds, whatever the file system's clock granularity; the
  // held file the least recently used of all, and "old" fetched after "new".
  SetUsed(tmp / "c/held", 1000000000);
  SetUsed(tmp / "c/old", 1000000100);
  SetUsed(tmp / "c/new", 1000000200);
  REQUIRE((*cache)->Get("next", 100, Writes(100, 'n')).ok());
  std::vector<std::string> names = Names(tmp / "c");
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"held", "new", "next"});  // "old" went, "held" stayed
  CHECK(*(*cache)->BytesUsed() <= 300);
}

TEST_CASE("storage: when held files leave no room the error says so, and nothing is evicted") {
  TempDir tmp;
  auto cache = Cache::Open(tmp / "c", 250);
  REQUIRE(cache.ok());
  auto a = (*cache)->Get("a", 100, Writes(100, 'a'));
  auto b = (*cache)->Get("b", 100, Writes(100, 'b'));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const auto c = (*cache)->Get("c", 100, Writes(100, 'c'));  // a cache that waits 0 s fails at once
  REQUIRE(c.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(c.status().message(), Catch::Contains("limit is 250 bytes and 200 bytes (2 files) are held by 1 reader"));
  CHECK(Names(tmp / "c").size() == 2);
  CHECK((*cache)->Get("big", 251, Writes(251, 'x')).status().code() == StatusCode::kResourceExhausted);
}

// A child process that holds the cache's files `keys` (100 bytes each) until the pipe it
// returns is closed; they are held once it returns.
struct Holder {
  Holder(const std::string& dir, std::vector<std::string> keys) {
    int ready[2], done[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(done) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      ::close(done[1]);  // else the read below never sees the end of the pipe
      auto cache = Cache::Open(dir, 1000);
      std::vector<std::shared_ptr<const CachedFile>> held;
      for (const std::string& k : keys) held.push_back(*(*cache)->Get(k, 100, Writes(100, 'h')));
      char c = 1;
      if (::write(ready[1], &c, 1) != 1) ::_exit(1);
      while (::read(done[0], &c, 1) > 0) {
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(done[0]);
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    ::close(ready[0]);
    release = done[1];
  }
  void Release() {
    if (release >= 0) ::close(release);
    release = -1;
  }
  ~Holder() {
    Release();
    ::waitpid(pid, nullptr, 0);
  }
  pid_t pid = -1;
  int release = -1;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_CASE("storage: a reader waits for another process to release room", "[subprocess]") {
  TempDir tmp;
  Holder other(tmp / "c", {"a", "b"});
  auto cache = Cache::Open(tmp / "c", 250, 30);
  REQUIRE(cache.ok());
  // Released 0.3 s after `start` at the earliest: however late Get begins, it cannot end sooner.
  const auto start = std::chrono::steady_clock::now();
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    other.Release();
  });
  const auto c = (*cache)->Get("c", 100, Writes(100, 'c'));
  const double waited = SecondsSince(start);
  later.join();
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(waited >= 0.25);
  CHECK(waited < 10);
  CHECK(*(*cache)->BytesUsed() <= 250);
}

TEST_CASE("storage: a reader that never gets room fails after the wait, saying what holds the cache", "[subprocess]") {
  TempDir tmp;
  Holder other(tmp / "c", {"a"});
  auto cache = Cache::Open(tmp / "c", 250, 0.3);
  REQUIRE(cache.ok());
  auto mine = (*cache)->Get("b", 100, Writes(100, 'b'));
  REQUIRE(mine.ok());
  const auto start = std::chrono::steady_clock::now();
  const auto c = (*cache)->Get("c", 100, Writes(100, 'c'));
  const double waited = SecondsSince(start);
  REQUIRE(c.status().code() == StatusCode::kResourceExhausted);
  const std::string& m = c.status().message();
  CHECK_THAT(m, Catch::StartsWith("cache " + tmp / "c" + ": no room for c (100 bytes) after waiting 0.3 s"));
  CHECK_THAT(m, Catch::Contains("the limit is 250 bytes and 200 bytes (2 files) are held by 2 readers"));
  CHECK_THAT(m, Catch::Contains("SHARDIFY_CACHE_WAIT"));
  CHECK(waited >= 0.3);
  CHECK(waited < 5);
  // Without waiting, and for a file larger than the limit, it fails at once.
  const auto now = std::chrono::steady_clock::now();
  CHECK((*cache)->Get("c", 100, Writes(100, 'c'), WaitForRoom::kNo).status().code() == StatusCode::kResourceExhausted);
  CHECK((*cache)->Get("big", 251, Writes(251, 'x')).status().code() == StatusCode::kResourceExhausted);
  CHECK(SecondsSince(now) < 0.25);
  CHECK(Cache::Open(tmp / "d", 1, -1).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("storage: a failed or wrong-sized fetch leaves nothing in the cache") {
  TempDir tmp;
  auto cache = Cache::Open(tmp / "c", 1000);
  REQUIRE(cache.ok());
  const auto failed = (*cache)->Get("a", 100, [](const std::string& path) {
    std::ofstream(path) << "half";
    return IOError("the connection dropped");
  });
  CHECK(failed.status().code() == StatusCode::kIOError);
  CHECK_THAT(failed.status().message(), Catch::Contains("the connection dropped"));
  const auto short_one = (*cache)->Get("b", 100, Writes(60, 'b'));
  CHECK(short_one.status().code() == StatusCode::kIOError);
  CHECK_THAT(short_one.status().message(), Catch::Contains("fetched 60 bytes, expected 100"));
  const Result<std::vector<std::string>> left = ListDir(tmp / "c");
  REQUIRE(left.ok());
  for (const std::string& n : *left) CHECK(n.find(".lock") != std::string::npos);
  CHECK(*(*cache)->BytesUsed() == 0);
}

TEST_CASE("storage: processes fetching one file at once fetch it once", "[subprocess]") {
  TempDir tmp;
  const std::string dir = tmp / "c", log = tmp / "log";
  std::vector<pid_t> children;
  for (int k = 0; k < 4; ++k) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      auto cache = Cache::Open(dir, 1 << 20);
      auto slow = [log](const std::string& path) {
        std::ofstream(log, std::ios::app) << "fetch\n";
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::ofstream(path, std::ios::binary) << std::string(4096, 's');
        return Status::Ok();
      };
      auto f = cache.ok() ? (*cache)->Get("shared", 4096, slow) : cache.status();
      ::_exit(f.ok() && *FileSize((*f)->path()) == 4096 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  CHECK(Lines(log) == 1);
}

TEST_CASE("storage: a partial download left by a dead process is removed, not counted") {
  TempDir tmp;
  auto cache = Cache::Open(tmp / "c", 150);
  REQUIRE(cache.ok());
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = tmp / ("c/.x.partial.100." + std::to_string(dead));
  std::ofstream(stale) << std::string(100, 'p');
  REQUIRE((*cache)->Get("a", 100, Writes(100, 'a')).ok());  // 100 + a stale 100 would exceed 150
  CHECK_FALSE(PathExists(stale));
}

TEST_CASE("storage: keys that could leave the cache folder are refused") {
  TempDir tmp;
  auto cache = Cache::Open(tmp / "c", 100);
  REQUIRE(cache.ok());
  for (const char* key : {"", "../x", "a/b", ".hidden", "x.lock"}) {
    INFO(key);
    CHECK((*cache)->Get(key, 1, Writes(1, 'x')).status().code() == StatusCode::kInvalidArgument);
  }
  CHECK(Cache::Open(tmp / "d", 0).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardify::storage
