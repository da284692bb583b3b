#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "format/dataset.h"
#include "format/writer.h"
#include "tests/common/process.h"
#include "tests/tools/fixtures.h"

namespace shardify::tools {
namespace {

using test::TempDir;

int Run(const std::string& args) {
  const int code = testing::Shell(std::string(SHARDTOOL_PATH) + " " + args + " >/dev/null 2>&1");
  REQUIRE(code >= 0);
  return code;
}

TEST_CASE("tools: shardtool exits 0 on success, 1 on damage, 2 on misuse", "[tools][subprocess]") {
  TempDir tmp;
  const std::string ds = tmp / "ds";
  test::WriteGray8(ds);
  CHECK(Run("--help") == 0);
  CHECK(Run("verify --help") == 0);
  CHECK(Run("info " + ds) == 0);
  CHECK(Run("ls " + ds + " --json --limit 3") == 0);
  CHECK(Run("show " + ds + " 2") == 0);
  CHECK(Run("stats " + ds) == 0);
  CHECK(Run("grid " + ds + " -o " + (tmp / "g.png")) == 0);
  CHECK(Run("export " + ds + " 1 -o " + (tmp / "e.png")) == 0);
  CHECK(Run("bench " + ds + " --epochs 1") == 0);
  CHECK(Run("verify " + ds) == 0);
  CHECK(Run("") == 2);                          // no subcommand
  CHECK(Run("frobnicate " + ds) == 2);          // unknown subcommand
  CHECK(Run("show " + ds) == 2);                // missing N
  CHECK(Run("show " + ds + " 999") == 2);       // out of range
  CHECK(Run("info " + (tmp / "none")) == 2);    // no dataset
  CHECK(Run("ls " + ds + " --limit -1") == 2);  // not wrapped to "no limit"
  CHECK(Run("ls " + ds + " --offset -1") == 2);
  CHECK(Run("stats " + ds + " --limit -3") == 2);
  const std::string shard = ds + "/" + Dataset::Open(ds).value()->manifest().shards[1].file_name;
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 1);
  CHECK(Run("verify " + ds) == 1);
  CHECK(Run("verify --quick " + ds) == 1);
}

// 512 raw samples of 4 KiB in one shard: many pages.
void WriteRawPages(const std::string& ds) {
  WriterOptions o;
  o.codec = Codec::kRaw;
  o.fsync = false;
  auto w = DatasetWriter::Create(ds, {{"image", FieldKind::kNdarray, DType::kU8, {64, 64}, {}, {}}}, o);
  REQUIRE(w.ok());
  for (uint64_t i = 0; i < 512; ++i) {
    SampleInput s;
    s.values.push_back(FieldValue::Array(std::vector<uint8_t>(4096, static_cast<uint8_t>(i * 7)), {64, 64}));
    REQUIRE((*w)->Append(std::move(s)).ok());
  }
  REQUIRE((*w)->Finish().ok());
}

TEST_CASE("tools: --io pread reads as mmap does, a shard truncated under bench ends it with an error, not a signal",
          "[tools][subprocess]") {
  TempDir tmp;
  const std::string ds = tmp / "ds";
  WriteRawPages(ds);
  CHECK(Run("bench " + ds + " --epochs 2 --io pread") == 0);
  CHECK(Run("bench " + ds + " --epochs 1 --direct --io pread") == 0);
  CHECK(Run("verify " + ds + " --io pread") == 0);
  CHECK(Run("show " + ds + " 3 --io pread") == 0);
  CHECK(Run("info " + ds + " --io nfs") == 2);
  for (const std::string io : {"mmap", "pread"}) {
    const std::string dir = tmp / io, log = tmp / (io + ".log"), rc = tmp / (io + ".rc");
    WriteRawPages(dir);
    // Runs until the shard shrinks under it: truncated once bench holds it (an open file or
    // a mapping in /proc/PID, looked for every 10 ms, for 10 s at most).
    const std::string held =
        "grep -qs shard-00000.sfs /proc/$pid/maps || ls -l /proc/$pid/fd 2>/dev/null | grep -q "
        "shard-00000.sfs";
    const std::string script = std::string(SHARDTOOL_PATH) + " bench " + dir + " --epochs 100000000 --io " + io + " >" +
                               log + " 2>&1 & pid=$!; i=0; while [ $i -lt 1000 ] && kill -0 $pid 2>/dev/null && ! { " +
                               held + "; }; do sleep 0.01; i=$((i + 1)); done; truncate -s 4096 " + dir +
                               "/shard-00000.sfs; wait $pid; echo $? >" + rc;
    REQUIRE(testing::Shell("sh -c '" + script + "'") == 0);
    std::ifstream code(rc), text(log);
    int status = -1;
    code >> status;
    const std::string out((std::istreambuf_iterator<char>(text)), std::istreambuf_iterator<char>());
    INFO(io << ": exit " << status << ": " << out);
    CHECK((status == 1 || status == 2));  // a data or I/O error; 135 would be SIGBUS
    CHECK(out.find("shard-00000.sfs") != std::string::npos);
  }
}

}  // namespace
}  // namespace shardify::tools
