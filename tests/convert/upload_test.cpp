// Converting into an object store puts the shards a conversion finishes while it runs
// (EarlyUploads): complete shards only, each once, and a failed put stops the conversion.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/file.h"
#include "convert/pipeline/upload_internal.h"
#include "tests/common/temp_dir.h"

namespace shardify::convert::detail {
namespace {

using testing::TempDir;

void Write(const std::string& path) { std::ofstream(path) << "bytes of " << path; }

// Waits up to 10 s for `ready`, looking every 10 ms; whether it came.
template <typename F>
bool Eventually(F ready) {
  for (int i = 0; i < 1000 && !ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return ready();
}

TEST_CASE("upload: finished shards are put while the conversion runs, each once, never a partial one") {
  TempDir tmp;
  std::mutex mu;
  std::vector<std::string> puts;
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return puts.size();
  };
  EarlyUploads up(
      tmp.path(),
      [&](const std::string& name) {
        std::lock_guard<std::mutex> lock(mu);
        puts.push_back(name);
        return Status::Ok();
      },
      nullptr);
  // shard-00001 is being written all along, beside files that are no shards.
  Write(tmp / "shard-00001.sfs.tmp");
  Write(tmp / "manifest.sfm");
  Write(tmp / "skipped.tsv");
  Write(tmp / "shard-00000.sfs.tmp");
  REQUIRE(RenameFile(tmp / "shard-00000.sfs.tmp", tmp / "shard-00000.sfs").ok());
  REQUIRE(Eventually([&] { return count() == 1; }));
  // A shard finished now is put by a later look than the one that put shard-00000 (that
  // one listed the folder before its put), so by a look that listed the folder after every
  // file above was there: once it is put, that look has passed them over.
  Write(tmp / "shard-00002.sfs.tmp");
  REQUIRE(RenameFile(tmp / "shard-00002.sfs.tmp", tmp / "shard-00002.sfs").ok());
  REQUIRE(Eventually([&] { return count() == 2; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    CHECK(puts == std::vector<std::string>{"shard-00000.sfs", "shard-00002.sfs"});
  }
  REQUIRE(RenameFile(tmp / "shard-00001.sfs.tmp", tmp / "shard-00001.sfs").ok());
  REQUIRE(Eventually([&] { return count() == 3; }));
  CHECK(up.Stop().ok());
  CHECK(up.put() == std::vector<std::string>{"shard-00000.sfs", "shard-00002.sfs", "shard-00001.sfs"});
  CHECK(puts == up.put());
  CHECK_FALSE(up.cancel()->load());
}

TEST_CASE("upload: a failed put cancels the conversion and is its error, and so does the caller's cancel") {
  TempDir tmp;
  Write(tmp / "shard-00000.sfs");
  EarlyUploads failing(
      tmp.path(), [](const std::string& name) { return IOError(name + ": the store said no"); }, nullptr);
  REQUIRE(Eventually([&] { return failing.cancel()->load(); }));
  const Status st = failing.Stop();
  CHECK(st.code() == StatusCode::kIOError);
  CHECK(st.message() == "shard-00000.sfs: the store said no");
  CHECK(failing.put().empty());

  // The folder watched is made after the watch starts (as a conversion makes it); a shard
  // put from it shows looks have run while the caller's flag was down, and left the
  // conversion going.
  std::atomic<bool> caller{false};
  std::atomic<int> watched_puts{0};
  const std::string later = tmp / "later";
  EarlyUploads watched(
      later,
      [&](const std::string&) {
        ++watched_puts;
        return Status::Ok();
      },
      &caller);
  REQUIRE(shardify::MakeDirs(later).ok());
  Write(later + "/shard-00000.sfs");
  REQUIRE(Eventually([&] { return watched_puts.load() == 1; }));
  CHECK_FALSE(watched.cancel()->load());
  caller = true;
  REQUIRE(Eventually([&] { return watched.cancel()->load(); }));
  CHECK(watched.Stop().ok());
}

}  // namespace
}  // namespace shardify::convert::detail
