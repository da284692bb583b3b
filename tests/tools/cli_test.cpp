#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "format/dataset.h"
#include "tests/tools/fixtures.h"

namespace shardify::tools {
namespace {

using test::TempDir;

int Run(const std::string& args) {
  const std::string cmd = std::string(SHARDTOOL_PATH) + " " + args + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(rc));
  return WEXITSTATUS(rc);
}

TEST_CASE("tools: shardtool exits 0 on success, 1 on damage, 2 on misuse", "[tools]") {
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
  CHECK(Run("") == 2);                        // no subcommand
  CHECK(Run("frobnicate " + ds) == 2);        // unknown subcommand
  CHECK(Run("show " + ds) == 2);              // missing N
  CHECK(Run("show " + ds + " 999") == 2);     // out of range
  CHECK(Run("info " + (tmp / "none")) == 2);  // no dataset
  const std::string shard = ds + "/" + Dataset::Open(ds).value()->manifest().shards[1].file_name;
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 1);
  CHECK(Run("verify " + ds) == 1);
  CHECK(Run("verify --quick " + ds) == 1);
}

}  // namespace
}  // namespace shardify::tools
