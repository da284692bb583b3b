// One writer per destination, and overwrite that keeps the old dataset until the new one is
// complete (format/destination.cpp).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "base/file.h"
#include "fixtures.h"
#include "format/dataset.h"
#include "format/writer.h"
#include "tests/common/temp_dir.h"

using namespace shardify;
using namespace shardify::testing;

namespace {

std::unique_ptr<DatasetWriter> Writer(const std::string& dir, bool overwrite) {
  WriterOptions o;
  o.fsync = false;
  o.overwrite = overwrite;
  o.target_shard_bytes = 512;
  o.companions = {"notes.tsv"};
  auto w = DatasetWriter::Create(dir, ImageLabelFields(), o);
  INFO(w.status().ToString());
  REQUIRE(w.ok());
  return std::move(w).value();
}

uint64_t Samples(const std::string& dir) {
  auto ds = Dataset::Open(dir);
  INFO(ds.status().ToString());
  REQUIRE(ds.ok());
  for (uint64_t i = 0; i < (*ds)->num_samples(); ++i) REQUIRE((*ds)->Sample(i).ok());  // every shard is there
  return (*ds)->num_samples();
}

// Names in `dir`, hidden ones included.
std::vector<std::string> Names(const std::string& dir) { return ListDir(dir).value(); }

}  // namespace

TEST_CASE("format: a second writer of the same directory is refused while the first lives") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  {
    auto first = Writer(dir, false);
    REQUIRE(first->Append(ImageLabelSample(0)).ok());
    WriterOptions o;
    o.overwrite = true;  // not even with overwrite
    auto second = DatasetWriter::Create(dir, ImageLabelFields(), o);
    REQUIRE_FALSE(second.ok());
    CHECK(second.status().code() == StatusCode::kBusy);
    CHECK_THAT(second.status().message(), Catch::Contains(dir) && Catch::Contains("another process is writing") &&
                                              Catch::Contains("process " + std::to_string(::getpid())));
    REQUIRE(first->Finish().ok());
  }
  CHECK(Samples(dir) == 1);
  CHECK(Names(dir) == std::vector<std::string>{"manifest.sfm", "shard-00000.sfs"});  // no lock file left
  WriterOptions o;
  o.overwrite = true;
  CHECK(WriteSmallDataset(dir, 7, 4096, o).ok());  // the lock went with the first writer
  CHECK(Samples(dir) == 7);
}

TEST_CASE("format: a destination lock dies with its process, also after kill -9") {
  TempDir tmp;
  const std::string lock = tmp / ".shardify.lock";
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Result<std::unique_ptr<FileLock>> held = FileLock::Acquire(lock);
    while (!held.ok()) held = FileLock::Acquire(lock);
    for (;;) pause();
  }
  const std::string pid = std::to_string(child);
  bool held = false;
  for (int i = 0; i < 4000 && !held; ++i) {  // until the child has written its id
    std::ifstream in(lock);
    std::string text;
    std::getline(in, text);
    held = text == pid;
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const Status probe = FileLock::Acquire(lock).status();
  kill(child, SIGKILL);
  int st = 0;
  waitpid(child, &st, 0);
  REQUIRE(held);
  CHECK(probe.code() == StatusCode::kBusy);
  CHECK_THAT(probe.message(), Catch::Contains("locked by process " + pid));
  auto after = FileLock::Acquire(lock);
  INFO(after.status().ToString());
  CHECK(after.ok());
}

TEST_CASE("format: overwrite keeps the old dataset readable until Finish, then switches") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  REQUIRE(WriteSmallDataset(dir, 10).ok());
  auto w = Writer(dir, true);
  for (int i = 0; i < 40; ++i) REQUIRE(w->Append(ImageLabelSample(static_cast<uint64_t>(i))).ok());
  REQUIRE(w->bytes_written() > 512);  // shards of the new dataset exist somewhere
  CHECK(Samples(dir) == 10);          // the old one is untouched
  CHECK(Names(dir) == std::vector<std::string>{".shardify.lock", "manifest.sfm", "shard-00000.sfs"});
  const std::string notes = "input\treason\n";
  REQUIRE(w->WriteCompanion("notes.tsv", notes.data(), notes.size()).ok());
  CHECK(w->WriteCompanion("other.txt", "x", 1).code() == StatusCode::kInvalidArgument);
  REQUIRE(w->Finish().ok());
  CHECK(Samples(dir) == 40);
  CHECK(PathExists(dir + "/notes.tsv"));
  w.reset();
  CHECK(Names(tmp.path()) == std::vector<std::string>{"ds"});  // no staging directory left
  CHECK_FALSE(PathExists(dir + "/.shardify.lock"));
}

TEST_CASE("format: a reader whose dataset is replaced under it says so when it opens a shard, not corruption") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  REQUIRE(WriteSmallDataset(dir, 24, 128).ok());
  ReadOptions ro;
  ro.max_open_shards = 1;  // as a dataset of more shards than the default 64 keeps open
  auto ds = Dataset::Open(dir, ro);
  REQUIRE(ds.ok());
  REQUIRE((*ds)->manifest().shards.size() > 2);
  REQUIRE((*ds)->Sample(0).ok());
  WriterOptions o;
  o.overwrite = true;
  REQUIRE(WriteSmallDataset(dir, 30, 300, o).ok());  // other shards
  REQUIRE((*ds)->Sample(0).ok());                    // still open: the old file's bytes
  for (const uint64_t i : {uint64_t{23}, uint64_t{11}}) {
    INFO(i);
    const Result<SampleView> s = (*ds)->Sample(i);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == StatusCode::kIOError);
    CHECK_THAT(s.status().message(), Catch::StartsWith(dir + ": the dataset was replaced after it was opened"));
  }
  CHECK(Dataset::Open(dir, ro).value()->Sample(23).ok());  // opened again: the new dataset
}

TEST_CASE("format: an overwrite that is abandoned before Finish leaves the old dataset and no debris") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  REQUIRE(WriteSmallDataset(dir, 10).ok());
  const std::vector<std::string> before = Names(dir);
  {
    auto w = Writer(dir, true);  // a run that fails half-way drops its writer like this
    for (int i = 0; i < 40; ++i) REQUIRE(w->Append(ImageLabelSample(static_cast<uint64_t>(i))).ok());
    REQUIRE(w->bytes_written() > 512);
  }
  CHECK(Samples(dir) == 10);
  CHECK(Names(dir) == before);
  CHECK(Names(tmp.path()) == std::vector<std::string>{"ds"});
}

TEST_CASE("format: files of others in the destination stay through an overwrite") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  REQUIRE(WriteSmallDataset(dir, 10, 512).ok());
  std::ofstream(dir + "/README.txt") << "mine";
  {
    auto w = Writer(dir, true);
    for (int i = 0; i < 3; ++i) REQUIRE(w->Append(ImageLabelSample(static_cast<uint64_t>(i))).ok());
    CHECK(Samples(dir) == 10);
    REQUIRE(w->Finish().ok());
  }
  CHECK(Samples(dir) == 3);
  CHECK(Names(dir) == std::vector<std::string>{"README.txt", "manifest.sfm", "shard-00000.sfs"});
}

TEST_CASE("format: a companion alone is a file of the user's, refused without overwrite, and debris beside shards") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  REQUIRE(MakeDirs(dir).ok());
  std::ofstream(dir + "/notes.tsv") << "mine";
  WriterOptions o;
  o.companions = {"notes.tsv"};
  const Result<std::unique_ptr<DatasetWriter>> refused = DatasetWriter::Create(dir, ImageLabelFields(), o);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("holds no dataset (found 'notes.tsv')"));
  CHECK(Names(dir) == std::vector<std::string>{"notes.tsv"});
  // What a run killed before its manifest leaves: the companion goes with its shard.
  std::ofstream(dir + "/shard-00000.sfs") << "half";
  {
    auto w = Writer(dir, false);
    REQUIRE(w->Append(ImageLabelSample(0)).ok());
    REQUIRE(w->Finish().ok());
  }
  CHECK(Names(dir) == std::vector<std::string>{"manifest.sfm", "shard-00000.sfs"});
}

TEST_CASE("format: a staging directory left by a killed overwrite is removed by the next writer") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  REQUIRE(WriteSmallDataset(dir, 10).ok());
  // What a writer killed after its new manifest was complete, but before the switch, leaves.
  REQUIRE(WriteSmallDataset(tmp / ".ds.shardify-new", 4).ok());
  std::ofstream(tmp / ".ds.shardify-new/shard-00009.sfs.tmp") << "half";
  REQUIRE(MakeDirs(dir + "/.shardify-new").ok());
  std::ofstream(dir + "/.shardify-new/shard-00000.sfs.tmp") << "half";
  WriterOptions o;
  o.overwrite = true;
  REQUIRE(WriteSmallDataset(dir, 6, 4096, o).ok());
  CHECK(Samples(dir) == 6);
  CHECK(Names(tmp.path()) == std::vector<std::string>{"ds"});
  CHECK(Names(dir) == std::vector<std::string>{"manifest.sfm", "shard-00000.sfs"});
}
