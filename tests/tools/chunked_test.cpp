#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/dataset.h"
#include "tests/tools/fixtures.h"
#include "tools/export.h"
#include "tools/info.h"
#include "tools/show.h"
#include "tools/verify.h"

namespace shardify::tools {
namespace {

using nlohmann::json;
using test::TempDir;

struct Chunked {
  TempDir tmp;
  std::string dir = tmp / "vol";
  test::NiftiSource src = test::ReadNiftiSource(test::kNiftiPath);
  Shape chunk = {1, 16, 64, 64};
  Chunked() { test::WriteVolume(dir, src, chunk); }
};

TEST_CASE("tools: a chunked volume shows its chunks and exports bit for bit", "[tools]") {
  Chunked c;
  std::ostringstream info;
  InfoOptions io;
  io.json = true;
  REQUIRE(RunInfo(c.dir, io, info).ok());
  const json ji = json::parse(info.str());
  CHECK(ji["fields"][0]["chunk_shape"] == json(c.chunk));
  CHECK(ji["raw_bytes"].get<uint64_t>() >= c.src.file.size() - c.src.vox_offset);
  std::ostringstream show;
  ShowOptions so;
  so.json = true;
  REQUIRE(RunShow(c.dir, 0, so, show).ok());
  const json js = json::parse(show.str());
  const uint64_t expect_chunks =
      ((c.src.shape[1] + 15) / 16) * ((c.src.shape[2] + 63) / 64) * ((c.src.shape[3] + 63) / 64);
  CHECK(js["fields"][0]["chunks"] == expect_chunks);
  CHECK(js["fields"][0]["codec"] == "chunked");
  std::ostringstream out;
  REQUIRE(RunExport(c.dir, 0, c.tmp / "v.nii", ExportOptions{}, out).ok());
  CHECK(test::ReadFile(c.tmp / "v.nii") == c.src.file);
}

TEST_CASE("tools: verify names the sample of a damaged chunk", "[tools]") {
  Chunked c;
  const Manifest m = Dataset::Open(c.dir).value()->manifest();
  const std::string shard = c.dir + "/" + m.shards[0].file_name;
  BlobInfo chunk;
  {
    auto ds = Dataset::Open(c.dir).value();
    chunk = ds->Sample(0).value().chunk(0, 5).value();
    std::vector<uint8_t> stored(chunk.data, chunk.data + chunk.stored_size);
    std::vector<uint8_t> file = test::ReadFile(shard);
    auto it = std::search(file.begin(), file.end(), stored.begin(), stored.end());
    REQUIRE(it != file.end());
    it[stored.size() / 2] ^= 0x20;
    test::WriteFile(shard, file);
  }
  auto r = VerifyDataset(c.dir, VerifyOptions{});
  REQUIRE(r.ok());
  REQUIRE(r->problems.size() == 1);
  CHECK(r->problems[0].shard == m.shards[0].file_name);
  CHECK(r->problems[0].sample == 0u);
  CHECK(r->problems[0].what.find("chunk") != std::string::npos);
}

}  // namespace
}  // namespace shardify::tools
