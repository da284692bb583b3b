#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "format/dataset.h"
#include "reader/cuda_internal.h"
#include "reader/loader.h"
#include "tests/common/claims.h"
#include "tests/common/skip.h"
#include "tests/common/temp_dir.h"
#include "tests/reader/reader_fixtures.h"

namespace shardify {
namespace {

using testing::FixtureOptions;
using testing::TempDir;

// Flips one byte in the middle of the stored image blob of sample `index`; returns the
// shard's file name.
std::string CorruptSample(const std::string& dir, uint64_t index) {
  std::string file;
  std::vector<char> stored;
  {
    auto dataset = Dataset::Open(dir);
    REQUIRE(dataset.ok());
    auto view = (*dataset)->Sample(index);
    REQUIRE(view.ok());
    auto blob = view->blob(0);
    REQUIRE(blob.ok());
    file = view->shard_file();
    stored.assign(blob->data, blob->data + blob->stored_size);
  }
  const std::string path = dir + "/" + file;
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto at = std::search(bytes.begin(), bytes.end(), stored.begin(), stored.end());
  REQUIRE(at != bytes.end());
  REQUIRE(std::search(at + 1, bytes.end(), stored.begin(), stored.end()) == bytes.end());
  at[static_cast<long>(stored.size() / 2)] ^= 0x5A;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return file;
}

TEST_CASE("reader: a manifest claiming more samples than its shards hold fails Loader::Open naming the shard") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 40;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  REQUIRE(testing::ClaimMoreSamples(tmp / "ds", uint64_t{1} << 36));  // an order of 512 GiB
  auto ds = Dataset::Open(tmp / "ds");
  REQUIRE(ds.ok());  // the manifest agrees with itself and its checksum
  const std::string shard = (*ds)->manifest().shards.back().file_name;
  for (SampleOrder order : {SampleOrder::kSequential, SampleOrder::kShuffle, SampleOrder::kClassBalanced}) {
    LoaderOptions o;
    o.batch_size = 8;
    o.sampler.order = order;
    auto loader = Loader::Open(tmp / "ds", o);
    REQUIRE_FALSE(loader.ok());
    INFO(loader.status().ToString());
    CHECK(loader.status().code() == StatusCode::kCorruption);
    CHECK_THAT(loader.status().message(), Catch::Contains(shard) && Catch::Contains("claims"));
  }
}

TEST_CASE("reader: a corrupt sample mid-epoch fails Next() naming it, then the loader stays closed") {
  // Also pictures as shardify stores them: a flipped byte among raw literals would decode
  // without a zstd error, so only the checksum catches it.
  const bool pictures = GENERATE(false, true);
  INFO((pictures ? "pictures with a dictionary" : "plain fixture"));
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 120;
  fx.side = pictures ? 28 : 16;
  fx.pictures = pictures;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  const std::string shard = CorruptSample(tmp / "ds", 57);
  for (size_t threads : {1u, 4u}) {
    LoaderOptions o;
    o.batch_size = 10;
    o.threads = threads;
    o.sampler.order = SampleOrder::kSequential;
    auto loader = Loader::Open(tmp / "ds", o);
    REQUIRE(loader.ok());
    for (int k = 0; k < 5; ++k) {
      auto b = (*loader)->Next();
      REQUIRE(b.ok());
      CHECK((*b)->step == static_cast<uint64_t>(k));
    }
    auto bad = (*loader)->Next();
    REQUIRE(!bad.ok());
    INFO(bad.status().ToString());
    CHECK(bad.status().code() == StatusCode::kCorruption);
    CHECK(bad.status().message().find("sample 57") != std::string::npos);
    CHECK(bad.status().message().find(shard) != std::string::npos);
    CHECK(bad.status().message().find("epoch 0 step 5") != std::string::npos);
    CHECK(bad.status().message().find("checksum mismatch") != std::string::npos);
    auto again = (*loader)->Next();
    CHECK(again.status().code() == StatusCode::kCorruption);
  }
}

TEST_CASE("reader: ring bytes do not depend on the dataset size") {
  TempDir tmp;
  FixtureOptions small, large;
  small.samples = 50;
  large.samples = 2000;
  large.shard_bytes = 64 << 10;
  REQUIRE(testing::WriteFixture(tmp / "small", small).ok());
  REQUIRE(testing::WriteFixture(tmp / "large", large).ok());
  LoaderOptions o;
  o.batch_size = 16;
  o.prefetch = 3;
  auto a = Loader::Open(tmp / "small", o);
  auto b = Loader::Open(tmp / "large", o);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*a)->ring_bytes() == (*b)->ring_bytes());
  // Per slot: image 16 x 64 bytes, label and score 16 x 8 bytes, each rounded to 256.
  CHECK((*a)->ring_bytes() == 4 * (1024 + 256 + 256));
}

size_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

TEST_CASE("reader: resident memory stays bounded on a dataset 50x the ring") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 800;
  fx.side = 512;  // 256 KiB per image, 200 MiB in all, stored raw
  fx.random = true;
  fx.shard_bytes = 8 << 20;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 4;
  o.prefetch = 2;
  o.max_open_shards = 2;
  o.verify_checksums = true;
  const size_t before = ResidentBytes();
  auto loader = Loader::Open(tmp / "ds", o);
  REQUIRE(loader.ok());
  const size_t ring = (*loader)->ring_bytes();
  CHECK(ring <= 3 * 4 * ((256 << 10) + 512));
  size_t peak = before, samples = 0;
  while (true) {
    auto b = (*loader)->Next();
    REQUIRE(b.ok());
    if (!*b) break;
    const BatchField* image = (*b)->Find("image");
    for (size_t i = 0; i < (*b)->size(); ++i) {
      uint64_t index = 0;
      std::memcpy(&index, static_cast<const uint8_t*>(image->data) + i * (256 << 10), 8);
      CHECK(index == (*b)->indices[i]);
    }
    samples += (*b)->size();
    peak = std::max(peak, ResidentBytes());
  }
  CHECK(samples == 800);
  const size_t growth = peak - std::min(peak, before);
  WARN("dataset 200 MiB, ring " << ring / 1024 << " KiB, resident growth " << growth / 1024 << " KiB");
  CHECK(growth < 48u << 20);  // ring + two mapped 8 MiB shards + allocator slack
}

TEST_CASE("reader: without a CUDA device, slots are aligned host memory and staging is refused") {
  if (CudaDeviceAvailable()) SHARDIFY_SKIP("a CUDA device answers; tests/cuda covers this machine");
  TempDir tmp;
  FixtureOptions fx;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 7;
  auto loader = Loader::Open(tmp / "ds", o);
  REQUIRE(loader.ok());
  auto b = (*loader)->Next();
  REQUIRE(b.ok());
  CHECK(!(*b)->pinned);
  CHECK((*b)->device_ready_event == nullptr);
  for (const BatchField& f : (*b)->fields) {
    CHECK(reinterpret_cast<uintptr_t>(f.data) % detail::kHostAlignment == 0);
    CHECK(f.device_data == nullptr);
  }
  o.stage_to_device = true;
  CHECK(Loader::Open(tmp / "ds", o).status().code() == StatusCode::kUnsupported);
}

}  // namespace
}  // namespace shardify
