// Pipeline behaviour: identical bytes for any thread count, cancellation, kill -9 and
// Ctrl-C of the CLI, dictionaries.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "convert/programs/cli.h"
#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;
namespace fs = std::filesystem;

TEST_CASE("convert: output is byte-identical for 1, 2 and 4 threads and any window") {
  TempDir dir;
  std::string src = ManyPngs(dir, 60);
  ConvertOptions o;
  o.shard_bytes = 2048;
  o.level = 3;  // small shards, so that there are several
  o.split = {{"train", 0.7}, {"val", 0.3}};
  o.threads = 1;
  auto r1 = RunConvert(src, dir / "t1", o);
  INFO(r1.status().ToString());
  REQUIRE(r1.ok());
  CHECK(r1->shards > 2);
  CHECK(Open(dir / "t1").ds->manifest().fields[0].shape == Shape{-1, -1, 8});
  o.threads = 2;
  REQUIRE(RunConvert(src, dir / "t2", o).ok());
  o.threads = 4;
  o.window = 3;
  REQUIRE(RunConvert(src, dir / "t4", o).ok());
  auto a = DirBytes(dir / "t1");
  CHECK(a.size() == r1->shards + 1);
  CHECK(a == DirBytes(dir / "t2"));
  CHECK(a == DirBytes(dir / "t4"));
}

TEST_CASE("convert: a cancelled conversion leaves no dataset files and a re-run works") {
  TempDir dir;
  std::string src = ManyPngs(dir, 40);
  std::atomic<bool> cancel{false};
  CancelAt sink(&cancel, 10);
  ConvertOptions o;
  o.shard_bytes = 1024;
  o.cancel = &cancel;
  o.source = src;
  o.dest = dir / "out";
  o.fsync = false;
  o.threads = 2;
  auto r = Convert(o, &sink);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kCancelled);
  CHECK(sink.calls >= 10);
  CHECK_FALSE(HasDatasetFiles(dir / "out"));
  cancel = false;
  o.cancel = nullptr;
  auto again = Convert(o);
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK(Open(dir / "out").ds->num_samples() == 40);
}

TEST_CASE("convert: kill -9 of shardify mid-way leaves no manifest, running again works", "[subprocess]") {
  TempDir dir;
  std::string src = ManyPngs(dir, 600, 24);
  const std::string out = dir / "out";
  pid_t pid = Spawn(
      {SHARDIFY_BIN, src, "-o", out, "--threads", "1", "--level", "19", "--shard-size", "4K", "--no-fsync", "-q"});
  REQUIRE(pid > 0);
  const bool started = WaitForShard(out, pid);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  REQUIRE(started);
  REQUIRE(WIFSIGNALED(st));
  CHECK_FALSE(fs::exists(out + "/manifest.sfm"));
  auto r = RunConvert(src, out);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(Open(out).ds->num_samples() == 600);
  for (const auto& e : fs::directory_iterator(out)) CHECK(e.path().extension() != ".tmp");
}

TEST_CASE("convert: Ctrl-C (SIGINT) stops shardify with exit 130 and removes its files", "[subprocess]") {
  TempDir dir;
  std::string src = ManyPngs(dir, 600, 24);
  const std::string out = dir / "out";
  pid_t pid =
      Spawn({SHARDIFY_BIN, src, "-o", out, "--threads", "1", "--level", "19", "--shard-size", "4K", "--no-fsync"});
  REQUIRE(pid > 0);
  const bool started = WaitForShard(out, pid);
  kill(pid, SIGINT);
  int st = 0;
  waitpid(pid, &st, 0);
  REQUIRE(started);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 130);
  CHECK_FALSE(HasDatasetFiles(out));
}

TEST_CASE("convert: --dict trains a dictionary stored with the image field") {
  TempDir dir;
  std::string src = ManyPngs(dir, 30);
  ConvertOptions o;
  o.dict = true;
  auto r = RunConvert(src, dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / "out");
  if (r->dictionary) {
    CHECK_FALSE(rb.ds->manifest().fields[rb.Field("image")].dictionary.empty());
  } else {
    REQUIRE_FALSE(r->warnings.empty());  // training may refuse tiny inputs; it must say so
    CHECK(r->warnings.back().find("dictionary") != std::string::npos);
  }
  for (uint64_t i = 0; i < 30; ++i)
    CHECK(rb.Array(i, "image").size() ==
          static_cast<size_t>(rb.ShapeOf(i, "image")[0] * rb.ShapeOf(i, "image")[1] * 8));
}

TEST_CASE("convert: split and byte-size option parsing") {
  auto s = ParseSplitSpec("train=0.8,val=0.1,test=0.1");
  REQUIRE(s.ok());
  CHECK(s->size() == 3);
  CHECK((*s)[1].first == "val");
  CHECK_FALSE(ParseSplitSpec("train=0.8,val=0.1").ok());
  CHECK_FALSE(ParseSplitSpec("train=0.5,train=0.5").ok());
  CHECK_FALSE(ParseSplitSpec("train").ok());
  CHECK(*ParseByteSize("256M") == 256ull << 20);
  CHECK(*ParseByteSize("4k") == 4096);
  CHECK(*ParseByteSize("1000") == 1000);
  CHECK_FALSE(ParseByteSize("-5").ok());
  CHECK_FALSE(ParseByteSize("12Q").ok());
}

TEST_CASE("convert: integer options refuse negative values instead of wrapping them") {
  for (const char* flag : {"--seed", "--fg-locations", "--threads"}) {
    const Result<CommandLine> c = ParseCommandLine({"src", "-o", "dst", "--patch-size", "8x8", flag, "-1"});
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(c.status().message(), Catch::Contains(flag));
  }
  CHECK_THAT(ParseCommandLine({"src", "-o", "dst", "--seed", "99999999999999999999"}).status().message(),
             Catch::Contains("too large"));
  CHECK(ParseCommandLine({"src", "-o", "dst", "--seed", "18446744073709551615"})->options.seed == UINT64_MAX);
}

TEST_CASE("convert: the summary gives the rate with the digits it has, and none when there is none") {
  ConvertSummary s;
  s.layout = "folder";
  auto timing = [&](uint64_t samples, double seconds) {
    s.samples = samples;
    s.seconds = seconds;
    const std::string text = FormatSummary(s);
    const size_t line = text.rfind("\n  ", text.size() - 2);
    return text.substr(line + 3, text.size() - line - 4);
  };
  CHECK(timing(3, 8) == "8.00 s, 0.375 files/s");  // volumes: not "0 files/s"
  CHECK(timing(70000, 3.5) == "3.50 s, 20000 files/s");
  CHECK(timing(0, 0.25) == "0.25 s");
}

TEST_CASE("convert: the shardify CLI prints a summary, explains --help and refuses bad usage", "[subprocess]") {
  TempDir dir;
  std::string src = ManyPngs(dir, 6);
  std::string out;
  CHECK(Shell(std::string(SHARDIFY_BIN) + " '" + src + "' -o '" + dir.path() +
                  "/ds' --no-fsync --split train=0.5,val=0.5",
              &out) == 0);
  CHECK(out.find("6 samples, layout folder") != std::string::npos);
  CHECK(out.find("train=3 val=3") != std::string::npos);
  CHECK(out.find("files/s") != std::string::npos);
  CHECK(out.find("ratio") != std::string::npos);
  out.clear();
  CHECK(Shell(std::string(SHARDIFY_BIN) + " --help", &out) == 0);
  for (const char* opt : {"--threads", "--level", "--shard-size", "--dict", "--split", "--seed", "--on-error",
                          "--overwrite", "--dry-run", "--layout"}) {
    CHECK(out.find(opt) != std::string::npos);
  }
  out.clear();
  CHECK(Shell(std::string(SHARDIFY_BIN) + " '" + src + "' -o '" + dir.path() + "/ds2' --split train=2", &out) == 2);
  out.clear();
  CHECK(Shell(std::string(SHARDIFY_BIN) + " '" + dir.path() + "/nope' -o '" + dir.path() + "/ds3'", &out) == 1);
  CHECK(out.find("nope") != std::string::npos);
}

TEST_CASE("convert: garbled JPEG data and bad csv rows do not crash and name the input") {
  TempDir dir;
  MakeDirs(dir / "src/a");
  std::vector<uint8_t> px = Pixels(64 * 64, 5);
  REQUIRE(WriteImage2D(dir / "src/a/ok.jpg", DType::kU8, {1, 64, 64}, px).ok());
  std::vector<uint8_t> jpg = ReadBytes(dir / "src/a/ok.jpg");
  for (size_t i = 20; i + 2 < jpg.size(); i += 3) jpg[i] = static_cast<uint8_t>(jpg[i] * 13 + 7);
  WriteBytes(dir / "src/a/garbled.jpg", jpg);
  ConvertOptions o;
  o.skip_errors = true;
  auto r = RunConvert(dir / "src", dir / "out", o);  // either decodes (libjpeg is lenient) or is skipped
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->samples + r->skipped.size() == 2);
  for (const auto& s : r->skipped) CHECK(s.reason.find("garbled.jpg") != std::string::npos);
  WriteText(dir / "t.csv", "image,label\nsrc/a/ok.jpg,1\nsrc/a/ok.jpg\n");
  auto c = RunConvert(dir / "t.csv", dir / "out2");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("t.csv: line 3") != std::string::npos);
}
