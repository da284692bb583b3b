// How many shard files a Dataset keeps open, and what it costs to open one again.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/file.h"
#include "format/dataset.h"
#include "format/layout.h"
#include "tests/common/temp_dir.h"
#include "tests/format/fixtures.h"

using namespace shardify;
using testing::TempDir;

namespace {

// File descriptors open in this process.
size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Sample `v`'s image (field 0), or nothing when it does not decode.
std::optional<std::vector<uint8_t>> Image(const SampleView& v, Decoder& d) {
  auto size = v.raw_size(0);
  if (!size.ok()) return std::nullopt;
  std::vector<uint8_t> out(*size);
  if (!v.Decode(0, out.data(), out.size(), d).ok()) return std::nullopt;
  return out;
}

// The 400 samples of WriteSmallDataset(dir, 400, 1024), every one once, out of order, so
// that consecutive samples lie in different shards.
std::vector<uint64_t> OutOfOrder() {
  std::vector<uint64_t> order;
  for (uint64_t i = 0; i < 400; ++i) order.push_back((i * 37) % 400);
  return order;
}

// Flips one byte of `path` at `offset`.
void FlipByte(const std::string& path, uint64_t offset) {
  FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  std::fputc(c ^ 0xff, f);
  std::fclose(f);
}

}  // namespace

TEST_CASE("open shards: by default every shard stays mapped, and a batch needs no pins") {
  TempDir tmp;
  REQUIRE(testing::WriteSmallDataset(tmp.path(), 400, 1024).ok());
  auto ds = Dataset::Open(tmp.path());
  REQUIRE(ds.ok());
  const size_t shards = (*ds)->manifest().shards.size();
  REQUIRE(shards > 20);
  CHECK((*ds)->max_open_shards() == kAutomaticMappedShards);
  const std::vector<uint64_t> order = OutOfOrder();
  std::vector<SampleView> views(order.size());
  std::vector<std::shared_ptr<const void>> pins;
  for (int batch = 0; batch < 2; ++batch) {  // the batch that opens the shards, and one after
    REQUIRE((*ds)->SampleBatch(order.data(), order.size(), views.data(), &pins).ok());
    CHECK(pins.empty());
  }
  CHECK((*ds)->open_shards() == shards);
  for (size_t i = 0; i < order.size(); ++i) {
    auto label = views[i].int_value(1);
    REQUIRE(label.ok());
    CHECK(*label == static_cast<int64_t>(order[i] % 10));
  }
}

TEST_CASE("open shards: under a cap, a batch pins each shard once and the views stay valid past the cap") {
  TempDir tmp;
  REQUIRE(testing::WriteSmallDataset(tmp.path(), 400, 1024).ok());
  ReadOptions ro;
  ro.max_open_shards = 2;
  auto ds = Dataset::Open(tmp.path(), ro);
  REQUIRE(ds.ok());
  const std::vector<uint64_t> order = OutOfOrder();
  std::vector<SampleView> views(order.size());
  std::vector<std::shared_ptr<const void>> pins;
  REQUIRE((*ds)->SampleBatch(order.data(), order.size(), views.data(), &pins).ok());
  CHECK(pins.size() == (*ds)->manifest().shards.size());  // each shard once, though closed and opened again
  CHECK((*ds)->open_shards() <= 2);
  Decoder d;
  for (size_t i = 0; i < order.size(); ++i) {  // every view reads, though its shard left the cache
    auto image = Image(views[i], d);
    REQUIRE(image);
    CHECK(*image == testing::Pattern(64, order[i]));
  }
}

TEST_CASE("open shards: a shard opened again keeps its checked index and still refuses a changed file") {
  TempDir tmp;
  REQUIRE(testing::WriteSmallDataset(tmp.path(), 100, 1024).ok());
  ReadOptions ro;
  ro.max_open_shards = 1;
  auto ds = Dataset::Open(tmp.path(), ro);
  REQUIRE(ds.ok());
  const Manifest& m = (*ds)->manifest();
  REQUIRE(m.shards.size() >= 3);
  const std::string first = JoinPath(tmp.path(), m.shards[0].file_name);
  Decoder d;
  REQUIRE((*ds)->Sample(0).ok());                         // opens and checks shard 0
  REQUIRE((*ds)->Sample(m.shards[1].first_sample).ok());  // closes shard 0
  // Damage the last byte of shard 0's index (just before the footer): the index is not
  // read again, so shard 0 opens again and its samples decode from the checked copy.
  FlipByte(first, m.shards[0].size_bytes - kShardFooterSize - 1);
  {  // the view is dropped afterwards, so that nothing holds shard 0 open
    auto again = (*ds)->Sample(1);
    REQUIRE(again.ok());
    auto image = Image(*again, d);
    REQUIRE(image);
    CHECK(*image == testing::Pattern(64, 1));
  }
  // A file of another size is refused when it opens again, naming it.
  REQUIRE((*ds)->Sample(m.shards[1].first_sample).ok());
  std::filesystem::resize_file(first, m.shards[0].size_bytes - 1);
  auto cut = (*ds)->Sample(0);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.status().code() == StatusCode::kCorruption);
  CHECK(cut.status().message().find(m.shards[0].file_name) != std::string::npos);
}

TEST_CASE("open shards: pread stays within a low file-descriptor limit and reads every shard") {
  TempDir tmp;
  REQUIRE(testing::WriteSmallDataset(tmp.path(), 400, 1024).ok());
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // a child, so that the lower limit is its own; exit code = what failed
    const size_t before = OpenDescriptors();
    struct rlimit low = {before + 48, before + 48};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(10);
    ReadOptions ro;
    ro.io = IoMode::kPread;
    auto ds = Dataset::Open(tmp.path(), ro);
    if (!ds.ok()) _exit(11);
    if ((*ds)->max_open_shards() != std::max<size_t>(16, (before + 48) / 4)) _exit(12);
    if ((*ds)->manifest().shards.size() <= (*ds)->max_open_shards()) _exit(13);
    Decoder d;
    for (int pass = 0; pass < 2; ++pass) {
      for (const uint64_t i : OutOfOrder()) {
        auto v = (*ds)->Sample(i);
        if (!v.ok()) _exit(14);
        auto image = Image(*v, d);
        if (!image || *image != testing::Pattern(64, i)) _exit(15);
        if ((*ds)->open_shards() > (*ds)->max_open_shards()) _exit(16);
      }
    }
    _exit(OpenDescriptors() <= before + (*ds)->max_open_shards() ? 0 : 17);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
